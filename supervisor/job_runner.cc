// The runner's start of an attempt and its record keeping; the rest of a
// job's life is in rank_events.cc, watchdog.cc and teardown.cc.
#include "job_runner.h"

#include <algorithm>

#include "auto_instrument.h"
#include "bytes.h"
#include "duration.h"
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
  launcher_.ExpectUser(job_.spec.uid, job_.spec.gid, job_.spec.groups);
}

std::string_view ToString(Phase p) {
  switch (p) {
    case Phase::kRunning:
      return "running";
    case Phase::kInvestigating:
      return "investigating";
    case Phase::kHeld:
      return "held";
    case Phase::kTearingDown:
      return "tearing down";
    case Phase::kEmptying:
      return "emptying";
    case Phase::kBackoff:
      return "backoff";
    case Phase::kAwaitingRun:
      return "awaiting the run";
    case Phase::kAwaitingVerdict:
      return "awaiting the run's verdict";
    case Phase::kEnded:
      return "ended";
  }
  return "?";
}

JobRunner::~JobRunner() {
  CancelStacks();
  if (fence_ != nullptr) fence_->SetEvents(nullptr);
  if (time_limit_timer_ != 0) clock_.CancelTimer(time_limit_timer_);
  if (warn_timer_ != 0) clock_.CancelTimer(warn_timer_);
  // The attempt cancels its own timers as it goes.
}

void JobRunner::Enter(Phase phase) {
  LiveAttempt& a = At();
  if (a.phase == phase) return;
  spdlog::debug("job={} attempt={} {} -> {}", job_.id, job_.restart_count, ToString(a.phase),
                ToString(phase));
  a.phase = phase;
}

void JobRunner::Start() {
  job_.containment = std::string(launcher_.containment());
  OpenErrorDir();
  BeginAttempt();
  if (!ended()) ArmTimeLimit();
}

void JobRunner::BeginRendezvous() {
  if (ended() || job_.state != JobState::kPending) return;
  SetState(JobState::kStarting);
  job_.started_at = clock_.Now();  // it holds its devices from here
  ArmTimeLimit();
  Persist();
}

void JobRunner::ArmTimeLimit() {
  if (time_limit_armed_ || job_.spec.time_limit.count() <= 0) return;
  time_limit_armed_ = true;
  // From the first start (a multi-node run's rendezvous), restarts and
  // their backoffs included, as a batch system's wall time counts.
  time_limit_timer_ = clock_.StartTimer(job_.spec.time_limit, [this] {
    time_limit_timer_ = 0;
    OnTimeLimit();
  });
  const WarnSignal& warn = job_.spec.warn_signal;
  if (warn.signal == 0 || warn.before >= job_.spec.time_limit) return;
  warn_timer_ = clock_.StartTimer(job_.spec.time_limit - warn.before, [this] {
    warn_timer_ = 0;
    SendWarnSignal(Cat("--time ends in ", FormatDuration(job_.spec.warn_signal.before)));
  });
}

void JobRunner::LogNotice(std::string_view text) {
  if (attempt_ == nullptr || !At().log) return Output(-1, Stream::kStderr, Cat("ltd: ", text));
  std::string stamp = LogStamp(clock_.Now());
  MarkStderr(stamp);
  At().log->Append(Cat(stamp, "[ltd] ", text, "\n"));
  Output(kLoggedNoticeRank, Stream::kStderr, Cat("ltd: ", text));
}

void JobRunner::SendWarnSignal(const std::string& why) {
  if (ended()) return;
  KillOrder order = KillOrder::Signal(job_.spec.warn_signal.signal, false);
  order.warn = why;
  if (absl::Status s = Kill(std::move(order)); !s.ok()) {
    // Between attempts: no rank to tell; the record says it was not sent.
    spdlog::info("job={} --signal not sent: {}", job_.id, std::string(s.message()));
    LogNotice(Cat("--signal ", FormatWarnSignal(job_.spec.warn_signal), " not sent (", why,
                  "): ", s.message()));
  }
}

void JobRunner::WarnSent(int signal, const std::string& why) {
  job_.warn_signal_sent_at = clock_.Now();
  job_.warn_signal_why = why;
  spdlog::info("job={} SIG{} sent to every rank: {}", job_.id, SignalName(signal), ForLog(why));
  LogNotice(Cat("SIG", SignalName(signal), " sent to every rank's main process: ", why));
  Persist();
}

void JobRunner::OnTimeLimit() {
  if (ended()) return;
  time_up_ = true;  // whatever ends the attempt now, nothing restarts
  RootCause cause;
  cause.reason = CauseReason::kTimeLimit;
  cause.at = clock_.Now();
  cause.message =
      job_.state == JobState::kStarting
          ? Cat("the job reached its time limit of ", FormatDuration(job_.spec.time_limit),
                " (--time) waiting in the rendezvous for its run's other nodes")
          : Cat("the job ran for its time limit of ", FormatDuration(job_.spec.time_limit),
                " (--time)");
  spdlog::warn("job={} {}", job_.id, cause.message);
  Output(-1, Stream::kStderr, Cat("ltd: tearing down job ", job_.id, ": ", cause.message));
  const Phase phase = attempt_ != nullptr ? At().phase : Phase::kBackoff;
  if (phase == Phase::kBackoff || phase == Phase::kAwaitingRun) return Finish(std::move(cause));
  // A cause already found (a crash being torn down, a hang held for a
  // look) stays the root cause; the time only ends the attempt.
  Fail(std::move(cause));
}

void JobRunner::OpenErrorDir() {
  const ErrorDirBound bound = ErrorDirShare(config_.job_max_log_bytes, job_.spec.devices);
  std::optional<ErrorDirBound> wanted;
  if (config_.bound_errors_dir) wanted = bound;
  absl::Status s =
      store_.OpenErrorDir(job_.id, job_.spec.uid, job_.spec.gid, wanted, &errors_mount_);
  if (s.ok() && wanted) {
    job_.errors.max_bytes = bound.bytes;
    job_.errors.max_files = bound.files;
    spdlog::debug("job={} errors/: a tmpfs of {} bytes and {} files", job_.id, bound.bytes,
                  bound.files);
  } else if (!s.ok()) {
    // The rank's error file is then the state dir's bound's (per user) to hold.
    spdlog::warn("job={} errors/ is not bounded: {}", job_.id, std::string(s.message()));
  }
}

uint64_t JobRunner::LogBudget() const {
  const uint64_t errors = ErrorDirShare(config_.job_max_log_bytes, job_.spec.devices).bytes;
  return config_.job_max_log_bytes > errors ? config_.job_max_log_bytes - errors : 0;
}

void JobRunner::BeginAttempt() {
  if (job_.spec.output.empty() && job_.spec.error.empty()) return StartAttempt(std::nullopt);
  // As the user, before anything of the job exists; appended to on
  // restarts. Off the loop: the user's file system may take the whole
  // deadline, and the job stays killable meanwhile (a kill ends it, and
  // the files opened late are closed unused).
  auto opened = std::make_shared<absl::StatusOr<OutputFiles>>(absl::UnknownError("not opened"));
  const uint64_t seq = ++opening_;
  launcher_.OffLoop(
      [opened, job = job_, user = launcher_.user_files()] {
        *opened = OutputFiles::Open(job, /*truncate=*/job.attempts.empty(), user);
      },
      [this, alive = std::weak_ptr<int>(alive_), seq, opened] {
        if (alive.expired() || seq != opening_ || ended()) return;
        StartAttempt(std::move(*opened));
      });
}

void JobRunner::StartAttempt(std::optional<absl::StatusOr<OutputFiles>> files) {
  Job& job = job_;
  // A fresh attempt: the last one's timers and late answers go with it.
  attempt_ = std::make_shared<LiveAttempt>(clock_, static_cast<size_t>(job.spec.devices));
  LiveAttempt& rt = At();
  const WallTime now = clock_.Now();
  absl::Status s = absl::OkStatus();
  if (files && files->ok()) {
    rt.outputs.emplace(std::move(**files));
  } else if (files) {
    s = files->status();
  }
  if (s.ok()) {
    JobLimits limits = job.spec.limits;
    limits.isolate_gpus = job.isolate_gpus;
    limits.gpu_minors = job.gpu_minors;
    s = launcher_.BeginJob(job.id, limits);
  }
  if (!s.ok()) {
    RootCause cause;
    cause.reason = CauseReason::kSpawnFailed;
    cause.at = now;
    cause.exit_code = 1;
    cause.message = std::string(s.message());
    spdlog::error("job={} cannot start: {}", job.id, ForLog(cause.message));
    return Finish(std::move(cause));
  }
  // The log goes on across attempts: Open continues where the last one was.
  if (auto log = JobLogWriter::Open(store_.JobDir(job.id), LogBudget()); log.ok()) {
    rt.log.emplace(std::move(*log));
  } else {
    spdlog::error("job={} output will not be kept: {}", job.id,
                  std::string(log.status().message()));
  }
  if (!job.started_at) job.started_at = now;
  job.root_cause.reset();  // a new attempt: the last one's cause is in attempts
  job.held_until.reset();
  ltd::Attempt record;
  record.restart_count = job.restart_count;
  record.master_port = job.master_port;
  record.started_at = now;
  job.attempts.push_back(record);
  job.ranks.assign(static_cast<size_t>(job.spec.devices), Rank{});
  for (int r = 0; r < job.spec.devices; ++r) job.ranks[static_cast<size_t>(r)].rank = r;
  SetState(JobState::kRunning);
  if (fence_ != nullptr) fence_->SetState(JobState::kRunning, std::nullopt);
  SpawnRanks();
  if (!ended()) Persist();
}

void JobRunner::SpawnRanks() {
  Job& job = job_;
  LiveAttempt& rt = At();
  const std::weak_ptr<LiveAttempt> self = attempt_;
  const Millis now = clock_.Monotonic();
  for (int r = 0; r < job.spec.devices; ++r) {
    SpawnRequest req;
    req.job_id = job.id;
    req.rank = r;
    req.argv = job.spec.argv;
    req.env = RankEnvironment(job, r, store_.JobDir(job.id), config_.extra_rank_env);
    RequestAutoHeartbeat(req.env, job.spec.auto_heartbeat ? config_.auto_heartbeat_dir : "",
                         AutoTimeout());
    req.cwd = job.spec.cwd;
    req.uid = job.spec.uid;
    req.gid = job.spec.gid;
    for (const ResourceLimit& l : job.spec.rlimits)
      req.rlimits.emplace_back(l.resource, l.soft, l.hard);
    // A rank's events belong to its attempt: once that ended, they find
    // nothing and return.
    RankCallbacks cb;
    cb.on_output = [this, self, r](Stream s, std::string_view data) {
      if (Current(self)) OnOutput(r, s, data);
    };
    cb.on_control = [this, self, r](std::string_view data) {
      if (Current(self)) OnControl(r, data);
    };
    cb.on_exit = [this, self, r](ExitStatus status) {
      if (Current(self)) OnExit(r, status);
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
      spdlog::error("job={} rank={} spawn failed: {}", job.id, r, ForLog(cause.message));
      SetRankState(rank, RankState::kFailed);
      // Ranks not started yet never will be; the started ones are torn down.
      for (int rest = r + 1; rest < job.spec.devices; ++rest) {
        SetRankState(job.ranks[static_cast<size_t>(rest)], RankState::kKilled);
      }
      return Fail(std::move(cause));
    }
    rank.pid = *pid;
    rank.started_at = clock_.Now();
    RankRuntime& rr = rt.ranks[static_cast<size_t>(r)];
    rr.alive = true;
    rr.started = now;
    ++rt.live;
    SetRankState(rank, RankState::kRunning);
  }
  ArmWatchdog();
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
  if (attempt_ == nullptr) {  // not started yet
    if (signal != 0) {
      return absl::FailedPreconditionError(
          Cat("job ", job.id, " has not started; nothing to signal"));
    }
    Finish(std::move(cause));
    return absl::OkStatus();
  }
  LiveAttempt& rt = At();
  if (rt.phase == Phase::kBackoff || rt.phase == Phase::kAwaitingRun) {
    // Between attempts: nothing runs, nothing to signal or tear down.
    if (signal != 0) {
      return absl::FailedPreconditionError(
          Cat("job ", job.id, " is waiting to restart; nothing runs to signal"));
    }
    Finish(std::move(cause));
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
    if (!order.warn.empty()) WarnSent(signal, order.warn);
    return absl::OkStatus();
  }
  if (rt.phase == Phase::kHeld) {
    // The hang stays the root cause; the kill only ends the look.
    const std::string by = cause.cancelled_by.empty() ? "" : Cat(" by ", cause.cancelled_by);
    spdlog::info("job={} hold ended{}", job.id, by);
    Output(-1, Stream::kStderr, Cat("ltd: the hold of job ", job.id, " ended", by));
  }
  Fail(std::move(cause));
  return absl::OkStatus();
}

void JobRunner::Abandon(CauseReason reason, std::string why) {
  if (ended()) return;
  RootCause cause;
  cause.reason = reason;
  cause.at = clock_.Now();
  cause.message = std::move(why);
  spdlog::warn("job={} abandoned: {}", job_.id, cause.message);
  if (attempt_ == nullptr || At().phase == Phase::kBackoff || At().phase == Phase::kAwaitingRun ||
      At().phase == Phase::kAwaitingVerdict) {
    return Finish(std::move(cause));
  }
  // A verdict already made (a hang being investigated) stays the cause;
  // the job still ends LOST, as nobody watches it any more.
  LiveAttempt& rt = At();
  rt.lost = std::move(cause);
  if (!rt.cause) rt.cause = rt.lost;
  Teardown();
}

void JobRunner::SetState(JobState state) {
  if (job_.state == state) return;
  spdlog::info("job={} {} -> {}", job_.id, ToString(job_.state), ToString(state));
  job_.state = state;
}

void JobRunner::SetRankState(Rank& rank, RankState state) {
  if (rank.state == state) return;
  spdlog::debug("job={} rank={} pid={} {} -> {}", job_.id, rank.rank, rank.pid,
                ToString(rank.state), ToString(state));
  rank.state = state;
}

void JobRunner::Persist() {
  Job& job = job_;
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
