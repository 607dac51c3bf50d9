// The runner's start of an attempt and its record keeping; the rest of a
// job's life is in rank_events.cc, watchdog.cc and teardown.cc.
#include "job_runner.h"

#include <algorithm>

#include "auto_instrument.h"
#include "bytes.h"
#include "launch_env.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

JobRunner::JobRunner(Clock& clock, ProcessLauncher& launcher, JobStore& store,
                     StackSampler* sampler, RunnerConfig config, Job job, SupervisionEvents& events)
    : clock_(clock),
      launcher_(launcher),
      store_(store),
      sampler_(sampler),
      config_(std::move(config)),
      events_(events),
      job_(std::move(job)) {
  launcher_.ExpectUser(job_.spec.uid, job_.spec.gid);
}

JobRunner::~JobRunner() {
  if (fence_ != nullptr) fence_->SetEvents(nullptr);
  if (rt_ == nullptr) return;
  for (Clock::TimerId t : {rt_->grace_timer, rt_->kill_timer, rt_->restart_timer,
                           rt_->watchdog_timer, rt_->investigation_timer}) {
    if (t != 0) clock_.CancelTimer(t);
  }
}

void JobRunner::Start() {
  job_.containment = std::string(launcher_.containment());
  BeginAttempt(job_);
}

void JobRunner::BeginAttempt(Job& job) {
  rt_ = std::make_unique<JobRuntime>();
  JobRuntime& rt = *rt_;
  rt.ranks = std::vector<RankRuntime>(static_cast<size_t>(job.spec.devices));
  const WallTime now = clock_.Now();
  if (auto s = launcher_.BeginJob(job.id, job.spec.limits); !s.ok()) {
    RootCause cause;
    cause.reason = CauseReason::kSpawnFailed;
    cause.at = now;
    cause.exit_code = 1;
    cause.message = std::string(s.message());
    spdlog::error("job={} cannot start: {}", job.id, ForLog(cause.message));
    return Finish(job, std::move(cause));
  }
  // The log goes on across attempts: Open continues where the last one was.
  if (auto log = JobLogWriter::Open(store_.JobDir(job.id), config_.job_max_log_bytes); log.ok()) {
    rt.log.emplace(std::move(*log));
  } else {
    spdlog::error("job={} output will not be kept: {}", job.id,
                  std::string(log.status().message()));
  }
  if (!job.started_at) job.started_at = now;
  job.root_cause.reset();  // a new attempt: the last one's cause is in attempts
  Attempt attempt;
  attempt.restart_count = job.restart_count;
  attempt.master_port = job.master_port;
  attempt.started_at = now;
  job.attempts.push_back(attempt);
  job.ranks.assign(static_cast<size_t>(job.spec.devices), Rank{});
  for (int r = 0; r < job.spec.devices; ++r) job.ranks[static_cast<size_t>(r)].rank = r;
  SetState(job, JobState::kRunning);
  if (fence_ != nullptr) fence_->SetState(JobState::kRunning, std::nullopt);
  SpawnRanks(job, rt);
  if (!ended()) Persist(job);
}

void JobRunner::SpawnRanks(Job& job, JobRuntime& rt) {
  const std::string id = job.id;
  const Millis now = clock_.Monotonic();
  for (int r = 0; r < job.spec.devices; ++r) {
    SpawnRequest req;
    req.job_id = id;
    req.rank = r;
    req.argv = job.spec.argv;
    req.env = RankEnvironment(job, r, store_.JobDir(job.id), config_.extra_rank_env);
    RequestAutoHeartbeat(req.env, job.spec.auto_heartbeat ? config_.auto_heartbeat_dir : "",
                         AutoTimeout(job));
    req.cwd = job.spec.cwd;
    req.uid = job.spec.uid;
    req.gid = job.spec.gid;
    for (const ResourceLimit& l : job.spec.rlimits)
      req.rlimits.emplace_back(l.resource, l.soft, l.hard);
    // Ranks are found again by id on every event: a callback that outlives
    // its job (it cannot, but cheaply proven) finds nothing and returns.
    RankCallbacks cb;
    cb.on_output = [this, id, r](Stream s, std::string_view data) {
      if (Job* j = FindMutable(id)) OnOutput(*j, r, s, data);
    };
    cb.on_control = [this, id, r](std::string_view data) {
      if (Job* j = FindMutable(id)) OnControl(*j, r, data);
    };
    cb.on_exit = [this, id, r](ExitStatus status) {
      if (Job* j = FindMutable(id)) OnExit(*j, r, status);
    };
    auto pid = launcher_.Spawn(req, std::move(cb));
    Rank& rank = job.ranks[static_cast<size_t>(r)];
    if (!pid.ok()) {
      RootCause cause;
      cause.rank = r;
      cause.reason = CauseReason::kSpawnFailed;
      cause.at = clock_.Now();
      cause.exit_code = 127;
      cause.message = std::string(pid.status().message());
      spdlog::error("job={} rank={} spawn failed: {}", id, r, ForLog(cause.message));
      SetRankState(job, rank, RankState::kFailed);
      // Ranks not started yet never will be; the started ones are torn down.
      for (int rest = r + 1; rest < job.spec.devices; ++rest) {
        SetRankState(job, job.ranks[static_cast<size_t>(rest)], RankState::kKilled);
      }
      Fail(job, rt, std::move(cause));
      if (rt.live == 0) OnRanksGone(job, rt);
      return;
    }
    rank.pid = *pid;
    rank.started_at = clock_.Now();
    RankRuntime& rr = rt.ranks[static_cast<size_t>(r)];
    rr.alive = true;
    rr.started = now;
    ++rt.live;
    SetRankState(job, rank, RankState::kRunning);
  }
  ArmWatchdog(job, rt);
}

absl::Status JobRunner::Kill(KillOrder order) {
  const int signal = order.signal;
  Job& job = job_;
  if (IsFinal(job.state)) {
    return absl::FailedPreconditionError(
        Cat("job ", job.id, " already ended (", ToString(job.state), ")"));
  }
  RootCause cause;
  cause.reason = CauseReason::kCancelled;
  cause.at = clock_.Now();
  cause.message = std::move(order.why);
  cause.cancelled_by = std::move(order.by);
  if (rt_ == nullptr) {  // not started yet
    if (signal != 0) {
      return absl::FailedPreconditionError(
          Cat("job ", job.id, " has not started; nothing to signal"));
    }
    Finish(job, std::move(cause));
    return absl::OkStatus();
  }
  JobRuntime& rt = *rt_;
  if (rt.restart_timer != 0 || rt.awaiting_run) {
    // Between attempts: nothing runs, nothing to signal or tear down.
    if (signal != 0) {
      return absl::FailedPreconditionError(
          Cat("job ", job.id, " is waiting to restart; nothing runs to signal"));
    }
    Finish(job, std::move(cause));
    return absl::OkStatus();
  }
  if (signal != 0) {
    for (size_t r = 0; r < rt.ranks.size(); ++r) {
      if (!rt.ranks[r].alive) continue;
      if (order.all_processes) {
        launcher_.SignalRank(job.id, static_cast<int>(r), signal);
      } else {
        launcher_.SignalProcess(job.id, static_cast<int>(r), signal);
      }
    }
    return absl::OkStatus();
  }
  Fail(job, rt, std::move(cause));
  return absl::OkStatus();
}

void JobRunner::Abandon(CauseReason reason, std::string why) {
  if (ended()) return;
  RootCause cause;
  cause.reason = reason;
  cause.at = clock_.Now();
  cause.message = std::move(why);
  spdlog::warn("job={} abandoned: {}", job_.id, cause.message);
  if (rt_ == nullptr || rt_->restart_timer != 0 || rt_->awaiting_run) {
    return Finish(job_, std::move(cause));
  }
  // A verdict already made (a hang being investigated) stays the cause;
  // the job still ends LOST, as nobody watches it any more.
  rt_->lost = std::move(cause);
  if (!rt_->cause) rt_->cause = rt_->lost;
  Teardown(job_, *rt_);
  if (rt_->live == 0 && !rt_->investigating) OnRanksGone(job_, *rt_);
}

void JobRunner::SetState(Job& job, JobState state) {
  if (job.state == state) return;
  spdlog::info("job={} {} -> {}", job.id, ToString(job.state), ToString(state));
  job.state = state;
}

void JobRunner::SetRankState(Job& job, Rank& rank, RankState state) {
  if (rank.state == state) return;
  spdlog::debug("job={} rank={} pid={} {} -> {}", job.id, rank.rank, rank.pid, ToString(rank.state),
                ToString(state));
  rank.state = state;
}

void JobRunner::Persist(Job& job) {
  absl::Status s = store_.Save(job);
  if (s.ok()) {
    if (!job.record_error.empty()) spdlog::info("job={} record saved at last", job.id);
    job.record_error.clear();
  } else {
    if (job.record_error.empty()) {
      spdlog::error("job={} record not saved: {}", job.id, std::string(s.message()));
    }
    // A live record is saved again at its next change; a final one is
    // retried by whoever holds the job once it ended (record_error says so).
    job.record_error = std::string(s.message());
  }
  events_.OnChanged(job, Change::kCourse);
}

}  // namespace ltd
