// The end of an attempt: the root cause is fixed, every rank gets SIGTERM
// and after the grace period SIGKILL, the job is known empty, then it
// restarts or ends with its final record.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "bytes.h"
#include "duration.h"
#include "error_file.h"
#include "job_runner.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

void JobRunner::Fail(RootCause cause) {
  LiveAttempt& rt = At();
  // Whatever the cause, nothing waits for a stronger one any more.
  rt.Cancel(rt.held_timer);
  rt.held_cause.reset();
  if (!rt.cause) {
    spdlog::warn("job={} root cause: rank={} reason={} {}", job_.id, cause.rank,
                 ToString(cause.reason), ForLog(cause.message));
    rt.cause = std::move(cause);
    job_.root_cause = rt.cause;  // visible while the teardown runs
    Persist();
    Announce(*rt.cause);
  }
  Teardown();
}

void JobRunner::Teardown() {
  switch (At().phase) {
    case Phase::kInvestigating:
      // The report ends with what it has; no hold.
      return FinishInvestigation(/*may_hold=*/false);
    case Phase::kRunning:
    case Phase::kHeld:
      return SignalTeardown();
    default:
      return;  // under way, or over
  }
}

void JobRunner::SignalTeardown() {
  Job& job = job_;
  LiveAttempt& rt = At();
  Enter(Phase::kTearingDown);
  rt.Cancel(rt.watchdog_timer);
  rt.Cancel(rt.hold_timer);
  rt.watchdog_at.reset();
  job.held_until.reset();
  job.teardown_at = clock_.Now();
  if (rt.live == 0) return OnRanksGone();
  spdlog::info("job={} teardown: SIGTERM to {} rank(s), SIGKILL after {}", job.id, rt.live,
               FormatDuration(job.spec.grace));
  for (size_t r = 0; r < rt.ranks.size(); ++r) {
    if (!rt.ranks[r].alive) continue;
    // SIGCONT after SIGTERM, as Slurm does: a stopped rank would hold its
    // SIGTERM pending until the grace ran out; continued, it handles it.
    launcher_.SignalRank(job.id, static_cast<int>(r), SIGTERM);
    launcher_.SignalRank(job.id, static_cast<int>(r), SIGCONT);
  }
  rt.grace_timer = clock_.StartTimer(job.spec.grace, [this, self = std::weak_ptr(attempt_)] {
    if (!Current(self)) return;
    At().grace_timer = 0;
    OnGraceExpired();
  });
}

void JobRunner::OnGraceExpired() {
  spdlog::warn("job={} grace period over: SIGKILL to whatever is left", job_.id);
  launcher_.KillJob(job_.id);
  At().kill_timer = clock_.StartTimer(std::max(job_.spec.grace, kMinKillWait),
                                      [this, self = std::weak_ptr(attempt_)] {
                                        if (!Current(self)) return;
                                        At().kill_timer = 0;
                                        OnKillExpired();
                                      });
}

void JobRunner::OnKillExpired() {
  Job& job = job_;
  LiveAttempt& rt = At();
  if (rt.phase != Phase::kTearingDown || rt.live == 0) return;
  // Still there after SIGKILL: in the kernel's uninterruptible sleep (a
  // driver, NFS) or frozen. Waiting longer would hold the job's record,
  // and its user, for as long as the kernel does; the job ends without
  // them, ltd keeps their devices out of use until they are gone.
  const WallTime now = clock_.Now();
  for (size_t r = 0; r < rt.ranks.size(); ++r) {
    RankRuntime& rr = rt.ranks[r];
    if (!rr.alive) continue;
    Rank& rec = job.ranks[r];
    UnkillableProcess u;
    u.rank = static_cast<int>(r);
    u.pid = rec.pid;
    u.found_at = now;
    if (std::optional<StuckProcess> stuck = launcher_.Stuck(job.id, u.rank)) {
      u.pid = stuck->pid;
      u.start_time = stuck->start_time;
      u.state = std::string(1, stuck->state);
      u.wchan = stuck->wchan;
      u.stack = stuck->kernel_stack;
    }
    spdlog::error("job={} {} is still there {} after SIGKILL; the job ends without it", job.id,
                  Describe(u), FormatDuration(std::max(job.spec.grace, kMinKillWait)));
    Output(-1, Stream::kStderr,
           Cat("ltd: unkillable: ", Describe(u), "; its devices stay out of use until it is gone"));
    job.unkillable.push_back(std::move(u));
    rr.alive = false;
    --rt.live;
    SetRankState(rec, RankState::kKilled);
  }
  // Nothing waits for the job to be empty: it will not be while they are
  // there. Their callbacks go, and what holds them is left to ltd.
  Enter(Phase::kEmptying);
  rt.Cancel(rt.watchdog_timer);
  rt.Cancel(rt.hold_timer);
  rt.watchdog_at.reset();
  job.held_until.reset();
  launcher_.Abandon(job.id);
  OnJobEmpty();  // no restart: see there
}

void JobRunner::OnRanksGone() {
  LiveAttempt& rt = At();
  switch (rt.phase) {
    case Phase::kRunning:
    case Phase::kTearingDown:
    case Phase::kHeld:
      break;
    default:
      return;  // emptying already, or over
  }
  Enter(Phase::kEmptying);
  rt.Cancel(rt.grace_timer);
  rt.Cancel(rt.kill_timer);
  rt.Cancel(rt.watchdog_timer);
  rt.Cancel(rt.hold_timer);
  rt.watchdog_at.reset();
  job_.held_until.reset();
  // Every rank is reaped; whatever they left behind goes now.
  launcher_.KillJob(job_.id);
  launcher_.EndJob(job_.id, [this, self = std::weak_ptr(attempt_)] {
    if (Current(self)) OnJobEmpty();
  });
  // A rank's child stuck in the kernel (a read from a file system that
  // never answers) would keep the job, and its user's devices, for as
  // long as the kernel does: it gets what a rank that would not die gets.
  rt.kill_timer = clock_.StartTimer(std::max(job_.spec.grace, kMinKillWait),
                                    [this, self = std::weak_ptr(attempt_)] {
                                      if (!Current(self)) return;
                                      At().kill_timer = 0;
                                      OnLeftoversStuck();
                                    });
}

void JobRunner::OnLeftoversStuck() {
  Job& job = job_;
  LiveAttempt& rt = At();
  if (rt.phase != Phase::kEmptying) return;
  std::vector<StuckProcess> left = launcher_.Leftovers(job.id, kMaxUnkillableListed + 1);
  if (left.empty()) {
    // Gone meanwhile (the containment's word comes next), or unseen by
    // this containment: the wait goes on, looked at again.
    rt.kill_timer = clock_.StartTimer(kMinKillWait, [this, self = std::weak_ptr(attempt_)] {
      if (!Current(self)) return;
      At().kill_timer = 0;
      OnLeftoversStuck();
    });
    return;
  }
  const bool more = left.size() > kMaxUnkillableListed;
  if (more) left.resize(kMaxUnkillableListed);
  const WallTime now = clock_.Now();
  const Millis waited = std::max(job.spec.grace, kMinKillWait);
  for (StuckProcess& s : left) {
    UnkillableProcess u;
    u.rank = s.rank;
    u.descendant = true;
    u.pid = s.pid;
    u.start_time = s.start_time;
    u.state = std::string(1, s.state);
    u.wchan = std::move(s.wchan);
    u.stack = std::move(s.kernel_stack);
    u.found_at = now;
    spdlog::error("job={} {} is still there {} after SIGKILL; the job ends without it", job.id,
                  Describe(u), FormatDuration(waited));
    Output(-1, Stream::kStderr,
           Cat("ltd: unkillable: ", Describe(u), "; its devices stay out of use until it is gone"));
    job.unkillable.push_back(std::move(u));
  }
  if (more) {
    Output(-1, Stream::kStderr,
           Cat("ltd: unkillable: more than ", kMaxUnkillableListed,
               " processes would not die; the first ", kMaxUnkillableListed, " are listed"));
  }
  launcher_.Abandon(job.id);  // stops the containment's wait too
  OnJobEmpty();               // no restart: see there
}

void JobRunner::OnJobEmpty() {
  Job* job = &job_;
  LiveAttempt& rt = At();
  if (rt.phase != Phase::kEmptying) return;
  // What the ranks wrote reaches their --output files before the attempt
  // ends: whoever reads the files once the job has ended (sbatch's habit:
  // wait, then cat) reads every line, and a restart's files are opened
  // again after the last attempt's writes. Off the loop: the writer waits
  // up to its flush deadline for the user's file system.
  if (rt.outputs) {
    auto closing = std::make_shared<std::optional<OutputFiles>>(std::move(rt.outputs));
    rt.outputs.reset();
    launcher_.OffLoop([closing] { closing->reset(); },
                      [this, alive = std::weak_ptr<int>(alive_), self = std::weak_ptr(attempt_)] {
                        if (!alive.expired() && Current(self)) OnJobEmpty();
                      });
    return;
  }
  rt.Cancel(rt.kill_timer);
  const std::string& id = job->id;
  std::optional<RootCause> cause = rt.cause;
  // Read a TORCHELASTIC_ERROR_FILE the root-cause rank left, if any.
  if (cause && cause->rank >= 0 && cause->reason != CauseReason::kRemoteFailure) {
    auto text = store_.ReadErrorFile(id, cause->rank, job->spec.uid, 64 * 1024, &errors_mount_);
    if (text.ok()) {
      if (auto message = ErrorFileMessage(*text)) cause->message = std::move(*message);
    } else if (!absl::IsNotFound(text.status())) {
      spdlog::warn("job={} error file: {}", id, std::string(text.status().message()));
    }
  }
  ltd::Attempt& attempt = job->attempts.back();
  attempt.ended_at = clock_.Now();
  attempt.root_cause = cause;
  attempt.cpu = launcher_.TakeCpuUsed(id);
  if (rt.lost) return Finish(rt.lost);
  // A rank that would not die holds what the next attempt would need.
  const bool restartable = cause && cause->reason != CauseReason::kCancelled && !rt.run_cancelled &&
                           !time_up_ && job->restart_count < job->spec.max_restarts &&
                           job->unkillable.empty();
  if (restartable) {
    ++job->restart_count;
    // 1x, 2x, 4x ... the backoff, at most kMaxRestartBackoff: a job that
    // fails at once restarts a few times a minute, not forty a second.
    Millis delay = config_.restart_backoff;
    for (int i = 1; i < job->restart_count && delay < RunnerConfig::kMaxRestartBackoff; ++i) {
      delay *= 2;
    }
    delay = std::min(delay, RunnerConfig::kMaxRestartBackoff);
    spdlog::info("job={} restarting ({} of {}) in {}", id, job->restart_count,
                 job->spec.max_restarts, FormatDuration(delay));
    // In the log too: `logs` of a restarted job shows where each attempt
    // ended and why.
    LogNotice(Cat("attempt ", job->restart_count, " of job ", id, " ended: ", cause->message,
                  "; restarting (", job->restart_count, " of ", job->spec.max_restarts, ") in ",
                  FormatDuration(delay)));
    Enter(Phase::kBackoff);
    rt.restart_timer = clock_.StartTimer(delay, [this, self = std::weak_ptr(attempt_)] {
      if (!Current(self)) return;
      At().restart_timer = 0;
      Restart();
    });
    // The login groups looked up again during the backoff (the job's own stay).
    launcher_.ExpectUser(job->spec.uid, job->spec.gid, job->spec.groups);
    Persist();
    return;
  }
  FinishRun(std::move(cause));
}

void JobRunner::Restart() {
  if (fence_ == nullptr) return BeginAttempt();  // a fresh attempt; same devices and port
  // Every node of the run starts the attempt together.
  Enter(Phase::kAwaitingRun);
  fence_->BeginAttempt(job_.restart_count, [this, self = std::weak_ptr(attempt_)](absl::Status s) {
    if (!Current(self) || At().phase != Phase::kAwaitingRun || ended()) return;
    if (s.ok()) return BeginAttempt();
    Output(-1, Stream::kStderr, Cat("ltd: job ", job_.id, " does not restart: ", s.message()));
    Finish(job_.attempts.back().root_cause);
  });
}

void JobRunner::Finish(std::optional<RootCause> cause) {
  Job& job = job_;
  const WallTime now = clock_.Now();
  if (cause) {
    job.root_cause = cause;
    job.exit_code = ExitCodeFor(*cause);
    SetState(EndStateFor(*cause));
  } else {
    job.exit_code = 0;
    SetState(JobState::kSucceeded);
  }
  job.ended_at = now;
  if (!job.started_at) job.started_at = now;
  if (attempt_ != nullptr) {
    Enter(Phase::kEnded);
    At().Cancel(At().restart_timer);
  }
  if (time_limit_timer_ != 0) clock_.CancelTimer(time_limit_timer_);
  time_limit_timer_ = 0;
  if (warn_timer_ != 0) clock_.CancelTimer(warn_timer_);
  warn_timer_ = 0;
  job.held_until.reset();
  if (fence_ != nullptr) NodeEnded();
  // Its error file is read: the user's ranks are gone, and so is the
  // user's say in the job's dir (a user once left 2,000 files there, and
  // wrote more after the end).
  CloseJobErrorDir(store_, job, &errors_mount_);
  Persist();
  events_.OnEnded(job);  // last: the owner may destroy this runner
}

}  // namespace ltd
