#include "job.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <utility>

#include "bytes.h"
#include "str_util.h"

namespace ltd {
namespace {

constexpr std::array<std::pair<JobState, std::string_view>, 10> kJobStates = {{
    {JobState::kPending, "PENDING"},
    {JobState::kStarting, "STARTING"},
    {JobState::kRunning, "RUNNING"},
    {JobState::kSucceeded, "SUCCEEDED"},
    {JobState::kFailed, "FAILED"},
    {JobState::kCancelled, "CANCELLED"},
    {JobState::kLost, "LOST"},
    {JobState::kTimeout, "TIMEOUT"},
    {JobState::kOutOfMemory, "OUT_OF_MEMORY"},
    {JobState::kNodeFail, "NODE_FAIL"},
}};

constexpr std::array<std::pair<RankState, std::string_view>, 6> kRankStates = {{
    {RankState::kPending, "PENDING"},
    {RankState::kRunning, "RUNNING"},
    {RankState::kExited, "EXITED"},
    {RankState::kFailed, "FAILED"},
    {RankState::kKilled, "KILLED"},
    {RankState::kLost, "LOST"},
}};

constexpr std::array<std::pair<CauseReason, std::string_view>, 12> kReasons = {{
    {CauseReason::kExited, "exited"},
    {CauseReason::kSignaled, "signaled"},
    {CauseReason::kHang, "hang"},
    {CauseReason::kStartupTimeout, "startup_timeout"},
    {CauseReason::kCancelled, "cancelled"},
    {CauseReason::kDaemonLost, "daemon_lost"},
    {CauseReason::kSpawnFailed, "spawn_failed"},
    {CauseReason::kSupervisorLost, "supervisor_lost"},
    {CauseReason::kRemoteFailure, "remote_failure"},
    {CauseReason::kDependencyFailed, "dependency_failed"},
    {CauseReason::kTimeLimit, "time_limit"},
    {CauseReason::kOom, "oom"},
}};

template <typename E, size_t N>
std::string_view Name(const std::array<std::pair<E, std::string_view>, N>& table, E value) {
  for (const auto& [e, name] : table) {
    if (e == value) return name;
  }
  return "UNKNOWN";
}

template <typename E, size_t N>
std::optional<E> Lookup(const std::array<std::pair<E, std::string_view>, N>& table,
                        std::string_view name) {
  for (const auto& [e, n] : table) {
    if (n == name) return e;
  }
  return std::nullopt;
}

}  // namespace

std::string_view ToString(JobState s) { return Name(kJobStates, s); }
std::string_view ToString(RankState s) { return Name(kRankStates, s); }
std::string_view ToString(CauseReason r) { return Name(kReasons, r); }
std::optional<JobState> ParseJobState(std::string_view s) { return Lookup(kJobStates, s); }
std::optional<RankState> ParseRankState(std::string_view s) { return Lookup(kRankStates, s); }
std::optional<CauseReason> ParseCauseReason(std::string_view s) { return Lookup(kReasons, s); }

constexpr std::array<std::pair<HeartbeatMode, std::string_view>, 3> kHeartbeatModes = {{
    {HeartbeatMode::kNone, "none"},
    {HeartbeatMode::kExplicit, "explicit"},
    {HeartbeatMode::kAutomatic, "automatic"},
}};
std::string_view ToString(HeartbeatMode m) { return Name(kHeartbeatModes, m); }
std::optional<HeartbeatMode> ParseHeartbeatMode(std::string_view s) {
  return Lookup(kHeartbeatModes, s);
}

constexpr std::array<std::pair<StackStatus, std::string_view>, 5> kStackStatuses = {{
    {StackStatus::kUnknown, ""},
    {StackStatus::kTaken, "taken"},
    {StackStatus::kSkipped, "skipped"},
    {StackStatus::kTimedOut, "timed_out"},
    {StackStatus::kFailed, "failed"},
}};
std::string_view ToString(StackStatus s) { return Name(kStackStatuses, s); }
std::optional<StackStatus> ParseStackStatus(std::string_view s) {
  return Lookup(kStackStatuses, s);
}

bool IsFinal(JobState s) {
  return s != JobState::kPending && s != JobState::kStarting && s != JobState::kRunning;
}

JobState EndStateFor(const RootCause& cause) {
  switch (cause.reason) {
    case CauseReason::kTimeLimit:
      return JobState::kTimeout;
    case CauseReason::kOom:
      return JobState::kOutOfMemory;
    case CauseReason::kCancelled:
    case CauseReason::kDependencyFailed:
      return JobState::kCancelled;
    case CauseReason::kDaemonLost:
    case CauseReason::kSupervisorLost:
      return JobState::kLost;
    case CauseReason::kRemoteFailure: {
      if (!cause.remote_reason || *cause.remote_reason == CauseReason::kRemoteFailure) break;
      if (*cause.remote_reason == CauseReason::kSupervisorLost ||
          *cause.remote_reason == CauseReason::kDaemonLost) {
        return JobState::kNodeFail;
      }
      RootCause remote;
      remote.reason = *cause.remote_reason;
      return EndStateFor(remote);
    }
    case CauseReason::kExited:
    case CauseReason::kSignaled:
    case CauseReason::kHang:
    case CauseReason::kStartupTimeout:
    case CauseReason::kSpawnFailed:
      break;
  }
  return JobState::kFailed;
}

RankBeat BeatOf(const Rank& rank) {
  return RankBeat{rank.rank, rank.last_step, rank.last_heartbeat_at, rank.steps_per_second};
}

void CutArgv(Job& job, size_t max_argv) {
  std::vector<std::string>& argv = job.spec.argv;
  size_t kept = 0;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (kept + argv[i].size() <= max_argv) {
      kept += argv[i].size();
      continue;
    }
    // This one in part (the first byte of a character may stay without the
    // rest: the display escapes it), and none after it.
    const size_t part = i == 0 ? max_argv : 0;
    uint64_t cut = argv[i].size() - std::min(part, argv[i].size());
    for (size_t j = i + 1; j < argv.size(); ++j) cut += argv[j].size();
    argv[i].resize(std::min(part, argv[i].size()));
    argv[i].shrink_to_fit();  // not what a 2 MB argument held
    argv.resize(part > 0 ? i + 1 : i);
    argv.shrink_to_fit();
    job.table.argv_cut += cut;
    return;
  }
}

void CutToSummary(Job& job, size_t max_argv) {
  CutArgv(job, max_argv);
  std::vector<std::string>().swap(job.spec.env);
  job.spec.groups.reset();
  const auto cut = [&](std::string& text) {
    if (text.size() <= kSummaryTextBytes) return;
    text = CutElided(text, kSummaryTextBytes);
    job.table.details_cut = true;
  };
  const auto cut_cause = [&](std::optional<RootCause>& c) {
    if (!c) return;
    cut(c->message);
    cut(c->cancelled_by);
  };
  for (Attempt& a : job.attempts) cut_cause(a.root_cause);
  for (Rank& r : job.ranks) cut(r.error_message);
  for (NodeStatus& n : job.nodes) {
    cut(n.host);
    cut_cause(n.root_cause);
  }
  if (job.hang_report) {
    for (HangReportRank& r : job.hang_report->ranks) {
      cut(r.stack);
      cut(r.stack_note);
    }
  }
}

void ApplyRecord(Job& job, Job sent) {
  if (sent.spec.argv.empty()) sent.spec.argv = std::move(job.spec.argv);
  sent.table = std::move(job.table);
  job = std::move(sent);
}

void ApplyBeats(Job& job, const std::vector<RankBeat>& beats) {
  for (const RankBeat& beat : beats) {
    if (beat.rank < 0 || static_cast<size_t>(beat.rank) >= job.ranks.size()) continue;
    Rank& rank = job.ranks[static_cast<size_t>(beat.rank)];
    rank.last_step = beat.last_step;
    rank.last_heartbeat_at = beat.last_heartbeat_at;
    rank.steps_per_second = beat.steps_per_second;
  }
}

int ExitCodeFor(const RootCause& cause) {
  switch (cause.reason) {
    case CauseReason::kExited:
      return cause.exit_code;
    case CauseReason::kSignaled:
      return 128 + cause.signal;
    case CauseReason::kOom:  // as the SIGKILL it was
      return cause.signal != 0 ? 128 + cause.signal : cause.exit_code != 0 ? cause.exit_code : 137;
    case CauseReason::kHang:
    case CauseReason::kStartupTimeout:
    case CauseReason::kTimeLimit:
      return 124;
    case CauseReason::kCancelled:
      return 130;
    case CauseReason::kSpawnFailed:
      return cause.exit_code != 0 ? cause.exit_code : 127;
    case CauseReason::kRemoteFailure:
      return cause.exit_code != 0 ? cause.exit_code : 1;
    case CauseReason::kDaemonLost:
    case CauseReason::kSupervisorLost:
    case CauseReason::kDependencyFailed:
      return 1;
  }
  return 1;
}

std::string Describe(const UnkillableProcess& p) {
  std::string out = !p.descendant ? Cat("rank ", p.rank, " pid ", p.pid)
                    : p.rank >= 0 ? Cat("pid ", p.pid, " (of rank ", p.rank, ")")
                                  : Cat("pid ", p.pid, " (of the job)");
  out += Cat(" in ", p.state.empty() ? "?" : p.state, " state");
  if (!p.wchan.empty()) out += Cat(" (wchan ", p.wchan, ")");
  return out;
}

std::string KernelTopFrame(std::string_view stack) {
  // "[<0>] request_wait_answer+0x12f/0x2b0\n[<0>] ..."
  std::string_view top = stack.substr(0, stack.find('\n'));
  if (const size_t close = top.find("] ");
      top.starts_with("[<") && close != std::string_view::npos) {
    top.remove_prefix(close + 2);
  }
  top = top.substr(0, top.find('+'));
  while (!top.empty() && (top.back() == ' ' || top.back() == '\t')) top.remove_suffix(1);
  return std::string(top);
}

int NodeRankOf(const NodeSpec& nodes) {
  if (nodes.node_rank >= 0) return nodes.node_rank;
  return nodes.rdzv.empty() ? 0 : -1;
}

bool IsMultiNode(const NodeSpec& nodes) { return nodes.nnodes > 1 || !nodes.rdzv.empty(); }

bool IsRunWide(const HangReport& report) {
  if (!report.missing_nodes.empty()) return true;
  for (const HangReportRank& r : report.ranks) {
    if (r.node >= 0) return true;
  }
  return false;
}

std::string FormatTime(WallTime t) {
  // Microseconds: teardowns take milliseconds, and records are read by tools.
  // Whole seconds rounded down, so that a time before 1970 keeps its
  // fraction in 0-999999 (C++ division rounds toward zero: "04.-877000Z").
  const auto us = std::chrono::floor<std::chrono::microseconds>(t.time_since_epoch());
  const auto secs = std::chrono::floor<std::chrono::seconds>(us);
  const std::time_t whole = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&whole, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%06dZ", static_cast<int>((us - secs).count()));
  return buf;
}

std::optional<WallTime> ParseTime(std::string_view s) {
  std::tm tm{};
  const std::string str(s);
  const char* rest = strptime(str.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return std::nullopt;
  int64_t micros = 0;
  if (*rest == '.') {
    // Any number of digits; the first six are microseconds.
    int digits = 0;
    for (++rest; *rest >= '0' && *rest <= '9'; ++rest, ++digits) {
      if (digits < 6) micros = micros * 10 + (*rest - '0');
    }
    for (; digits < 6; ++digits) micros *= 10;
  }
  if (*rest != 'Z') return std::nullopt;
  const std::time_t secs = timegm(&tm);
  // WallTime counts nanoseconds in 64 bits, about 292 years either side of
  // 1970: a record's "5732-..." would overflow it.
  constexpr std::time_t kMaxSeconds = std::numeric_limits<int64_t>::max() / 1'000'000'000 - 1;
  if (secs > kMaxSeconds || secs < -kMaxSeconds) return std::nullopt;
  return WallTime(std::chrono::seconds(secs)) + std::chrono::microseconds(micros);
}

ArrayTask CheckedArrayTask(ArrayTask t) {
  const std::string& id = t.job_id;
  const bool id_ok = !id.empty() && id.size() <= 19 && id.front() != '0' &&
                     id.find_first_not_of("0123456789") == std::string::npos;
  if (!id_ok || t.task > kMaxArrayIndex || t.count == 0 || t.count > kMaxArrayTasks) return {};
  t.throttle = std::min(t.throttle, t.count);
  return t;
}

std::string DisplayId(const Job& job) {
  if (job.spec.array.job_id.empty()) return job.id;
  return Cat(job.spec.array.job_id, "_", job.spec.array.task);
}

}  // namespace ltd
