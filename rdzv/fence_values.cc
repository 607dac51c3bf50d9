#include "fence_values.h"

#include <algorithm>

#include "bytes.h"
#include "run_hang.h"
#include "run_keys.h"

namespace ltd::rdzv {

namespace {

// Cut between characters, so that the record stays valid UTF-8 where it was.
void CutText(std::string& text, size_t max) {
  if (text.size() <= max) return;
  size_t consumed = 0;
  DisplayEscapePrefix(text, max, &consumed);
  text.resize(consumed);
}

}  // namespace

std::optional<RootCause> ParseCause(const nlohmann::json& j, size_t message_max) {
  if (!j.is_object()) return std::nullopt;
  auto job = JobFromJson(nlohmann::json{{"id", "0"}, {"state", "FAILED"}, {"root_cause", j}});
  if (!job || !job->root_cause) return std::nullopt;
  RootCause cause = std::move(*job->root_cause);
  // Another node's words travel into this job's record: bounded.
  CutText(cause.message, message_max);
  CutText(cause.cancelled_by, std::min<size_t>(256, message_max));
  return cause;
}

size_t NodeTextMax(int nnodes) {
  constexpr size_t kRunBytes = 256 * 1024;
  return std::clamp<size_t>(kRunBytes / static_cast<size_t>(std::max(nnodes, 1)), 16, 256);
}

bool ApplyStatus(const std::string& value, NodeStatus& n, size_t text_max) {
  auto j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  const std::string state = JsonText(j, "state", 32);
  n.state = ParseJobState(state) ? state : "";
  if (std::string host = JsonText(j, "host", text_max); !host.empty()) n.host = std::move(host);
  n.root_cause.reset();
  if (auto c = j.find("root_cause"); c != j.end() && c->is_object()) {
    n.root_cause = ParseCause(*c, text_max);
  }
  return true;
}

std::optional<AttemptValue> ParseAttempt(const std::string& rest, const std::string& value,
                                         int64_t create_revision, int nnodes, int devices) {
  if (!rest.starts_with("attempts/")) return std::nullopt;
  const size_t slash = rest.find('/', 9);
  if (slash == std::string::npos) return std::nullopt;
  AttemptValue v;
  v.attempt = NumberAfter(std::string_view(rest).substr(0, slash), "attempts/");
  const std::string_view what = std::string_view(rest).substr(slash);
  const int reporter = std::max(NumberAfter(what, "/report/"), NumberAfter(what, "/gone/"));
  v.verdict = what == "/verdict";
  if (v.attempt < 0 || (!v.verdict && (reporter < 0 || reporter >= nnodes))) return std::nullopt;
  auto j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  std::optional<RootCause> cause = ParseCause(j.contains("cause") ? j["cause"] : j);
  std::optional<Evidence> kind = ParseEvidence(JsonText(j, "kind", 32));
  if (!cause || !kind) return std::nullopt;
  NodeReport& report = v.report;
  report.cause = std::move(*cause);
  report.kind = *kind;
  report.what = JsonText(j, "what");
  report.order = create_revision;
  if (v.verdict) {
    const int64_t node = JsonInt(j, "node").value_or(-1);
    if (node < 0 || node >= nnodes) return std::nullopt;
    report.node = static_cast<int>(node);
    report.cause.node = report.node;
    v.note = JsonText(j, "note");
    return v;
  }
  // The key says whose it is; a value cannot speak for another node.
  report.node = reporter;
  report.cause.node = reporter;
  v.gone = what.starts_with("/gone/");
  if (v.gone) {
    report.kind = Evidence::kNodeGone;
  } else if (auto h = j.find("hang"); h != j.end()) {
    report.hang = NodeHangFromJson(*h, reporter, nnodes, devices);
  }
  return v;
}

}  // namespace ltd::rdzv
