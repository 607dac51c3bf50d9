#include "run_hang.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "byte_size.h"
#include "bytes.h"
#include "duration.h"
#include "hang_report.h"
#include "str_util.h"

namespace ltd {
namespace {

// The head of a stack within `max` bytes, cut at a line, saying how much
// is left out and where it is.
std::string CutStack(std::string_view stack, size_t max) {
  if (stack.size() <= max) return std::string(stack);
  constexpr size_t kMark = 64;  // room for the line that says so
  size_t keep = max > kMark ? max - kMark : 0;
  const size_t line = stack.rfind('\n', keep);
  if (line != std::string_view::npos && line + 1 > keep / 2) keep = line + 1;
  return Cat(stack.substr(0, keep), "... (", stack.size() - keep,
             " more bytes in its node's own record)\n");
}

std::string Cut(std::string text, size_t max) {
  if (text.size() > max) text.resize(max);
  return text;
}

// A bytes field of another node's entry, cut to `max`; "" when absent or
// of another type. `over`: set when it was longer than `max`.
std::string BytesAt(const nlohmann::json& j, const char* key, size_t max, bool* over = nullptr) {
  auto it = j.find(key);
  if (it == j.end()) return "";
  if (it->is_string()) {
    const std::string& text = it->get_ref<const std::string&>();
    if (text.size() > max && over != nullptr) *over = true;
    return text.substr(0, max);
  }
  // {"base64": ...} (bytes that are no UTF-8): one past the bound is not decoded.
  auto b64 = it->is_object() ? it->find("base64") : it->end();
  if (b64 != it->end() && b64->is_string() &&
      b64->get_ref<const std::string&>().size() > 4 * (max / 3 + 1)) {
    if (over != nullptr) *over = true;
    return "";
  }
  return Cut(BytesFromJson(*it).value_or(""), max);
}

bool BoolAt(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

// An integer of another node's entry within int64_t; nullopt otherwise.
std::optional<int64_t> IntAt(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(v);
  }
  return it->get<int64_t>();
}

// Why a node's ranks are not in the run's report, from what it sent
// (`report`: its own, not its loss) and whether it vanished.
std::string WhyMissing(const NodeReport* report, bool gone, std::chrono::milliseconds window) {
  if (report != nullptr && report->kind != Evidence::kPending) {
    const std::string& said = report->what.empty() ? report->cause.message : report->what;
    return Cut(
        Cat("its report has no hang evidence (", said.empty() ? "no cause given" : said, ")"),
        kMaxHangTextBytes);
  }
  if (gone) return "gone (its supervisor and ranks vanished) before it reported its ranks";
  if (report != nullptr) return Cat("its stacks did not come within ", FormatDuration(window));
  return Cat("no report within ", FormatDuration(window));
}

// The most of one stack that is read from another node's entry.
constexpr size_t kMaxSentStackBytes = 64 * 1024;

}  // namespace

bool IsHangCause(const RootCause& cause) {
  return cause.reason == CauseReason::kHang || cause.reason == CauseReason::kStartupTimeout;
}

std::vector<HangReportRank> CompactHang(const HangReport& report, int node, int culprit) {
  std::vector<HangReportRank> out;
  for (const HangReportRank& r : report.ranks) {
    if (out.size() >= kMaxNodeHangRanks) break;
    HangReportRank c;
    c.rank = r.rank;
    c.node = node;
    c.last_step = r.last_step;
    c.stalled = r.stalled;
    c.straggler = r.straggler;
    c.in_collective = r.in_collective;
    c.process_state = Cut(r.process_state, kMaxHangTextBytes);
    c.stack_status = r.stack_status;
    c.stack_note = Cut(r.stack_note, kMaxHangTextBytes);
    out.push_back(std::move(c));
  }
  // Stacks of the ranks that do not wait in a collective: the one the
  // cause names first, then by rank, while the node's bound lasts.
  std::vector<size_t> order(out.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_partition(order.begin(), order.end(),
                        [&](size_t i) { return out[i].rank == culprit; });
  constexpr size_t kLeast = 256;  // less is no stack worth reading
  size_t left = kMaxNodeHangStackBytes;
  for (size_t i : order) {
    const HangReportRank& r = report.ranks[i];
    if (!StackIsEvidence(r) || (r.in_collective && r.rank != culprit)) continue;
    if (left < kLeast && r.stack.size() > left) {
      out[i].stack_status = StackStatus::kSkipped;
      out[i].stack_note =
          Cat("left out of its node's report (at most ", FormatByteSize(kMaxNodeHangStackBytes),
              " of stacks); its node's own record has it");
      continue;
    }
    std::string stack = CutStack(r.stack, std::min(kMaxHangStackBytes, left));
    left -= std::min(left, stack.size());
    out[i].stack = std::move(stack);
  }
  return out;
}

nlohmann::json NodeHangToJson(const std::vector<HangReportRank>& ranks, int devices) {
  nlohmann::json out = nlohmann::json::array();
  for (const HangReportRank& r : ranks) {
    nlohmann::json e = {
        {"rank", int64_t{r.node} * devices + r.rank},
        {"step", r.last_step >= 0 ? nlohmann::json(r.last_step) : nlohmann::json(nullptr)},
        {"stalled", r.stalled},
        {"in_collective", r.in_collective},
        {"stack_status", ToString(r.stack_status)},
    };
    if (r.straggler) e["straggler"] = true;
    if (!r.process_state.empty()) e["state"] = BytesToJson(r.process_state);
    if (!r.stack.empty()) e["stack"] = BytesToJson(r.stack);
    if (!r.stack_note.empty()) e["stack_note"] = BytesToJson(r.stack_note);
    out.push_back(std::move(e));
  }
  return out;
}

std::optional<std::vector<HangReportRank>> NodeHangFromJson(const nlohmann::json& j, int node,
                                                            int nnodes, int devices) {
  if (!j.is_array() || node < 0 || node >= nnodes || devices < 1) return std::nullopt;
  const int64_t first = int64_t{node} * devices;
  const size_t most = std::min<size_t>(static_cast<size_t>(devices), kMaxNodeHangRanks);
  std::vector<HangReportRank> out;
  std::set<int> seen;
  size_t stack_bytes = 0, looked = 0;
  for (const nlohmann::json& e : j) {
    // An honest node sends one entry a rank: a longer list is not read on.
    if (out.size() >= most || ++looked > 2 * most + 16) break;
    if (!e.is_object()) continue;
    const std::optional<int64_t> global = IntAt(e, "rank");
    if (!global) continue;
    // A node speaks for its own ranks only.
    if (*global < first || *global >= first + devices) continue;
    const int local = static_cast<int>(*global - first);
    if (!seen.insert(local).second) continue;
    HangReportRank r;
    r.node = node;
    r.rank = local;
    r.last_step = std::max<int64_t>(-1, IntAt(e, "step").value_or(-1));
    r.stalled = BoolAt(e, "stalled");
    r.straggler = BoolAt(e, "straggler");
    r.in_collective = BoolAt(e, "in_collective");
    r.process_state = BytesAt(e, "state", kMaxHangTextBytes);
    r.stack_note = BytesAt(e, "stack_note", kMaxHangTextBytes);
    if (auto s = e.find("stack_status"); s != e.end() && s->is_string()) {
      r.stack_status =
          ParseStackStatus(Cut(s->get<std::string>(), 32)).value_or(StackStatus::kUnknown);
    }
    // A stack longer than a node sends (its own record has it whole) is
    // cut as the sender would have.
    bool oversize = false;
    std::string stack = BytesAt(e, "stack", kMaxSentStackBytes, &oversize);
    if (stack.size() > kMaxHangStackBytes) stack = CutStack(stack, kMaxHangStackBytes);
    if (oversize && stack.empty()) {
      r.stack_status = StackStatus::kSkipped;
      r.stack_note =
          Cat("left out: its stack as sent was over ", FormatByteSize(kMaxSentStackBytes));
    } else if (stack_bytes + stack.size() > kMaxNodeHangStackBytes) {
      stack.clear();
      r.stack_status = StackStatus::kSkipped;
      r.stack_note = Cat("left out: its node's report carried more than ",
                         FormatByteSize(kMaxNodeHangStackBytes), " of stacks");
    }
    stack_bytes += stack.size();
    r.stack = std::move(stack);
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(),
            [](const HangReportRank& a, const HangReportRank& b) { return a.rank < b.rank; });
  return out;
}

HangReport MergeRunHang(int me, int nnodes, int devices, const std::optional<HangReport>& own,
                        const std::vector<NodeReport>& reports, int culprit_node,
                        std::chrono::milliseconds window, WallTime now) {
  HangReport out;
  out.at = own ? own->at : now;
  // Each node's report (a node's last replaces its first) and whether it vanished.
  std::map<int, const NodeReport*> said;
  std::set<int> gone;
  for (const NodeReport& r : reports) {
    if (r.node < 0 || r.node >= nnodes) continue;
    if (r.kind == Evidence::kNodeGone && !r.hang) {
      gone.insert(r.node);
      continue;
    }
    const NodeReport*& slot = said[r.node];
    if (slot == nullptr || r.order >= slot->order) slot = &r;
  }
  std::vector<int> order;  // the culprit's node first: the bounds never leave it out
  if (culprit_node >= 0 && culprit_node < nnodes) order.push_back(culprit_node);
  std::map<int, std::string> missing;
  size_t ranks_left = kMaxRunHangRanks, stacks_left = kMaxRunHangStackBytes;
  auto take = [&](int node) {
    if (node == me && own) {
      for (HangReportRank r : own->ranks) {
        r.node = me;
        out.ranks.push_back(std::move(r));
      }
      return;
    }
    auto it = said.find(node);
    const NodeReport* report = it == said.end() ? nullptr : it->second;
    if (report == nullptr || report->kind == Evidence::kPending || !report->hang) {
      missing[node] = WhyMissing(report, gone.count(node) > 0, window);
      return;
    }
    const std::vector<HangReportRank>& ranks = *report->hang;
    if (ranks.size() > ranks_left) {
      missing[node] = Cat("left out: the run's hang report holds at most ", kMaxRunHangRanks,
                          " ranks of other nodes; its own record has them");
      return;
    }
    ranks_left -= ranks.size();
    for (HangReportRank r : ranks) {
      r.node = node;
      if (r.stack.size() > stacks_left) {
        r.stack.clear();
        r.stack_status = StackStatus::kSkipped;
        r.stack_note = Cat("left out: the run's hang report holds at most ",
                           FormatByteSize(kMaxRunHangStackBytes),
                           " of other nodes' stacks; its node's own record has it");
      }
      stacks_left -= r.stack.size();
      out.ranks.push_back(std::move(r));
    }
  };
  for (int node : order) take(node);
  for (int node = 0; node < nnodes; ++node) {
    if (node != culprit_node) take(node);
  }
  std::sort(out.ranks.begin(), out.ranks.end(),
            [](const HangReportRank& a, const HangReportRank& b) {
              return std::pair(a.node, a.rank) < std::pair(b.node, b.rank);
            });
  // As within a node (AttributeHang), across the run: when ranks wait in
  // a collective, the ranks whose stacks show none are what they wait for,
  // whichever node's deadline passed first.
  auto outside = [](const HangReportRank& r) { return !r.in_collective && StackIsEvidence(r); };
  const bool waits = std::any_of(out.ranks.begin(), out.ranks.end(),
                                 [](const HangReportRank& r) { return r.in_collective; });
  if (waits && std::any_of(out.ranks.begin(), out.ranks.end(), outside)) {
    for (HangReportRank& r : out.ranks) r.stalled = outside(r);
  }
  for (const HangReportRank& r : out.ranks) {
    const int global = r.node * devices + r.rank;
    if (r.stalled) out.stalled_ranks.push_back(global);
    if (r.straggler) out.straggler_ranks.push_back(global);
  }
  for (const auto& [node, why] : missing) {
    if (out.missing_nodes.size() >= kMaxMissingNodesListed) break;
    out.missing_nodes.push_back({node, why});
  }
  if (missing.size() > kMaxMissingNodesListed) {
    out.missing_nodes.push_back(
        {-1, Cat(missing.size() - kMaxMissingNodesListed,
                 " more nodes are missing (the list holds at most ", kMaxMissingNodesListed, ")")});
  }
  return out;
}

}  // namespace ltd
