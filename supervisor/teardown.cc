// The end of an attempt: the root cause is fixed, every rank gets SIGTERM
// and after the grace period SIGKILL, the job is known empty, then it
// restarts or ends with its final record.
#include <signal.h>

#include <algorithm>
#include <cstdio>

#include "bytes.h"
#include "duration.h"
#include "job_runner.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

// The message of a TORCHELASTIC_ERROR_FILE: torchelastic writes
// {"message": {"message": "...", "extraInfo": ...}} (or a plain message).
// What a rank wrote there is its own: text that is no JSON, or JSON that
// the parser refuses (Python's lone surrogates for undecodable bytes), is
// kept as it is, cut, rather than lost.
std::optional<std::string> ErrorFileMessage(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) return std::nullopt;
    return text.substr(0, 4096);
  }
  if (!j.is_object() || !j.contains("message")) return std::nullopt;
  const auto& m = j["message"];
  if (m.is_string()) return m.get<std::string>();
  if (m.is_object() && m.contains("message") && m["message"].is_string()) {
    return m["message"].get<std::string>();
  }
  return std::nullopt;
}

}  // namespace

void JobRunner::Fail(Job& job, JobRuntime& rt, RootCause cause) {
  if (!rt.cause) {
    spdlog::warn("job={} root cause: rank={} reason={} {}", job.id, cause.rank,
                 ToString(cause.reason), ForLog(cause.message));
    rt.cause = std::move(cause);
    job.root_cause = rt.cause;  // visible while the teardown runs
    Persist(job);
    Announce(job, *rt.cause);
  }
  Teardown(job, rt);
}

void JobRunner::Teardown(Job& job, JobRuntime& rt) {
  if (rt.tearing_down) return;
  rt.tearing_down = true;
  if (rt.watchdog_timer != 0) clock_.CancelTimer(rt.watchdog_timer);
  rt.watchdog_timer = 0;
  rt.watchdog_at.reset();
  job.teardown_at = clock_.Now();
  if (rt.live == 0) return;
  spdlog::info("job={} teardown: SIGTERM to {} rank(s), SIGKILL after {}", job.id, rt.live,
               FormatDuration(job.spec.grace));
  for (size_t r = 0; r < rt.ranks.size(); ++r) {
    if (!rt.ranks[r].alive) continue;
    // SIGCONT after SIGTERM, as Slurm does: a stopped rank would hold its
    // SIGTERM pending until the grace ran out; continued, it handles it.
    launcher_.SignalRank(job.id, static_cast<int>(r), SIGTERM);
    launcher_.SignalRank(job.id, static_cast<int>(r), SIGCONT);
  }
  rt.grace_timer = clock_.StartTimer(job.spec.grace, [this, id = job.id] { OnGraceExpired(id); });
}

void JobRunner::OnGraceExpired(const std::string& id) {
  JobRuntime* rt = Runtime(id);
  if (rt == nullptr) return;
  rt->grace_timer = 0;
  spdlog::warn("job={} grace period over: SIGKILL to whatever is left", id);
  launcher_.KillJob(id);
  rt->kill_timer =
      clock_.StartTimer(std::max(job_.spec.grace, kMinKillWait), [this, id] { OnKillExpired(id); });
}

void JobRunner::OnKillExpired(const std::string& id) {
  Job* job = FindMutable(id);
  JobRuntime* rt = Runtime(id);
  if (job == nullptr || rt == nullptr) return;
  rt->kill_timer = 0;
  if (rt->live == 0) return;
  // Still there after SIGKILL: in the kernel's uninterruptible sleep (a
  // driver, NFS) or frozen. Waiting longer would hold the job's record,
  // and its user, for as long as the kernel does; the job ends without
  // them, ltd keeps their devices out of use until they are gone.
  const WallTime now = clock_.Now();
  for (size_t r = 0; r < rt->ranks.size(); ++r) {
    RankRuntime& rr = rt->ranks[r];
    if (!rr.alive) continue;
    Rank& rec = job->ranks[r];
    UnkillableProcess u;
    u.rank = static_cast<int>(r);
    u.pid = rec.pid;
    u.found_at = now;
    if (std::optional<StuckProcess> stuck = launcher_.Stuck(id, u.rank)) {
      u.pid = stuck->pid;
      u.start_time = stuck->start_time;
      u.state = std::string(1, stuck->state);
      u.wchan = stuck->wchan;
      u.stack = stuck->kernel_stack;
    }
    spdlog::error("job={} {} is still there {} after SIGKILL; the job ends without it", id,
                  Describe(u), FormatDuration(std::max(job->spec.grace, kMinKillWait)));
    Output(-1, Stream::kStderr,
           Cat("ltd: unkillable: ", Describe(u), "; its devices stay out of use until it is gone"));
    job->unkillable.push_back(std::move(u));
    rr.alive = false;
    --rt->live;
    SetRankState(*job, rec, RankState::kKilled);
  }
  launcher_.Abandon(id);
  OnJobEmpty(id);  // no restart: see there
}

void JobRunner::OnRanksGone(Job& job, JobRuntime& rt) {
  if (rt.grace_timer != 0) clock_.CancelTimer(rt.grace_timer);
  rt.grace_timer = 0;
  if (rt.kill_timer != 0) clock_.CancelTimer(rt.kill_timer);
  rt.kill_timer = 0;
  if (rt.watchdog_timer != 0) clock_.CancelTimer(rt.watchdog_timer);
  rt.watchdog_timer = 0;
  rt.watchdog_at.reset();
  // Every rank is reaped; whatever they left behind goes now.
  launcher_.KillJob(job.id);
  launcher_.EndJob(job.id, [this, id = job.id] { OnJobEmpty(id); });
}

void JobRunner::OnJobEmpty(const std::string& id) {
  Job* job = FindMutable(id);
  JobRuntime* found = Runtime(id);
  if (job == nullptr || found == nullptr) return;
  JobRuntime& rt = *found;
  std::optional<RootCause> cause = rt.cause;
  // Read a TORCHELASTIC_ERROR_FILE the root-cause rank left, if any.
  if (cause && cause->rank >= 0 && cause->reason != CauseReason::kRemoteFailure) {
    auto text = store_.ReadErrorFile(id, cause->rank, job->spec.uid, 64 * 1024);
    if (text.ok()) {
      if (auto message = ErrorFileMessage(*text)) cause->message = std::move(*message);
    } else if (!absl::IsNotFound(text.status())) {
      spdlog::warn("job={} error file: {}", id, std::string(text.status().message()));
    }
  }
  Attempt& attempt = job->attempts.back();
  attempt.ended_at = clock_.Now();
  attempt.root_cause = cause;
  if (rt.lost) return Finish(*job, rt.lost);
  // A rank that would not die holds what the next attempt would need.
  const bool restartable = cause && cause->reason != CauseReason::kCancelled && !rt.run_cancelled &&
                           job->restart_count < job->spec.max_restarts && job->unkillable.empty();
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
    Output(-1, Stream::kStderr,
           Cat("ltd: restarting job ", id, " (", job->restart_count, " of ", job->spec.max_restarts,
               ") in ", FormatDuration(delay), " after: ", cause->message));
    rt.restart_timer = clock_.StartTimer(delay, [this, id] { Restart(id); });
    launcher_.ExpectUser(job->spec.uid, job->spec.gid);  // looked up again during the backoff
    Persist(*job);
    return;
  }
  Finish(*job, std::move(cause));
}

void JobRunner::Restart(const std::string& id) {
  Job* job = FindMutable(id);
  JobRuntime* rt = Runtime(id);
  if (job == nullptr || rt == nullptr) return;
  rt->restart_timer = 0;
  if (fence_ == nullptr) return BeginAttempt(*job);  // a fresh runtime; same devices and port
  // Every node of the run starts the attempt together.
  rt->awaiting_run = true;
  fence_->BeginAttempt(job->restart_count, [this, id](absl::Status s) {
    Job* job = FindMutable(id);
    JobRuntime* rt = Runtime(id);
    if (job == nullptr || rt == nullptr || !rt->awaiting_run || ended()) return;
    rt->awaiting_run = false;
    if (s.ok()) return BeginAttempt(*job);
    Output(-1, Stream::kStderr, Cat("ltd: job ", id, " does not restart: ", s.message()));
    Finish(*job, job->attempts.back().root_cause);
  });
}

void JobRunner::Finish(Job& job, std::optional<RootCause> cause) {
  const WallTime now = clock_.Now();
  if (cause) {
    job.root_cause = cause;
    job.exit_code = ExitCodeFor(*cause);
    JobState state = JobState::kFailed;
    if (cause->reason == CauseReason::kCancelled) state = JobState::kCancelled;
    if (cause->reason == CauseReason::kDaemonLost || cause->reason == CauseReason::kSupervisorLost)
      state = JobState::kLost;
    SetState(job, state);
  } else {
    job.exit_code = 0;
    SetState(job, JobState::kSucceeded);
  }
  job.ended_at = now;
  if (!job.started_at) job.started_at = now;
  if (rt_ != nullptr && rt_->restart_timer != 0) clock_.CancelTimer(rt_->restart_timer);
  if (rt_ != nullptr) rt_->restart_timer = 0;
  if (fence_ != nullptr) NodeEnded(job);
  // Its error file is read: the user's ranks are gone, and so is the
  // user's say in the job's dir (a user once left 2,000 files there, and
  // wrote more after the end).
  if (auto s = store_.CloseErrorDir(job.id); !s.ok()) {
    spdlog::warn("job={} errors/ dir not closed: {}", job.id, std::string(s.message()));
  }
  Persist(job);
  events_.OnEnded(job);  // last: the owner may destroy this runner
}

}  // namespace ltd
