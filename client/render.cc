#include "render.h"

#include <chrono>
#include <cmath>
#include <ctime>

#include "table.h"

namespace ltd {
namespace {

std::string Str(const nlohmann::json& j, const char* key, const std::string& dflt = "-") {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (it->is_string()) return it->get<std::string>().empty() ? dflt : it->get<std::string>();
  if (it->is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", it->get<double>());
    return buf;
  }
  return it->dump();
}

std::optional<std::time_t> ParseUtc(const std::string& s) {
  std::tm tm{};
  if (strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return std::nullopt;
  return timegm(&tm);
}

std::string Human(int64_t secs) {
  char buf[32];
  if (secs < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(secs));
  } else if (secs < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(secs / 60),
                  static_cast<long long>(secs % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(secs / 3600),
                  static_cast<long long>(secs % 3600 / 60));
  }
  return buf;
}

// How long the job ran (or has run so far).
std::string Elapsed(const nlohmann::json& job) {
  auto start = ParseUtc(Str(job, "started_at", ""));
  if (!start) return "-";
  auto end = ParseUtc(Str(job, "ended_at", ""));
  const std::time_t stop = end ? *end : std::time(nullptr);
  return Human(std::max<int64_t>(0, stop - *start));
}

std::string Progress(const nlohmann::json& job) {
  int64_t step = -1;
  double rate = 0;
  bool straggler = false;
  for (const auto& r : job.value("ranks", nlohmann::json::array())) {
    if (r.contains("last_step") && r["last_step"].is_number()) {
      const int64_t s = r["last_step"].get<int64_t>();
      step = step < 0 ? s : std::min(step, s);
    }
    rate = std::max(rate, r.value("steps_per_second", 0.0));
    straggler = straggler || r.value("straggler", false);
  }
  if (step < 0) return "-";
  if (job.value("state", "") != "RUNNING")
    return std::to_string(step);  // a rate only while it runs
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld @ %.1f/s%s", static_cast<long long>(step), rate,
                straggler ? " !" : "");
  return buf;
}

// The stack of a hung rank, shortened for a terminal: `--json` has it all.
void PrintStack(const std::string& stack, FILE* out) {
  constexpr int kMaxLines = 24;
  int shown = 0, skipped = 0;
  size_t start = 0;
  while (start < stack.size()) {
    size_t end = stack.find('\n', start);
    if (end == std::string::npos) end = stack.size();
    std::string line = stack.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    if (shown >= kMaxLines) {
      ++skipped;
      continue;
    }
    if (line.size() > 160) line = line.substr(0, 157) + "...";
    std::fprintf(out, "      %s\n", line.c_str());
    ++shown;
  }
  if (skipped > 0) std::fprintf(out, "      ... %d more lines (ltctl --json show)\n", skipped);
}

}  // namespace

std::string DescribeCause(const nlohmann::json& c) {
  if (!c.is_object()) return "";
  const std::string reason = Str(c, "reason", "");
  const std::string rank = Str(c, "rank", "");
  std::string what;
  if (reason == "exited") {
    what = "rank " + rank + " exited with code " + Str(c, "exit_code");
  } else if (reason == "signaled") {
    what = "rank " + rank + " died of signal " + Str(c, "signal");
  } else if (reason == "hang" || reason == "startup_timeout") {
    what = "rank " + rank + " hung";
  } else if (reason == "spawn_failed") {
    what = "the program could not start";
  } else if (reason == "cancelled") {
    what = "cancelled";
  } else if (reason == "daemon_lost") {
    what = "lost when ltd died";
  } else {
    what = reason;
  }
  const std::string message = Str(c, "message", "");
  if (!message.empty() && message.find(what) == std::string::npos) what += ": " + message;
  return what;
}

void PrintJobTable(const std::vector<nlohmann::json>& jobs, FILE* out) {
  Table t({"ID", "NAME", "USER", "STATE", "DEVICES", "STEP", "ELAPSED", "EXIT", "COMMAND"});
  for (const auto& j : jobs) {
    std::string cmd;
    for (const auto& a : j.value("argv", nlohmann::json::array())) {
      if (!cmd.empty()) cmd += ' ';
      cmd += a.get<std::string>();
    }
    if (cmd.size() > 40) cmd = cmd.substr(0, 37) + "...";
    t.Add({Str(j, "id"), Str(j, "name"), Str(j, "user"), Str(j, "state"), Str(j, "devices"),
           Progress(j), Elapsed(j), Str(j, "exit_code"), cmd});
  }
  t.Print(out);
}

void PrintJob(const nlohmann::json& j, FILE* out) {
  auto field = [&](const char* label, const std::string& value) {
    std::fprintf(out, "%-14s %s\n", label, value.c_str());
  };
  field("Job:", Str(j, "id") + (Str(j, "name", "").empty() ? "" : " (" + Str(j, "name") + ")"));
  field("User:", Str(j, "user"));
  field("State:", Str(j, "state"));
  field("Exit code:", Str(j, "exit_code"));
  std::string cmd;
  for (const auto& a : j.value("argv", nlohmann::json::array()))
    cmd += (cmd.empty() ? "" : " ") + a.get<std::string>();
  field("Command:", cmd);
  field("Devices:", Str(j, "devices") +
                        (Str(j, "cuda_visible_devices", "").empty()
                             ? ""
                             : " (CUDA_VISIBLE_DEVICES=" + Str(j, "cuda_visible_devices") + ")"));
  field("Master port:", Str(j, "master_port"));
  field("Containment:", Str(j, "containment"));
  field("Restarts:", Str(j, "restart_count") + " of " + Str(j, "max_restarts"));
  field("Submitted:", Str(j, "submitted_at"));
  field("Started:", Str(j, "started_at"));
  field("Ended:", Str(j, "ended_at"));
  field("Elapsed:", Elapsed(j));
  if (j.contains("root_cause") && j["root_cause"].is_object()) {
    const auto& c = j["root_cause"];
    field("Root cause:", DescribeCause(c));
    field("  reason:", Str(c, "reason"));
    field("  rank:", Str(c, "rank"));
    field("  at:", Str(c, "at"));
  }
  std::fprintf(out, "\n");
  Table ranks({"RANK", "PID", "STATE", "EXIT", "SIGNAL", "STEP", "STEPS/S", "LAST HEARTBEAT", ""});
  for (const auto& r : j.value("ranks", nlohmann::json::array())) {
    ranks.Add({Str(r, "rank"), Str(r, "pid"), Str(r, "state"), Str(r, "exit_code"),
               Str(r, "signal"), Str(r, "last_step"), Str(r, "steps_per_second"),
               Str(r, "last_heartbeat_at"), r.value("straggler", false) ? "straggler" : ""});
  }
  ranks.Print(out);
  const auto& attempts = j.value("attempts", nlohmann::json::array());
  if (attempts.size() > 1) {
    std::fprintf(out, "\nAttempts:\n");
    Table t({"RESTART", "PORT", "STARTED", "ENDED", "ROOT CAUSE"});
    for (const auto& a : attempts) {
      t.Add(
          {Str(a, "restart_count"), Str(a, "master_port"), Str(a, "started_at"), Str(a, "ended_at"),
           a.contains("root_cause") && a["root_cause"].is_object() ? DescribeCause(a["root_cause"])
                                                                   : "-"});
    }
    t.Print(out);
  }
  if (j.contains("hang_report") && j["hang_report"].is_object()) {
    const auto& h = j["hang_report"];
    std::fprintf(out, "\nHang report (%s):\n", Str(h, "at").c_str());
    std::fprintf(out, "  stalled first: rank(s) %s\n",
                 h.value("stalled_ranks", nlohmann::json::array()).dump().c_str());
    std::fprintf(out, "  stragglers:    rank(s) %s\n",
                 h.value("straggler_ranks", nlohmann::json::array()).dump().c_str());
    for (const auto& r : h.value("ranks", nlohmann::json::array())) {
      std::fprintf(out, "  rank %s: last step %s, last heartbeat %s%s%s\n", Str(r, "rank").c_str(),
                   Str(r, "last_step").c_str(), Str(r, "last_heartbeat_at").c_str(),
                   r.value("stalled", false) ? ", STALLED" : "",
                   r.value("straggler", false) ? ", straggler" : "");
      PrintStack(Str(r, "stack", ""), out);
    }
  }
}

}  // namespace ltd
