#include "job_manager.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "absl/strings/numbers.h"
#include "auto_instrument.h"
#include "bytes.h"
#include "duration.h"
#include "launch_env.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

constexpr Millis kMaxTimeout = std::chrono::hours(24 * 365);
constexpr Millis kMaxGrace = std::chrono::hours(24);
// execve takes about this much argv and environment together.
constexpr size_t kMaxArgvAndEnv = 2u << 20;

// What no job may ask for, whoever sends it (ltctl checks little of it:
// any client can speak the protocol).
absl::Status Validate(const JobSpec& spec, const ManagerConfig& config) {
  const int slots = config.placement.slots;
  if (spec.devices < 1) return absl::InvalidArgumentError("--devices must be at least 1");
  if (spec.devices > slots) {
    return absl::InvalidArgumentError(Cat("--devices ", spec.devices, " is more than the ", slots,
                                          " this ltd has; ask for at most ", slots));
  }
  if (spec.argv.empty() || spec.argv.front().empty()) {
    return absl::InvalidArgumentError(
        "no program given; usage: ltctl submit --devices N [options] PROGRAM [ARGS...]");
  }
  if (spec.name.size() > 128) {
    return absl::InvalidArgumentError("--name is longer than 128 characters; choose a shorter one");
  }
  if (!spec.name.empty()) {
    if (std::all_of(spec.name.begin(), spec.name.end(), ::isdigit)) {
      return absl::InvalidArgumentError("--name must not be all digits (those are job ids)");
    }
    for (char c : spec.name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
        return absl::InvalidArgumentError(Cat("--name '", DisplayEscape(spec.name, Controls::kEscape),
                                              "' may only use letters, digits, '-', '_' and '.'"));
      }
    }
  }
  if (spec.cwd.empty() || spec.cwd.front() != '/') {
    return absl::InvalidArgumentError("the working directory must be an absolute path");
  }
  size_t bytes = spec.cwd.size();
  for (const auto* list : {&spec.argv, &spec.env}) {
    for (const std::string& s : *list) bytes += s.size() + 1;
  }
  if (bytes > kMaxArgvAndEnv) {
    return absl::InvalidArgumentError(Cat("the program's arguments and environment are ", bytes,
                                          " bytes; a program can be started with at most ",
                                          kMaxArgvAndEnv, ": pass less (a file of arguments)"));
  }
  struct Range {
    const char* flag;
    Millis value, max;
  };
  for (const Range& r : {Range{"--heartbeat-timeout", spec.heartbeat_timeout, kMaxTimeout},
                         Range{"--startup-timeout", spec.startup_timeout, kMaxTimeout},
                         Range{"--grace", spec.grace, kMaxGrace}}) {
    if (r.value.count() < 0) return absl::InvalidArgumentError(Cat(r.flag, " must not be negative"));
    if (r.value > r.max) {
      return absl::InvalidArgumentError(Cat(r.flag, " ", r.value.count(), "ms is more than ",
                                            FormatDuration(r.max), "; use a shorter one"));
    }
  }
  if (spec.max_restarts < 0 || spec.max_restarts > config.max_restarts_limit) {
    return absl::InvalidArgumentError(Cat("--max-restarts ", spec.max_restarts,
                                          " is outside 0..", config.max_restarts_limit,
                                          ", the limit of this ltd (--max-restarts-limit)"));
  }
  return absl::OkStatus();
}

}  // namespace

JobManager::JobManager(Clock& clock, ProcessLauncher& launcher, JobStore& store,
                       PortAllocator& ports, StackSampler* sampler, ManagerConfig config)
    : clock_(clock),
      launcher_(launcher),
      store_(store),
      ports_(ports),
      sampler_(sampler),
      config_(std::move(config)),
      scheduler_(config_.placement) {}

JobManager::~JobManager() = default;

void JobManager::Recover() {
  for (Job& job : store_.LoadAll()) {
    uint64_t numeric = 0;
    if (absl::SimpleAtoi(job.id, &numeric)) next_id_ = std::max(next_id_, numeric + 1);
    if (!IsFinal(job.state)) {
      const bool ran = job.state == JobState::kRunning;
      spdlog::warn("job={} was {} when an earlier ltd died; marking it LOST", job.id,
                   ToString(job.state));
      RootCause cause;
      cause.reason = CauseReason::kDaemonLost;
      cause.at = clock_.Now();
      cause.message = ran ? "ltd died while the job ran; its processes were killed"
                          : "ltd died before the job started";
      for (Rank& r : job.ranks) {
        if (r.state == RankState::kRunning || r.state == RankState::kPending)
          r.state = RankState::kLost;
      }
      if (!job.attempts.empty() && !job.attempts.back().ended_at) {
        job.attempts.back().ended_at = cause.at;
        job.attempts.back().root_cause = cause;
      }
      job.state = JobState::kLost;
      job.exit_code = ExitCodeFor(cause);
      job.ended_at = cause.at;
      job.root_cause = std::move(cause);
      Persist(job);
    }
    std::string id = job.id;
    jobs_.emplace(std::move(id), std::make_unique<Job>(std::move(job)));
  }
  if (!jobs_.empty()) spdlog::info("recovered {} job records", jobs_.size());
  // Oldest first, by id: ids count up.
  std::vector<std::pair<uint64_t, std::string>> done;
  for (const auto& [id, job] : jobs_) {
    uint64_t n = 0;
    if (IsFinal(job->state) && absl::SimpleAtoi(id, &n)) done.emplace_back(n, id);
  }
  std::sort(done.begin(), done.end());
  for (auto& [n, id] : done) finished_.push_back(std::move(id));
  PruneFinished();
}
absl::StatusOr<std::string> JobManager::Submit(JobSpec spec, std::string user) {
  if (shutting_down_)
    return absl::UnavailableError("ltd is shutting down; submit again once it is back");
  if (auto s = Validate(spec, config_); !s.ok()) return s;
  if (auto s = scheduler_.MayQueue(spec.uid, user); !s.ok()) return s;
  auto taken = store_.TakeId(next_id_);
  if (!taken.ok()) {
    return absl::UnavailableError(Cat("cannot record the job (", taken.status().message(),
                                      "); free space in ", store_.state_dir(), " and submit again"));
  }
  next_id_ = *taken + 1;
  auto job = std::make_unique<Job>();
  job->id = std::to_string(*taken);
  job->user = std::move(user);
  job->submitted_at = clock_.Now();
  job->containment = std::string(launcher_.containment());
  job->spec = std::move(spec);
  absl::Status saved = store_.CreateJobDir(job->id, job->spec.uid, job->spec.gid);
  if (saved.ok()) saved = store_.Save(*job);
  if (!saved.ok()) {
    (void)store_.Remove(job->id);
    return absl::UnavailableError(Cat("cannot record the job (", saved.message(), "); free space in ",
                                      store_.state_dir(), " and submit again"));
  }
  const std::string id = job->id;
  Job& ref = *job;
  jobs_.emplace(id, std::move(job));
  spdlog::info("job={} submitted by {}: {} rank(s) of {}", id, ref.user, ref.spec.devices,
               ForLog(ref.spec.argv.front()));
  uint64_t seq = 0;
  (void)absl::SimpleAtoi(id, &seq);
  scheduler_.Enqueue(id, seq, ref.spec.uid, ref.spec.devices);
  Schedule();
  return id;
}

Job* JobManager::FindMutable(const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

absl::StatusOr<const Job*> JobManager::Resolve(std::string_view ref, uid_t caller) const {
  if (ref.empty()) return absl::InvalidArgumentError("no job given");
  if (auto it = jobs_.find(ref); it != jobs_.end()) return it->second.get();
  std::vector<const Job*> named, own;
  for (const auto& [id, job] : jobs_) {
    if (job->spec.name != ref) continue;
    named.push_back(job.get());
    if (caller != kAnyone && job->spec.uid == caller) own.push_back(job.get());
  }
  if (named.empty()) {
    return absl::NotFoundError(Cat("no job '", ref, "'; `ltctl ps -a` lists them"));
  }
  const std::vector<const Job*>& candidates = own.empty() ? named : own;
  if (candidates.size() == 1) return candidates.front();
  const Job* live = nullptr;
  int live_count = 0;
  for (const Job* j : candidates) {
    if (!IsFinal(j->state)) {
      live = j;
      ++live_count;
    }
  }
  if (live_count == 1) return live;
  std::vector<std::string> ids;
  for (const Job* j : candidates) ids.push_back(j->id);
  return absl::FailedPreconditionError(
      Cat("name '", ref, "' is ambiguous: jobs ", Join(ids, ", "), "; use the job id"));
}

std::vector<const Job*> JobManager::List(bool all) const {
  std::vector<const Job*> out;
  for (const auto& [id, job] : jobs_) {
    if (all || !IsFinal(job->state)) out.push_back(job.get());
  }
  std::sort(out.begin(), out.end(), [](const Job* a, const Job* b) {
    return a->id.size() != b->id.size() ? a->id.size() < b->id.size() : a->id < b->id;
  });
  return out;
}

void JobManager::Schedule() {
  if (shutting_down_) return;
  for (Scheduler::Placement& p : scheduler_.Place()) {
    Job* job = FindMutable(p.id);
    if (job == nullptr || job->state != JobState::kPending) {
      scheduler_.Release(p.id);  // cannot happen: pending jobs are dequeued when they end
      continue;
    }
    job->device_slots = std::move(p.slots);
    job->cuda_visible_devices = std::move(p.cuda_visible_devices);
    Start(*job);
  }
}

void JobManager::Start(Job& job) {
  auto& rt = runtimes_[job.id];
  // Observers may have come while the job was PENDING or between attempts.
  auto observers = rt ? std::move(rt->observers) : decltype(JobRuntime::observers){};
  rt = std::make_unique<JobRuntime>();
  rt->observers = std::move(observers);
  rt->ranks = std::vector<RankRuntime>(static_cast<size_t>(job.spec.devices));
  const WallTime now = clock_.Now();

  auto fail_start = [&](std::string message) {
    RootCause cause;
    cause.reason = CauseReason::kSpawnFailed;
    cause.at = now;
    cause.exit_code = 1;
    cause.message = std::move(message);
    spdlog::error("job={} cannot start: {}", job.id, ForLog(cause.message));
    Finish(job, std::move(cause));
  };

  auto port = ports_.Pick(ports_in_use_);
  if (!port.ok()) return fail_start(std::string(port.status().message()));
  job.master_port = *port;
  ports_in_use_.insert(*port);
  if (auto s = launcher_.BeginJob(job.id); !s.ok()) return fail_start(std::string(s.message()));

  // The log goes on across attempts: Open continues where the last one was.
  if (auto log = JobLogWriter::Open(store_.JobDir(job.id), config_.job_max_log_bytes); log.ok()) {
    rt->log.emplace(std::move(*log));
  } else {
    spdlog::error("job={} output will not be kept: {}", job.id, std::string(log.status().message()));
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
  SpawnRanks(job, *rt);
  Persist(job);
}
void JobManager::SpawnRanks(Job& job, JobRuntime& rt) {
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
absl::Status JobManager::Kill(const std::string& id, int signal) {
  Job* job = FindMutable(id);
  if (job == nullptr) return absl::NotFoundError(Cat("no job ", id));
  if (IsFinal(job->state)) {
    return absl::FailedPreconditionError(
        Cat("job ", id, " already ended (", ToString(job->state), ")"));
  }
  RootCause cause;
  cause.reason = CauseReason::kCancelled;
  cause.at = clock_.Now();
  cause.message = shutting_down_ ? "ltd shut down" : "cancelled by the user";
  if (job->state == JobState::kPending) {
    if (signal != 0) {
      return absl::FailedPreconditionError(Cat("job ", id, " has not started; nothing to signal"));
    }
    Finish(*job, std::move(cause));
    return absl::OkStatus();
  }
  JobRuntime& rt = *runtimes_.at(id);
  if (rt.restart_timer != 0) {
    // Between attempts: nothing runs, nothing to signal or tear down.
    if (signal != 0) {
      return absl::FailedPreconditionError(
          Cat("job ", id, " is waiting to restart; nothing runs to signal"));
    }
    Finish(*job, std::move(cause));
    return absl::OkStatus();
  }
  if (signal != 0) {
    for (size_t r = 0; r < rt.ranks.size(); ++r) {
      if (rt.ranks[r].alive) launcher_.SignalRank(id, static_cast<int>(r), signal);
    }
    return absl::OkStatus();
  }
  Fail(*job, rt, std::move(cause));
  return absl::OkStatus();
}

std::optional<JobManager::ObserverId> JobManager::Observe(const std::string& id,
                                                          std::shared_ptr<JobObserver> observer) {
  Job* job = FindMutable(id);
  if (job == nullptr || IsFinal(job->state)) return std::nullopt;
  auto it = runtimes_.find(id);
  if (it == runtimes_.end()) {
    // PENDING: no runtime yet; it gets one at start. Keep the observer in a
    // runtime made now, which Start() replaces while keeping observers.
    it = runtimes_.emplace(id, std::make_unique<JobRuntime>()).first;
  }
  const ObserverId oid = next_observer_++;
  it->second->observers.emplace(oid, std::move(observer));
  return oid;
}

void JobManager::Unobserve(const std::string& id, ObserverId observer) {
  if (auto it = runtimes_.find(id); it != runtimes_.end()) it->second->observers.erase(observer);
}

LogSnapshot JobManager::TakeLog(const std::string& id) const {
  return LogSnapshot::Take(store_.JobDir(id));
}

void JobManager::Shutdown(std::function<void()> done) {
  shutting_down_ = true;
  shutdown_done_ = std::move(done);
  std::vector<std::string> live;
  for (const auto& [id, job] : jobs_) {
    if (!IsFinal(job->state)) live.push_back(id);
  }
  spdlog::info("shutting down: tearing down {} job(s)", live.size());
  for (const std::string& id : live) (void)Kill(id, 0);
  MaybeFinishShutdown();
}

void JobManager::MaybeFinishShutdown() {
  if (!shutting_down_ || !shutdown_done_) return;
  for (const auto& [id, job] : jobs_) {
    if (!IsFinal(job->state)) return;
  }
  auto done = std::move(shutdown_done_);
  shutdown_done_ = nullptr;
  done();
}

void JobManager::SetState(Job& job, JobState state) {
  if (job.state == state) return;
  spdlog::info("job={} {} -> {}", job.id, ToString(job.state), ToString(state));
  job.state = state;
}

void JobManager::SetRankState(Job& job, Rank& rank, RankState state) {
  if (rank.state == state) return;
  spdlog::debug("job={} rank={} pid={} {} -> {}", job.id, rank.rank, rank.pid, ToString(rank.state),
                ToString(state));
  rank.state = state;
}

void JobManager::Persist(Job& job) {
  absl::Status s = store_.Save(job);
  if (s.ok()) {
    if (!job.record_error.empty()) spdlog::info("job={} record saved at last", job.id);
    job.record_error.clear();
    unsaved_.erase(job.id);
    return;
  }
  if (job.record_error.empty()) {
    spdlog::error("job={} record not saved: {}", job.id, std::string(s.message()));
  }
  job.record_error = std::string(s.message());
  // A live record is saved again at its next change anyway; a final one
  // has no next change, so it is retried until the disk takes it.
  if (!IsFinal(job.state)) return;
  unsaved_.insert(job.id);
  if (retry_timer_ != 0) return;
  retry_delay_ = std::clamp(retry_delay_ * 2, Millis(1000), Millis(60000));
  retry_timer_ = clock_.StartTimer(retry_delay_, [this] { RetryUnsaved(); });
}

void JobManager::RetryUnsaved() {
  retry_timer_ = 0;
  const std::set<std::string> ids = std::move(unsaved_);
  unsaved_.clear();
  for (const std::string& id : ids) {
    if (Job* job = FindMutable(id)) Persist(*job);
  }
  if (unsaved_.empty()) retry_delay_ = Millis(0);
}

}  // namespace ltd
