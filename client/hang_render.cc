#include "hang_render.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "bytes.h"
#include "render.h"
#include "str_util.h"

namespace ltd {
namespace {

using render::Line;
using render::Opt;
using render::Time;

// What became of a rank's stack, for `show`: "taken (eu-stack)", "timed
// out (gdb was still running ...)"; "" in records that did not say.
std::string StackStatusLine(const v1::HangReport::Rank& r) {
  // The status's own name ("timed_out"), as words; none for UNSPECIFIED.
  if (r.stack_status() == v1::HangReport::Rank::STACK_STATUS_UNSPECIFIED) return "";
  std::string word = v1::HangReport::Rank::StackStatus_Name(r.stack_status());
  if (word.empty()) return "";
  std::replace(word.begin(), word.end(), '_', ' ');
  if (r.stack_note().empty()) return word;
  // The note is escaped by the daemon already (DisplayEscapeElided).
  return word + " (" + r.stack_note() + ")";
}

// The stack of a hung rank, shortened for a terminal: `--json` has it all.
void PrintStack(const std::string& stack, FILE* out, int indent = 6) {
  constexpr int kMaxLines = 24;
  constexpr size_t kMaxWidth = 160;
  int shown = 0, skipped = 0;
  size_t start = 0;
  while (start < stack.size()) {
    size_t end = stack.find('\n', start);
    if (end == std::string::npos) end = stack.size();
    const std::string_view line = std::string_view(stack).substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    if (shown >= kMaxLines) {
      ++skipped;
      continue;
    }
    size_t consumed = 0;
    std::string text = DisplayEscapePrefix(line, kMaxWidth - 3, &consumed, Controls::kEscape);
    if (consumed < line.size()) text += "...";
    std::fprintf(out, "%*s%s\n", indent, "", text.c_str());
    ++shown;
  }
  if (skipped > 0)
    std::fprintf(out, "%*s... %d more lines (ltctl --json show)\n", indent, "", skipped);
}

// A multi-node run's hang report: its ranks carry their node.
bool RunWide(const v1::HangReport& h) {
  if (h.missing_nodes_size() > 0) return true;
  return std::any_of(h.ranks().begin(), h.ranks().end(),
                     [](const v1::HangReport::Rank& r) { return r.has_node(); });
}

// Global RANKs of a run as "node 1 rank 0 (global 2)", a list of them.
std::string RunRanks(const google::protobuf::RepeatedField<int32_t>& ranks, int devices) {
  if (ranks.empty()) return "none";
  std::string out;
  for (int g : ranks) {
    out += (out.empty() ? "" : ", ") +
           (devices > 0 ? Cat("node ", g / devices, " rank ", g % devices, " (global ", g, ")")
                        : Cat("global rank ", g));
  }
  return out;
}

// The hang report of a multi-node run, node by node: each rank's step,
// whether it waits in a collective, and the stacks the record has; the
// nodes that told nothing, with why.
void PrintRunHangReport(const v1::Job& j, FILE* out) {
  const auto& h = j.hang_report();
  const int devices = j.devices();
  std::fprintf(out, "\nHang report of the run (%s), every node's ranks:\n",
               Time(h.has_at(), h.at()).c_str());
  std::fprintf(out, "  stalled first: %s\n", RunRanks(h.stalled_ranks(), devices).c_str());
  std::fprintf(out, "  stragglers:    %s\n", RunRanks(h.straggler_ranks(), devices).c_str());
  // Nodes in order, each either with its ranks or missing.
  auto missing = h.missing_nodes().begin();
  auto missing_up_to = [&](int64_t node) {
    for (; missing != h.missing_nodes().end() && missing->node() <= node; ++missing) {
      if (missing->node() < 0) {
        std::fprintf(out, "  %s\n", Line(missing->why()).c_str());
      } else {
        std::fprintf(out, "  node %d: %s\n", missing->node(), Line(missing->why()).c_str());
      }
    }
  };
  int node = -1;
  for (const auto& r : h.ranks()) {
    if (r.node() != node) {
      node = r.node();
      missing_up_to(node - 1);
      std::fprintf(out, "  node %d:\n", node);
    }
    const bool taken = r.stack_status() == v1::HangReport::Rank::taken ||
                       r.stack_status() == v1::HangReport::Rank::STACK_STATUS_UNSPECIFIED;
    const std::string where = r.in_collective()             ? ", waits in a collective"
                              : taken && !r.stack().empty() ? ", outside any collective"
                                                            : "";
    const std::string state = r.process_state().empty() ? "" : ", " + Line(r.process_state());
    std::fprintf(out, "    rank %d (global %d): last step %s%s%s%s%s\n", r.rank(),
                 node * devices + r.rank(), Opt(r.has_last_step(), r.last_step()).c_str(),
                 r.stalled() ? ", STALLED" : "", r.straggler() ? ", straggler" : "", where.c_str(),
                 state.c_str());
    // Another node's rank that waits in a collective comes without its
    // stack (its node's own record has it): nothing to say of it here.
    if (r.stack().empty() && taken) continue;
    if (std::string stack = StackStatusLine(r); !stack.empty())
      std::fprintf(out, "      stack: %s\n", stack.c_str());
    PrintStack(r.stack(), out, 8);
  }
  missing_up_to(INT64_MAX);
}

}  // namespace

std::string RankList(const google::protobuf::RepeatedField<int32_t>& ranks) {
  if (ranks.empty()) return "none";
  std::string out = "rank(s) [";
  for (int r : ranks) out += (out.size() > 9 ? "," : "") + std::to_string(r);
  return out + "]";
}

void PrintHangReport(const v1::Job& j, FILE* out) {
  if (RunWide(j.hang_report())) {
    PrintRunHangReport(j, out);
  } else {
    const auto& h = j.hang_report();
    std::fprintf(out, "\nHang report (%s):\n", Time(h.has_at(), h.at()).c_str());
    std::fprintf(out, "  stalled first: %s\n", RankList(h.stalled_ranks()).c_str());
    std::fprintf(out, "  stragglers:    %s\n", RankList(h.straggler_ranks()).c_str());
    for (const auto& r : h.ranks()) {
      std::fprintf(out, "  rank %d: last step %s, last heartbeat %s%s%s\n", r.rank(),
                   Opt(r.has_last_step(), r.last_step()).c_str(),
                   Time(r.has_last_heartbeat_at(), r.last_heartbeat_at()).c_str(),
                   r.stalled() ? ", STALLED" : "", r.straggler() ? ", straggler" : "");
      if (std::string stack = StackStatusLine(r); !stack.empty())
        std::fprintf(out, "    stack: %s\n", stack.c_str());
      PrintStack(r.stack(), out);
    }
  }
}

}  // namespace ltd
