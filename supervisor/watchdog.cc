// The runner's watchdog: per-rank heartbeat deadlines driven by one
// timer per job, and the investigation of a hang (report, stacks) that
// comes before its teardown.
#include <signal.h>

#include <algorithm>

#include "bytes.h"
#include "hang_report.h"
#include "job_runner.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

// How long to wait past the stack budget for faulthandler output before
// tearing down regardless.
constexpr Millis kInvestigationSlack{500};
constexpr size_t kMaxStack = 64 * 1024;

}  // namespace

void JobRunner::ArmWatchdog(Job& job, JobRuntime& rt) {
  if (rt.tearing_down || rt.investigating) return;
  // One timer per job at the earliest deadline: a beat never touches it,
  // so 1,000 ranks beating often cost no timer work at all.
  std::optional<Millis> earliest;
  for (const RankRuntime& rr : rt.ranks) {
    auto d = rr.Deadline(job.spec.heartbeat_timeout, job.spec.startup_timeout);
    if (d && (!earliest || *d < *earliest)) earliest = d;
  }
  if (auto d = rt.AutoDeadline(); d && (!earliest || *d < *earliest)) earliest = d;
  if (rt.watchdog_at && earliest && *rt.watchdog_at <= *earliest) return;  // fires soon enough
  if (rt.watchdog_timer != 0) clock_.CancelTimer(rt.watchdog_timer);
  rt.watchdog_timer = 0;
  rt.watchdog_at.reset();
  if (!earliest) return;
  // Monotonic time is in whole milliseconds (floored): a deadline counts as
  // passed one tick after it, so no rank is ever called hung early.
  const Millis delay = std::max(Millis(0), *earliest - clock_.Monotonic()) + Millis(1);
  rt.watchdog_at = earliest;
  rt.watchdog_timer = clock_.StartTimer(delay, [this, id = job.id] { OnWatchdog(id); });
}

void JobRunner::OnWatchdog(const std::string& id) {
  Job* job = FindMutable(id);
  JobRuntime* found = Runtime(id);
  if (job == nullptr || found == nullptr) return;
  JobRuntime& rt = *found;
  rt.watchdog_timer = 0;
  rt.watchdog_at.reset();
  if (rt.tearing_down || rt.investigating) return;
  // Beats may wait in their sockets for the next batch read: they count
  // first, so that no rank is called hung for a beat not read yet. (They
  // may arm the watchdog again; if this one finds a hang, that timer
  // finds the job investigating and returns.)
  launcher_.ReadHeartbeats();
  const Millis now = clock_.Monotonic();
  // Automatic heartbeats: no rank made progress for the hang timeout. Every
  // rank watched so is stalled; the stacks tell which one the others wait for.
  if (auto d = rt.AutoDeadline(); d && *d < now) {
    std::vector<int> stalled;
    for (size_t r = 0; r < rt.ranks.size(); ++r) {
      if (rt.ranks[r].Automatic()) stalled.push_back(static_cast<int>(r));
    }
    rt.auto_verdict = true;
    return ReportHang(*job, rt, std::move(stalled), CauseReason::kHang, *d);
  }
  // Stalled: every rank past its deadline, earliest deadline first.
  std::vector<std::pair<Millis, int>> expired;
  bool startup = true;
  for (size_t r = 0; r < rt.ranks.size(); ++r) {
    auto d = rt.ranks[r].Deadline(job->spec.heartbeat_timeout, job->spec.startup_timeout);
    if (d && *d < now) {
      expired.emplace_back(*d, static_cast<int>(r));
      if (rt.ranks[r].last_beat) startup = false;
    }
  }
  if (expired.empty()) return ArmWatchdog(*job, rt);  // a deadline moved: sleep again
  std::sort(expired.begin(), expired.end());
  std::vector<int> stalled;
  for (const auto& [deadline, rank] : expired) stalled.push_back(rank);
  ReportHang(*job, rt, std::move(stalled),
             startup ? CauseReason::kStartupTimeout : CauseReason::kHang, expired.front().first);
}

void JobRunner::ReportHang(Job& job, JobRuntime& rt, std::vector<int> stalled, CauseReason reason,
                           Millis deadline) {
  const WallTime now = clock_.Now();
  const Millis late = std::max(Millis(0), clock_.Monotonic() - deadline);
  HangReport report;
  report.at = now;
  report.stalled_ranks = stalled;
  int64_t max_step = -1;
  for (const Rank& r : job.ranks) max_step = std::max(max_step, r.last_step);
  for (const Rank& r : job.ranks) {
    HangReportRank hr;
    hr.rank = r.rank;
    hr.last_step = r.last_step;
    hr.last_heartbeat_at = r.last_heartbeat_at;
    hr.stalled = std::find(stalled.begin(), stalled.end(), r.rank) != stalled.end();
    hr.straggler = IsStraggler(r.last_step, max_step);
    if (hr.straggler) report.straggler_ranks.push_back(r.rank);
    report.ranks.push_back(std::move(hr));
  }
  // A stopped rank (SIGSTOP, a Ctrl-Z, a debugger) is the plainest cause:
  // it cannot run, so its peers wait for it. The kernel says so outright.
  int stopped_rank = -1;
  for (size_t r = 0; r < rt.ranks.size(); ++r) {
    if (!rt.ranks[r].alive) continue;
    auto sig = launcher_.StopSignal(job.id, static_cast<int>(r));
    if (!sig) continue;
    const char* name = *sig > 0 ? sigabbrev_np(*sig) : nullptr;
    report.ranks[r].process_state =
        name != nullptr ? Cat("stopped (SIG", name, ")") : std::string("stopped");
    if (stopped_rank < 0) stopped_rank = static_cast<int>(r);
  }
  RootCause cause;
  cause.rank = stalled.front();
  cause.reason = reason;
  cause.at = now;
  cause.deadline_at = now - late;
  const Millis waited =
      reason == CauseReason::kHang
          ? rt.ranks[static_cast<size_t>(cause.rank)].timeout.value_or(job.spec.heartbeat_timeout)
          : job.spec.startup_timeout;
  cause.message =
      Cat(reason == CauseReason::kHang ? "no heartbeat for " : "no first heartbeat within ",
          FormatDuration(waited), " from rank(s) ", Join(stalled, ","));
  if (rt.auto_verdict) {
    cause.message = Cat("no rank made progress for ", FormatDuration(rt.auto_timeout),
                        " (automatic heartbeats)");
  }
  if (stopped_rank >= 0) {
    cause.rank = stopped_rank;
    cause.message = Cat("rank ", stopped_rank, " is ",
                        report.ranks[static_cast<size_t>(stopped_rank)].process_state);
    report.stalled_ranks = {stopped_rank};
    for (HangReportRank& hr : report.ranks) hr.stalled = hr.rank == stopped_rank;
    rt.cause_settled = true;
  }
  spdlog::error("job={} hang: {}", job.id, ForLog(cause.message));
  // The report and the verdict are on disk before anything is signalled.
  job.hang_report = std::move(report);
  job.root_cause = cause;
  rt.cause = std::move(cause);
  Persist(job);
  Announce(job, *rt.cause);

  rt.investigating = true;
  std::vector<pid_t> native(rt.ranks.size(), 0);
  bool any_native = false;
  for (size_t r = 0; r < rt.ranks.size(); ++r) {
    RankRuntime& rr = rt.ranks[r];
    const pid_t pid = job.ranks[r].pid;
    const bool stopped = !job.hang_report->ranks[r].process_state.empty();
    if (rr.Automatic() && !rr.auto_stack.empty() && !stopped) {
      // ltd's module already sent where the main thread stopped: it costs
      // no signal, no gdb and no budget, and works for a Python that a
      // shell started, too.
      job.hang_report->ranks[r].stack = AutoStackText(rr.auto_stack);
      continue;
    }
    if (!rr.alive || sampler_ == nullptr || config_.stack_budget.count() <= 0) continue;
    if (sampler_->IsPython(pid)) {
      // faulthandler runs in the rank itself, which a stopped rank cannot.
      if (stopped) continue;
      // faulthandler (PYTHONFAULTHANDLER=1) prints every thread, then the
      // rank dies of the signal; its stderr until then is its stack.
      rr.capturing_stack = true;
      ++rt.pending_python_stacks;
      launcher_.SignalProcess(job.id, static_cast<int>(r), SIGABRT);
    } else {
      native[r] = pid;
      any_native = true;
    }
  }
  if (any_native) {
    rt.pending_native_stacks = true;
    sampler_->Sample(native, job.spec.uid, job.spec.gid, config_.stack_budget,
                     [this, id = job.id](std::vector<std::string> stacks) {
                       Job* j = FindMutable(id);
                       JobRuntime* found = Runtime(id);
                       if (j == nullptr || found == nullptr || !found->investigating) return;
                       found->pending_native_stacks = false;
                       for (size_t i = 0; i < stacks.size() && i < j->hang_report->ranks.size();
                            ++i) {
                         if (!stacks[i].empty())
                           j->hang_report->ranks[i].stack = std::move(stacks[i]);
                       }
                       if (found->pending_python_stacks == 0) FinishInvestigation(id);
                     });
  }
  if (!rt.pending_native_stacks && rt.pending_python_stacks == 0)
    return FinishInvestigation(job.id);
  rt.investigation_timer = clock_.StartTimer(config_.stack_budget + kInvestigationSlack,
                                             [this, id = job.id] { FinishInvestigation(id); });
}

void JobRunner::FinishInvestigation(const std::string& id) {
  Job* job = FindMutable(id);
  JobRuntime* found = Runtime(id);
  if (job == nullptr || found == nullptr || !found->investigating) return;
  JobRuntime& rt = *found;
  rt.investigating = false;
  if (rt.investigation_timer != 0) clock_.CancelTimer(rt.investigation_timer);
  rt.investigation_timer = 0;
  HangReport& report = *job->hang_report;
  for (size_t r = 0; r < rt.ranks.size(); ++r) {
    RankRuntime& rr = rt.ranks[r];
    if (!rr.stack.empty()) report.ranks[r].stack = std::move(rr.stack);
    rr.stack.clear();
    rr.capturing_stack = false;
  }
  const int culprit = rt.cause_settled ? -1 : AttributeHang(report);
  if (rt.cause_settled) {
    for (HangReportRank& r : report.ranks) r.in_collective = WaitsInCollective(r.stack);
  } else if (std::string waits = DescribeCollectiveWaits(report);
             culprit < 0 && rt.auto_verdict && !waits.empty()) {
    // Nobody stopped outside a collective: the ranks wait for each other.
    rt.cause->message = Cat(rt.cause->message, "; ", waits);
  } else if (culprit >= 0 && (culprit != rt.cause->rank || rt.auto_verdict)) {
    // Ranks that already died of the stack dump were judged by the old verdict.
    Rank& was = job->ranks[static_cast<size_t>(rt.cause->rank)];
    if (was.state == RankState::kFailed) SetRankState(*job, was, RankState::kKilled);
    Rank& now = job->ranks[static_cast<size_t>(culprit)];
    if (now.state == RankState::kKilled) SetRankState(*job, now, RankState::kFailed);
    rt.cause->rank = culprit;
    // "no heartbeat for 3s from rank(s) 3" named the first deadline; the
    // stacks name the rank the others wait for.
    std::string& m = rt.cause->message;
    m = Cat(m.substr(0, m.find(" from rank(s) ")), "; the stacks show rank(s) ",
            Join(report.stalled_ranks, ","),
            " stalled outside a collective while the others wait in one");
    spdlog::warn("job={} hang attributed to rank {} from the stacks", id, culprit);
  }
  job->root_cause = rt.cause;
  Persist(*job);
  Teardown(*job, rt);
  if (rt.live == 0) OnRanksGone(*job, rt);
}

void JobRunner::CaptureStack(JobRuntime& rt, int rank, std::string_view line) {
  RankRuntime& rr = rt.ranks[static_cast<size_t>(rank)];
  if (rr.stack.size() + line.size() + 1 > kMaxStack) return;
  rr.stack.append(line);
  rr.stack.push_back('\n');
}

void JobRunner::StackCaptured(const std::string& id, JobRuntime& rt, int rank) {
  RankRuntime& rr = rt.ranks[static_cast<size_t>(rank)];
  if (!rr.capturing_stack) return;
  rr.capturing_stack = false;
  if (--rt.pending_python_stacks == 0 && !rt.pending_native_stacks) FinishInvestigation(id);
}

}  // namespace ltd
