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
#include "straggler.h"

namespace ltd {
namespace {

// How long to wait past the stack budget for faulthandler output before
// tearing down regardless.
constexpr Millis kInvestigationSlack{500};
constexpr size_t kMaxStack = 64 * 1024;

// The sampler's word on a native rank's stack, into its report. The text
// (the kernel's view at least) is kept whatever the outcome; only a taken
// stack is evidence (StackIsEvidence).
void ApplySampledStack(SampledStack s, HangReportRank& hr) {
  hr.stack = std::move(s.text);
  hr.stack_note = std::move(s.note);
  switch (s.outcome) {
    case SampledStack::Outcome::kTaken:
      hr.stack_status = StackStatus::kTaken;
      break;
    case SampledStack::Outcome::kSkipped:
      hr.stack_status = StackStatus::kSkipped;
      break;
    case SampledStack::Outcome::kTimedOut:
      hr.stack_status = StackStatus::kTimedOut;
      break;
    case SampledStack::Outcome::kFailed:
      hr.stack_status = StackStatus::kFailed;
      break;
  }
}

}  // namespace

void JobRunner::ArmWatchdog() {
  const Job& job = job_;
  LiveAttempt& rt = At();
  if (rt.phase != Phase::kRunning) return;
  // One timer per job at the earliest deadline: a beat never touches it,
  // so 1,000 ranks beating often cost no timer work at all.
  std::optional<Millis> earliest;
  for (const RankRuntime& rr : rt.ranks) {
    auto d = rr.Deadline(job.spec.heartbeat_timeout, job.spec.startup_timeout);
    if (d && (!earliest || *d < *earliest)) earliest = d;
  }
  if (auto d = rt.AutoDeadline(AutoStartupLimit()); d && (!earliest || *d < *earliest))
    earliest = d;
  if (rt.auto_progress) ArmCpuProbe();
  // A verdict waiting out the noise of the first deadline (OnWatchdog).
  if (earliest && rt.verdict_held_for && *earliest <= *rt.verdict_held_for)
    earliest = std::max(*earliest, rt.verdict_hold_until);
  if (rt.watchdog_at && earliest && *rt.watchdog_at <= *earliest) return;  // fires soon enough
  rt.Cancel(rt.watchdog_timer);
  rt.watchdog_at.reset();
  if (!earliest) return;
  // Monotonic time is in whole milliseconds (floored): a deadline counts as
  // passed one tick after it, so no rank is ever called hung early.
  const Millis delay = std::max(Millis(0), *earliest - clock_.Monotonic()) + Millis(1);
  rt.watchdog_at = earliest;
  rt.watchdog_timer = clock_.StartTimer(delay, [this, self = std::weak_ptr(attempt_)] {
    if (!Current(self)) return;
    At().watchdog_timer = 0;
    OnWatchdog();
  });
}

void JobRunner::OnWatchdog() {
  const Job* job = &job_;
  LiveAttempt& rt = At();
  rt.watchdog_at.reset();
  if (rt.phase != Phase::kRunning) return;
  // Beats may wait in their sockets for the next batch read: they count
  // first, so that no rank is called hung for a beat not read yet. (They
  // may arm the watchdog again; if this one finds a hang, that timer
  // finds the job investigating and returns.)
  launcher_.ReadHeartbeats();
  const Millis now = clock_.Monotonic();
  // Automatic heartbeats: no rank made progress for the hang timeout. Every
  // rank watched so is stalled; the stacks tell which one the others wait for.
  // A main thread that ran since the last probe is busy: progress.
  if (auto d = rt.AutoDeadline(AutoStartupLimit()); d && *d < now) ProbeCpu();
  if (auto d = rt.AutoDeadline(AutoStartupLimit()); d && *d < now) {
    std::vector<int> stalled;
    for (size_t r = 0; r < rt.ranks.size(); ++r) {
      if (rt.ranks[r].Automatic()) stalled.push_back(static_cast<int>(r));
    }
    rt.auto_verdict = true;
    // The job-level deadline says nothing of which rank stopped first,
    // unless only one rank is watched so.
    std::vector<std::pair<Millis, int>> stops;
    if (stalled.size() == 1) stops.emplace_back(*d, stalled.front());
    return ReportHang(std::move(stalled), std::move(stops), CauseReason::kHang, *d);
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
  if (expired.empty()) return ArmWatchdog();  // a deadline moved: sleep again
  std::sort(expired.begin(), expired.end());
  // A rank whose deadline comes within the noise of the first one's may
  // have stopped with it, microseconds later: the verdict waits out the
  // noise (once per first deadline), so that the ranks that stopped
  // together are judged together, and one that beats meanwhile is not.
  const Millis noise = BeatNoise(expired.front().second);
  const Millis window_end = expired.front().first + noise;
  if (!rt.verdict_held_for || *rt.verdict_held_for != expired.front().first) {
    for (size_t r = 0; r < rt.ranks.size(); ++r) {
      auto d = rt.ranks[r].Deadline(job->spec.heartbeat_timeout, job->spec.startup_timeout);
      if (!d || *d < now || *d > window_end) continue;
      rt.verdict_held_for = expired.front().first;
      rt.verdict_hold_until = window_end;
      return ArmWatchdog();
    }
  } else if (now <= rt.verdict_hold_until) {
    return ArmWatchdog();
  }
  std::vector<int> stalled;
  // When each stalled rank stopped: its last beat, or (before its first)
  // the start-up deadline it missed.
  std::vector<std::pair<Millis, int>> stops;
  for (const auto& [deadline, rank] : expired) {
    stalled.push_back(rank);
    stops.emplace_back(rt.ranks[static_cast<size_t>(rank)].last_beat.value_or(deadline), rank);
  }
  ReportHang(std::move(stalled), std::move(stops),
             startup ? CauseReason::kStartupTimeout : CauseReason::kHang, expired.front().first,
             noise);
}

Millis JobRunner::AutoStartupLimit() const {
  const Job& job = job_;
  // With --startup-timeout, a rank that never got watched misses its own
  // start-up deadline (a startup_timeout verdict) just before this.
  if (job.spec.startup_timeout.count() > 0) return job.spec.startup_timeout + Millis(1);
  return std::max(kAutoStartupLimit, AutoTimeout());
}

Millis JobRunner::BeatNoise(int rank) const {
  const Job& job = job_;
  const LiveAttempt& rt = *attempt_;
  // Half the rank's timeout where that is shorter (a test's 100ms), so a
  // verdict never waits as long as the timeout itself.
  const RankRuntime& rr = rt.ranks[static_cast<size_t>(rank)];
  const Millis timeout =
      rr.last_beat ? rr.timeout.value_or(job.spec.heartbeat_timeout) : job.spec.startup_timeout;
  return std::min(kBeatNoise, timeout / 2);
}

void JobRunner::ReportHang(std::vector<int> stalled, std::vector<std::pair<Millis, int>> stops,
                           CauseReason reason, Millis deadline, Millis noise, std::string remote) {
  Job& job = job_;
  LiveAttempt& rt = At();
  Enter(Phase::kInvestigating);
  rt.Cancel(rt.watchdog_timer);
  rt.watchdog_at.reset();
  Investigation& inv = rt.investigation.emplace();
  const WallTime now = clock_.Now();
  const Millis late = std::max(Millis(0), clock_.Monotonic() - deadline);
  HangReport report;
  report.at = now;
  report.stalled_ranks = stalled;
  const std::vector<bool> stragglers = Stragglers(job.ranks, job.heartbeat_mode);
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    const Rank& r = job.ranks[i];
    HangReportRank hr;
    hr.rank = r.rank;
    hr.last_step = r.last_step;
    hr.last_heartbeat_at = r.last_heartbeat_at;
    hr.stalled = std::find(stalled.begin(), stalled.end(), r.rank) != stalled.end();
    hr.straggler = stragglers[i];
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
  cause.reason = reason;
  cause.at = now;
  cause.deadline_at = now - late;
  // Only a rank that stopped clearly first is blamed for it: beats that
  // stopped within the noise of each other say nothing of who stopped whom.
  cause.rank = SingledOut(stops, noise);
  const Millis waited = reason == CauseReason::kHang
                            ? rt.ranks[static_cast<size_t>(stalled.front())].timeout.value_or(
                                  job.spec.heartbeat_timeout)
                            : job.spec.startup_timeout;
  inv.what = Cat(reason == CauseReason::kHang ? "no heartbeat for " : "no first heartbeat within ",
                 FormatDuration(waited));
  if (rt.auto_verdict) {
    inv.what = Cat("no rank made progress for ", FormatDuration(rt.auto_timeout),
                   " (automatic heartbeats)");
    cause.message = inv.what;
  } else if (cause.rank >= 0) {
    cause.message = Cat(inv.what, " from rank(s) ", Join(stalled, ","));
  } else {
    cause.message =
        Cat(reason == CauseReason::kHang
                ? DescribeTie(stops, noise)
                : Cat(RankSet(stalled), " sent no first heartbeat within ", FormatDuration(waited)),
            reason == CauseReason::kHang ? Cat(" (", inv.what, ")") : "");
  }
  if (!remote.empty()) {
    inv.what = std::move(remote);
    inv.remote = true;
    cause.rank = -1;
    cause.message = inv.what;
  }
  if (stopped_rank >= 0) {
    cause.rank = stopped_rank;
    cause.message = Cat("rank ", stopped_rank, " is ",
                        report.ranks[static_cast<size_t>(stopped_rank)].process_state);
    report.stalled_ranks = {stopped_rank};
    for (HangReportRank& hr : report.ranks) hr.stalled = hr.rank == stopped_rank;
    inv.settled = true;
  }
  spdlog::error("job={} hang: {}", job.id, ForLog(cause.message));
  // The report and the verdict are on disk before anything is signalled.
  job.hang_report = std::move(report);
  job.root_cause = cause;
  rt.cause = std::move(cause);
  Persist();
  // Its stacks decide what kind of evidence it is: the others hear of it
  // now, and of its kind once they are in.
  Announce(*rt.cause, /*pending=*/true);

  std::vector<pid_t> native(rt.ranks.size(), 0);
  bool any_native = false;
  for (size_t r = 0; r < rt.ranks.size(); ++r) {
    RankRuntime& rr = rt.ranks[r];
    HangReportRank& hr = job.hang_report->ranks[r];
    const pid_t pid = job.ranks[r].pid;
    const bool stopped = !hr.process_state.empty();
    auto skip = [&](std::string why) {
      hr.stack_status = StackStatus::kSkipped;
      hr.stack_note = std::move(why);
    };
    if (rr.Automatic() && !rr.auto_stack.empty() && !stopped) {
      // ltd's module already sent where the main thread stopped: it costs
      // no signal, no tool and no budget, and works for a Python that a
      // shell started, too.
      hr.stack = AutoStackText(rr.auto_stack);
      hr.stack_status = StackStatus::kTaken;
      hr.stack_note = "sent by the automatic heartbeats";
      continue;
    }
    if (!rr.alive) {
      skip("not running");
      continue;
    }
    if (sampler_ == nullptr) {
      skip("no stack sampler here");
      continue;
    }
    if (config_.stack_budget.count() <= 0) {
      skip("--stack-budget 0");
      continue;
    }
    // Until its stack comes in, it is one the budget did not cover.
    hr.stack_status = StackStatus::kTimedOut;
    if (sampler_->IsPython(pid)) {
      // faulthandler runs in the rank itself, which a stopped rank cannot.
      if (stopped) {
        skip("stopped: faulthandler cannot run in it");
        continue;
      }
      // Its traceback ends the rank, which a hold keeps for a look.
      if (job.spec.hold_on_hang.count() > 0) {
        skip(config_.ltctl_stack
                 ? Cat("held for a look (--hold-on-hang): faulthandler would end it; try `ltctl "
                       "stack ",
                       job.id, "`")
                 : "held for a look (--hold-on-hang): faulthandler would end it; try `eu-stack "
                   "-p PID`");
        continue;
      }
      // faulthandler (PYTHONFAULTHANDLER=1) prints every thread, then the
      // rank dies of the signal; its stderr until then is its stack.
      hr.stack_note = "faulthandler gave no traceback within the budget";
      rr.capturing_stack = true;
      rr.faulthandler_asked = true;
      ++inv.pending;
      // Said in the rank's own output, where faulthandler's "Fatal Python
      // error: Aborted" would have read like the program's own crash.
      const std::string note =
          Cat("ltd: stack of rank ", r, " taken for the hang report (faulthandler, SIGABRT); ",
              "see `ltctl show ", job.id, "`");
      if (rt.log) rt.log->Append(Cat("[", r, "] ", note, "\n"));
      Output(static_cast<int>(r), Stream::kStderr, note);
      launcher_.SignalProcess(job.id, static_cast<int>(r), SIGABRT);
    } else {
      hr.stack_note = "the sampler gave nothing within the budget";
      native[r] = pid;
      any_native = true;
    }
  }
  if (any_native) {
    ++inv.pending;
    // The answer is this attempt's: one that comes after it ended (the
    // budget ran out, the job restarted) is dropped.
    sampler_->Sample(
        native, Credentials{job.spec.uid, job.spec.gid, job.spec.groups}, config_.stack_budget,
        [this, self = std::weak_ptr(attempt_), native](std::vector<SampledStack> stacks) {
          if (!Current(self) || At().phase != Phase::kInvestigating) return;
          for (size_t i = 0; i < stacks.size() && i < job_.hang_report->ranks.size(); ++i) {
            if (i >= native.size() || native[i] == 0) continue;  // not asked for
            ApplySampledStack(std::move(stacks[i]), job_.hang_report->ranks[i]);
          }
          StackAnswered();
        });
  }
  if (inv.pending == 0) return FinishInvestigation();
  rt.investigation_timer = clock_.StartTimer(config_.stack_budget + kInvestigationSlack,
                                             [this, self = std::weak_ptr(attempt_)] {
                                               if (!Current(self)) return;
                                               At().investigation_timer = 0;
                                               FinishInvestigation();
                                             });
}

void JobRunner::StackAnswered() {
  LiveAttempt& rt = At();
  if (rt.phase != Phase::kInvestigating) return;
  if (--rt.investigation->pending <= 0) FinishInvestigation();
}

void JobRunner::FinishInvestigation(bool may_hold) {
  Job* job = &job_;
  LiveAttempt& rt = At();
  if (rt.phase != Phase::kInvestigating) return;
  const std::string& id = job->id;
  Investigation& inv = *rt.investigation;
  rt.Cancel(rt.investigation_timer);
  HangReport& report = *job->hang_report;
  for (size_t r = 0; r < rt.ranks.size(); ++r) {
    RankRuntime& rr = rt.ranks[r];
    HangReportRank& hr = report.ranks[r];
    if (!rr.stack.empty()) {
      hr.stack = std::move(rr.stack);
      hr.stack_status = StackStatus::kTaken;
      hr.stack_note = "faulthandler";
    } else if (rr.faulthandler_asked && !rr.capturing_stack) {
      hr.stack_status = StackStatus::kFailed;
      hr.stack_note = "the rank ended without a faulthandler traceback";
    }
    rr.stack.clear();
    rr.capturing_stack = false;
    rr.faulthandler_asked = false;
  }
  const int culprit = inv.settled ? -1 : AttributeHang(report, inv.remote);
  const std::string missing = MissingStacks(report, config_.stack_budget);
  std::string& m = rt.cause->message;
  if (inv.settled) {
    for (HangReportRank& r : report.ranks) r.in_collective = WaitsInCollective(r.stack);
  } else if (culprit >= 0) {
    if (culprit != rt.cause->rank) {
      // Ranks that already died of the stack dump were judged by the old verdict.
      if (rt.cause->rank >= 0) {
        Rank& was = job->ranks[static_cast<size_t>(rt.cause->rank)];
        if (was.state == RankState::kFailed) SetRankState(was, RankState::kKilled);
      }
      Rank& now = job->ranks[static_cast<size_t>(culprit)];
      if (now.state == RankState::kKilled) SetRankState(now, RankState::kFailed);
      rt.cause->rank = culprit;
      spdlog::warn("job={} hang attributed to rank {} from the stacks", id, culprit);
    }
    // "no heartbeat for 3s from rank(s) 3" named the first deadline; the
    // stacks name the rank the others wait for.
    m = Cat(inv.what, "; the stacks show rank(s) ", Join(report.stalled_ranks, ","),
            " stalled outside a collective while the others wait in one");
    if (!missing.empty()) m += Cat(" (", missing, ")");
  } else if (rt.cause->rank < 0) {
    // Nothing singles a rank out: say what is known and what is missing.
    std::vector<int> waiting;
    for (const HangReportRank& r : report.ranks) {
      if (r.in_collective) waiting.push_back(r.rank);
    }
    if (!missing.empty()) {
      // Some stacks are missing: whom the waiting ranks wait for is unknown.
      if (!waiting.empty())
        m += Cat("; ", RankSet(waiting), waiting.size() > 1 ? " wait" : " waits",
                 " in a collective");
      m += Cat("; ", missing);
    } else if (std::string waits = DescribeCollectiveWaits(report); !waits.empty()) {
      m += Cat("; ", waits);
    } else {
      m += "; the stacks single out no rank";
    }
  }
  job->root_cause = rt.cause;
  Persist();
  if (rt.cause->reason != CauseReason::kRemoteFailure) Announce(*rt.cause);
  if (may_hold && job->spec.hold_on_hang.count() > 0 && rt.live > 0) return Hold();
  SignalTeardown();
}

void JobRunner::Hold() {
  Job& job = job_;
  LiveAttempt& rt = At();
  Enter(Phase::kHeld);
  const Millis hold = job.spec.hold_on_hang;
  job.held_until = clock_.Now() + hold;
  std::vector<std::string> pids;
  pid_t any = 0;
  for (size_t r = 0; r < rt.ranks.size(); ++r) {
    if (!rt.ranks[r].alive) continue;
    pids.push_back(Cat(r, ":", job.ranks[r].pid));
    if (any == 0) any = job.ranks[r].pid;
  }
  spdlog::warn("job={} held for {} after its hang (--hold-on-hang)", job.id, FormatDuration(hold));
  LogNotice(
      Cat("job ", job.id, " is hung and held for ", FormatDuration(hold),
          " before its teardown; ranks (rank:pid) ", Join(pids, " "), "; look with ",
          config_.ltctl_stack ? Cat("`ltctl stack ", job.id, "`") : Cat("`eu-stack -p ", any, "`"),
          " or `gdb -p ", any, "`; `ltctl kill ", job.id, "` ends the hold"));
  Persist();
  rt.hold_timer = clock_.StartTimer(hold, [this, self = std::weak_ptr(attempt_)] {
    if (!Current(self)) return;
    At().hold_timer = 0;
    spdlog::info("job={} hold over: tearing down", job_.id);
    Output(-1, Stream::kStderr, Cat("ltd: the hold of job ", job_.id, " is over; tearing down"));
    SignalTeardown();
  });
}

void JobRunner::CaptureStack(int rank, std::string_view line) {
  RankRuntime& rr = At().ranks[static_cast<size_t>(rank)];
  if (rr.stack.size() + line.size() + 1 > kMaxStack) return;
  rr.stack.append(line);
  rr.stack.push_back('\n');
}

void JobRunner::StackCaptured(int rank) {
  RankRuntime& rr = At().ranks[static_cast<size_t>(rank)];
  if (!rr.capturing_stack) return;
  rr.capturing_stack = false;
  StackAnswered();
}

}  // namespace ltd
