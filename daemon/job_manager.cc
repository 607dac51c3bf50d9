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
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

namespace {

std::string EnvValue(const std::vector<std::string>& env, std::string_view key) {
  for (const std::string& kv : env) {
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=') {
      return kv.substr(key.size() + 1);
    }
  }
  return "";
}

bool HasEnv(const std::vector<std::string>& env, std::string_view key) {
  for (const std::string& kv : env) {
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=') {
      return true;
    }
  }
  return false;
}

// Whether `uid`/`gid` may execute the file: the kernel's check, done ahead of
// time so a job that cannot start fails before any rank runs.
int CheckExecutable(const std::string& path, uid_t uid, gid_t gid) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return errno;
  if (S_ISDIR(st.st_mode)) return EISDIR;
  if (!S_ISREG(st.st_mode)) return EACCES;
  mode_t bit;
  if (uid == 0) {
    bit = S_IXUSR | S_IXGRP | S_IXOTH;
  } else if (st.st_uid == uid) {
    bit = S_IXUSR;
  } else if (st.st_gid == gid) {
    bit = S_IXGRP;
  } else {
    bit = S_IXOTH;
  }
  return (st.st_mode & bit) != 0 ? 0 : EACCES;
}

void WriteLog(Fd& fd, std::string_view a, std::string_view b = {}) {
  if (!fd.valid()) return;
  // Regular files on a local disk: a short write means the disk is full, and
  // losing log bytes is then better than stalling every job on the loop.
  struct iovec iov[3] = {{const_cast<char*>(a.data()), a.size()},
                         {const_cast<char*>(b.data()), b.size()},
                         {const_cast<char*>("\n"), 1}};
  (void)!writev(fd.get(), iov, 3);
}

}  // namespace

JobManager::JobManager(Clock& clock, ProcessLauncher& launcher, const JobStore& store,
                       PortAllocator& ports, StackSampler* sampler, ManagerConfig config)
    : clock_(clock),
      launcher_(launcher),
      store_(store),
      ports_(ports),
      sampler_(sampler),
      config_(std::move(config)),
      slot_busy_(static_cast<size_t>(std::max(config_.slots, 0)), false) {}

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
}

absl::StatusOr<std::string> JobManager::ResolveProgram(const JobSpec& spec) const {
  const std::string& program = spec.argv.front();
  std::vector<std::string> candidates;
  if (program.find('/') != std::string::npos) {
    candidates.push_back(program.front() == '/' ? program : spec.cwd + "/" + program);
  } else {
    std::string path = EnvValue(spec.env, "PATH");
    if (path.empty()) path = "/usr/local/bin:/usr/bin:/bin";
    for (std::string_view dir : Split(path, ':')) {
      if (dir.empty()) dir = ".";
      std::string full = Cat(dir, "/", program);
      if (full.front() != '/') full = spec.cwd + "/" + full;
      candidates.push_back(std::move(full));
    }
  }
  int first_error = ENOENT;
  for (const std::string& path : candidates) {
    const int err = CheckExecutable(path, spec.uid, spec.gid);
    if (err == 0) return path;
    if (err != ENOENT && first_error == ENOENT) first_error = err;
  }
  return absl::Status(absl::StatusCode::kNotFound,
                      Cat("cannot execute ", program, ": ", std::strerror(first_error)));
}

absl::StatusOr<std::string> JobManager::Submit(JobSpec spec, std::string user) {
  if (shutting_down_)
    return absl::UnavailableError("ltd is shutting down; submit again once it is back");
  if (spec.devices < 1) {
    return absl::InvalidArgumentError("--devices must be at least 1");
  }
  if (spec.devices > config_.slots) {
    return absl::InvalidArgumentError(Cat("--devices ", spec.devices, " is more than the ",
                                          config_.slots, " this ltd has; ask for at most ",
                                          config_.slots));
  }
  if (spec.argv.empty() || spec.argv.front().empty()) {
    return absl::InvalidArgumentError(
        "no program given; usage: ltctl submit --devices N -- PROGRAM [ARGS...]");
  }
  if (!spec.name.empty()) {
    if (std::all_of(spec.name.begin(), spec.name.end(), ::isdigit)) {
      return absl::InvalidArgumentError("--name must not be all digits (those are job ids)");
    }
    for (char c : spec.name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
        return absl::InvalidArgumentError(
            Cat("--name '", spec.name, "' may only use letters, digits, '-', '_' and '.'"));
      }
    }
  }
  if (spec.cwd.empty() || spec.cwd.front() != '/') {
    return absl::InvalidArgumentError("the working directory must be an absolute path");
  }
  if (spec.max_restarts < 0) return absl::InvalidArgumentError("--max-restarts must be >= 0");

  auto job = std::make_unique<Job>();
  job->id = std::to_string(next_id_);
  job->user = std::move(user);
  job->submitted_at = clock_.Now();
  job->containment = std::string(launcher_.containment());
  auto program = ResolveProgram(spec);
  job->spec = std::move(spec);
  if (auto s = store_.CreateJobDir(job->id); !s.ok()) {
    return absl::UnavailableError(Cat("cannot record the job: ", s.message()));
  }
  ++next_id_;
  const std::string id = job->id;
  Job& ref = *job;
  jobs_.emplace(id, std::move(job));
  spdlog::info("job={} submitted by {}: {} rank(s) of {}", id, ref.user, ref.spec.devices,
               ref.spec.argv.front());
  if (!program.ok()) {
    RootCause cause;
    cause.reason = CauseReason::kSpawnFailed;
    cause.rank = 0;
    cause.at = clock_.Now();
    cause.exit_code =
        std::string(program.status().message()).ends_with(std::strerror(ENOENT)) ? 127 : 126;
    cause.message = std::string(program.status().message());
    Finish(ref, std::move(cause));
    return id;
  }
  ref.spec.argv.front() = *program;
  pending_.push_back(id);
  Schedule();
  if (ref.state == JobState::kPending) Persist(ref);  // a started job was saved by Start()
  return id;
}

Job* JobManager::FindMutable(const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

absl::StatusOr<const Job*> JobManager::Resolve(std::string_view ref) const {
  if (ref.empty()) return absl::InvalidArgumentError("no job given");
  if (auto it = jobs_.find(ref); it != jobs_.end()) return it->second.get();
  std::vector<const Job*> named;
  std::vector<const Job*> live;
  for (const auto& [id, job] : jobs_) {
    if (job->spec.name != ref) continue;
    named.push_back(job.get());
    if (!IsFinal(job->state)) live.push_back(job.get());
  }
  if (named.size() == 1) return named.front();
  if (live.size() == 1) return live.front();
  if (named.empty()) {
    return absl::NotFoundError(Cat("no job '", ref, "'; `ltctl ps -a` lists them"));
  }
  std::vector<std::string> ids;
  for (const Job* j : named) ids.push_back(j->id);
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
  // Strict FIFO: a large job at the head is not starved by small ones.
  while (!pending_.empty() && !shutting_down_) {
    Job* job = FindMutable(pending_.front());
    if (job == nullptr || job->state != JobState::kPending) {
      pending_.pop_front();
      continue;
    }
    const auto free = static_cast<int>(std::count(slot_busy_.begin(), slot_busy_.end(), false));
    if (free < job->spec.devices) return;
    pending_.pop_front();
    job->device_slots.clear();
    for (size_t i = 0;
         i < slot_busy_.size() && static_cast<int>(job->device_slots.size()) < job->spec.devices;
         ++i) {
      if (slot_busy_[i]) continue;
      slot_busy_[i] = true;
      job->device_slots.push_back(static_cast<int>(i));
    }
    if (!config_.gpu_ids.empty()) {
      std::vector<std::string> ids;
      for (int slot : job->device_slots) ids.push_back(config_.gpu_ids[static_cast<size_t>(slot)]);
      job->cuda_visible_devices = Join(ids, ",");
    }
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
    spdlog::error("job={} cannot start: {}", job.id, cause.message);
    Finish(job, std::move(cause));
  };

  auto port = ports_.Pick(ports_in_use_);
  if (!port.ok()) return fail_start(std::string(port.status().message()));
  job.master_port = *port;
  ports_in_use_.insert(*port);
  if (auto s = launcher_.BeginJob(job.id); !s.ok()) return fail_start(std::string(s.message()));

  const std::string dir = store_.JobDir(job.id);
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
  rt->output_log.reset(open((dir + "/output.log").c_str(), flags, 0644));
  for (int r = 0; r < job.spec.devices; ++r) {
    rt->ranks[static_cast<size_t>(r)].log.reset(
        open(Cat(dir, "/rank-", r, ".log").c_str(), flags, 0644));
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

std::vector<std::string> JobManager::RankEnv(const Job& job, const JobRuntime& rt, int rank) const {
  const std::string n = std::to_string(rt.ranks.size());
  const std::string r = std::to_string(rank);
  std::vector<std::pair<std::string, std::string>> vars = {
      {"RANK", r},
      {"LOCAL_RANK", r},
      {"WORLD_SIZE", n},
      {"LOCAL_WORLD_SIZE", n},
      {"GROUP_RANK", "0"},
      {"NODE_RANK", "0"},
      {"ROLE_RANK", r},
      {"ROLE_WORLD_SIZE", n},
      {"GROUP_WORLD_SIZE", "1"},
      {"ROLE_NAME", "default"},
      {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", std::to_string(job.master_port)},
      {"TORCHELASTIC_RUN_ID", job.id},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(job.restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(job.spec.max_restarts)},
      {"TORCHELASTIC_ERROR_FILE", Cat(store_.JobDir(job.id), "/error-", r, ".json")},
      {"PYTHONFAULTHANDLER", "1"},
      {"LT_JOB_ID", job.id},
      {"LT_HEARTBEAT_FD", "3"},
  };
  if (job.spec.heartbeat_timeout.count() > 0) {
    vars.emplace_back("LT_HEARTBEAT_TIMEOUT", FormatDuration(job.spec.heartbeat_timeout));
  }
  if (!job.cuda_visible_devices.empty())
    vars.emplace_back("CUDA_VISIBLE_DEVICES", job.cuda_visible_devices);
  std::vector<std::string> env;
  env.reserve(job.spec.env.size() + vars.size() + 1);
  auto overridden = [&](const std::string& kv) {
    for (const auto& [k, v] : vars) {
      if (kv.size() > k.size() && kv.compare(0, k.size(), k) == 0 && kv[k.size()] == '=')
        return true;
    }
    return false;
  };
  for (const std::string& kv : job.spec.env) {
    if (!overridden(kv)) env.push_back(kv);
  }
  if (!HasEnv(job.spec.env, "OMP_NUM_THREADS")) env.push_back("OMP_NUM_THREADS=1");
  for (const auto& [k, v] : vars) env.push_back(Cat(k, "=", v));
  env.insert(env.end(), config_.extra_rank_env.begin(), config_.extra_rank_env.end());
  return env;
}

void JobManager::SpawnRanks(Job& job, JobRuntime& rt) {
  const std::string id = job.id;
  const Millis now = clock_.Monotonic();
  for (int r = 0; r < job.spec.devices; ++r) {
    SpawnRequest req;
    req.job_id = id;
    req.rank = r;
    req.argv = job.spec.argv;
    req.env = RankEnv(job, rt, r);
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
      spdlog::error("job={} rank={} spawn failed: {}", id, r, cause.message);
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

void JobManager::OnOutput(Job& job, int rank, Stream stream, std::string_view data) {
  auto it = runtimes_.find(job.id);
  if (it == runtimes_.end()) return;
  JobRuntime& rt = *it->second;
  RankRuntime& rr = rt.ranks[static_cast<size_t>(rank)];
  LineSplitter& lines = stream == Stream::kStdout ? rr.stdout_lines : rr.stderr_lines;
  const std::string prefix = Cat("[", rank, "] ");
  auto emit = [&](std::string_view line, bool) {
    if (rr.capturing_stack && stream == Stream::kStderr) CaptureStack(rt, rank, line);
    WriteLog(rr.log, line);
    WriteLog(rt.output_log, prefix, line);
    for (auto& [oid, obs] : rt.observers) obs->OnOutput(rank, stream, line);
  };
  if (data.empty()) {
    lines.Finish(emit);  // end of stream: the last unterminated line
  } else {
    lines.Feed(data, emit);
  }
}

void JobManager::OnControl(Job& job, int rank, std::string_view data) {
  auto it = runtimes_.find(job.id);
  if (it == runtimes_.end()) return;
  JobRuntime& rt = *it->second;
  RankRuntime& rr = rt.ranks[static_cast<size_t>(rank)];
  rr.heartbeats.Feed(
      data, [&](const HeartbeatMessage& msg) { OnHeartbeat(job, rt, rank, msg); },
      [&](std::string_view bad) {
        if (rr.malformed_logged) return;
        rr.malformed_logged = true;  // once per rank: a noisy rank must not flood the journal
        spdlog::warn(
            "job={} rank={} sent a malformed heartbeat line ({} bytes), ignored; "
            "further ones are ignored silently",
            job.id, rank, bad.size());
      });
}

void JobManager::OnHeartbeat(Job& job, JobRuntime& rt, int rank, const HeartbeatMessage& msg) {
  RankRuntime& rr = rt.ranks[static_cast<size_t>(rank)];
  Rank& rec = job.ranks[static_cast<size_t>(rank)];
  const Millis now = clock_.Monotonic();
  switch (msg.kind) {
    case HeartbeatMessage::Kind::kBeat: {
      // The first beat swaps a startup deadline for a heartbeat one, which
      // may be earlier; later beats only move the deadline later, so an
      // armed timer stays valid and a beat costs no timer work.
      const bool first = !rr.last_beat;
      rr.last_beat = now;
      rec.last_heartbeat_at = clock_.Now();
      if (msg.step) {
        rec.last_step = *msg.step;
        if (rr.rate_anchor_step < 0) {
          rr.rate_anchor_step = *msg.step;
          rr.rate_anchor_time = now;
        } else if (now - rr.rate_anchor_time >= RankRuntime::kRateWindow) {
          const double secs = static_cast<double>((now - rr.rate_anchor_time).count()) / 1000.0;
          rec.steps_per_second = static_cast<double>(*msg.step - rr.rate_anchor_step) / secs;
          rr.rate_anchor_step = *msg.step;
          rr.rate_anchor_time = now;
        }
      }
      if (first) ArmWatchdog(job, rt);
      return;
    }
    case HeartbeatMessage::Kind::kTimeout:
      rr.timeout = msg.timeout;
      rr.last_beat = now;
      rec.last_heartbeat_at = clock_.Now();
      ArmWatchdog(job, rt);
      return;
    case HeartbeatMessage::Kind::kError:
      rec.error_message = msg.text;
      return;
    case HeartbeatMessage::Kind::kExecFailed:
      rr.exec_error = msg.text;
      return;
  }
}

void JobManager::OnExit(Job& job, int rank, ExitStatus status) {
  auto it = runtimes_.find(job.id);
  if (it == runtimes_.end()) return;
  JobRuntime& rt = *it->second;
  RankRuntime& rr = rt.ranks[static_cast<size_t>(rank)];
  Rank& rec = job.ranks[static_cast<size_t>(rank)];
  if (!rr.alive) return;
  rr.alive = false;
  --rt.live;
  if (status.term_signal != 0) {
    rec.signal = status.term_signal;
  } else {
    rec.exit_code = status.exit_code;
  }
  const bool failed = status.term_signal != 0 || status.exit_code != 0;
  spdlog::log(failed ? spdlog::level::warn : spdlog::level::info, "job={} rank={} pid={} {} {}",
              job.id, rank, rec.pid, status.term_signal ? "died of signal" : "exited with",
              status.term_signal ? status.term_signal : status.exit_code);
  if (!failed) {
    SetRankState(job, rec, RankState::kExited);
  } else if (rt.tearing_down || rt.cause) {
    SetRankState(job, rec,
                 rt.cause && rt.cause->rank == rank ? RankState::kFailed : RankState::kKilled);
  } else {
    SetRankState(job, rec, RankState::kFailed);
    RootCause cause;
    cause.rank = rank;
    cause.at = clock_.Now();
    if (!rr.exec_error.empty()) {
      cause.reason = CauseReason::kSpawnFailed;
      cause.exit_code = status.exit_code;
      cause.message = rr.exec_error;
    } else if (status.term_signal != 0) {
      cause.reason = CauseReason::kSignaled;
      cause.signal = status.term_signal;
      cause.message =
          Cat("rank ", rank, " died of signal ", status.term_signal, " (",
              sigabbrev_np(status.term_signal) ? sigabbrev_np(status.term_signal) : "?", ")");
    } else {
      cause.reason = CauseReason::kExited;
      cause.exit_code = status.exit_code;
      cause.message = Cat("rank ", rank, " exited with code ", status.exit_code);
    }
    if (!rec.error_message.empty()) cause.message = rec.error_message;
    Fail(job, rt, std::move(cause));
  }
  if (rr.capturing_stack) {
    // Its output is drained, so its traceback is complete; the end of the
    // investigation takes the job from here.
    return StackCaptured(job.id, rt, rank);
  }
  if (rt.live == 0 && !rt.investigating) OnRanksGone(job, rt);
}

void JobManager::Fail(Job& job, JobRuntime& rt, RootCause cause) {
  if (!rt.cause) {
    spdlog::warn("job={} root cause: rank={} reason={} {}", job.id, cause.rank,
                 ToString(cause.reason), cause.message);
    rt.cause = std::move(cause);
    job.root_cause = rt.cause;  // visible while the teardown runs
    Persist(job);
  }
  Teardown(job, rt);
}

void JobManager::Teardown(Job& job, JobRuntime& rt) {
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
    if (rt.ranks[r].alive) launcher_.SignalRank(job.ranks[r].pid, SIGTERM);
  }
  rt.grace_timer = clock_.StartTimer(job.spec.grace, [this, id = job.id] { OnGraceExpired(id); });
}

void JobManager::OnGraceExpired(const std::string& id) {
  auto it = runtimes_.find(id);
  if (it == runtimes_.end()) return;
  it->second->grace_timer = 0;
  spdlog::warn("job={} grace period over: SIGKILL to whatever is left", id);
  launcher_.KillJob(id);
}

void JobManager::OnRanksGone(Job& job, JobRuntime& rt) {
  if (rt.grace_timer != 0) clock_.CancelTimer(rt.grace_timer);
  rt.grace_timer = 0;
  if (rt.watchdog_timer != 0) clock_.CancelTimer(rt.watchdog_timer);
  rt.watchdog_timer = 0;
  rt.watchdog_at.reset();
  // Every rank is reaped; whatever they left behind goes now.
  launcher_.KillJob(job.id);
  launcher_.EndJob(job.id, [this, id = job.id] { OnJobEmpty(id); });
}

void JobManager::OnJobEmpty(const std::string& id) {
  Job* job = FindMutable(id);
  auto it = runtimes_.find(id);
  if (job == nullptr || it == runtimes_.end()) return;
  JobRuntime& rt = *it->second;
  std::optional<RootCause> cause = rt.cause;
  // Read a TORCHELASTIC_ERROR_FILE the root-cause rank left, if any.
  if (cause && cause->rank >= 0) {
    const std::string path = Cat(store_.JobDir(id), "/error-", cause->rank, ".json");
    if (FILE* f = fopen(path.c_str(), "re")) {
      std::string text(64 * 1024, '\0');
      text.resize(fread(text.data(), 1, text.size(), f));
      fclose(f);
      auto j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_object() && j.contains("message")) {
        const auto& m = j["message"];
        if (m.is_string()) {
          cause->message = m.get<std::string>();
        } else if (m.is_object() && m.contains("message") && m["message"].is_string()) {
          cause->message = m["message"].get<std::string>();
        }
      }
    }
  }
  Attempt& attempt = job->attempts.back();
  attempt.ended_at = clock_.Now();
  attempt.root_cause = cause;
  const bool restartable = cause && cause->reason != CauseReason::kCancelled &&
                           job->restart_count < job->spec.max_restarts && !shutting_down_;
  if (restartable) {
    ++job->restart_count;
    spdlog::info("job={} restarting ({} of {})", id, job->restart_count, job->spec.max_restarts);
    for (auto& [oid, obs] : rt.observers) {
      (void)oid;
      obs->OnOutput(-1, Stream::kStderr,
                    Cat("ltd: restarting job ", id, " (", job->restart_count, " of ",
                        job->spec.max_restarts, ") after: ", cause->message));
    }
    ports_in_use_.erase(job->master_port);
    Start(*job);  // a fresh runtime, keeping the observers, and a fresh port
    return;
  }
  Finish(*job, std::move(cause));
}

void JobManager::Finish(Job& job, std::optional<RootCause> cause) {
  const WallTime now = clock_.Now();
  if (cause) {
    job.root_cause = cause;
    job.exit_code = ExitCodeFor(*cause);
    SetState(job,
             cause->reason == CauseReason::kCancelled ? JobState::kCancelled : JobState::kFailed);
  } else {
    job.exit_code = 0;
    SetState(job, JobState::kSucceeded);
  }
  job.ended_at = now;
  if (!job.started_at) job.started_at = now;
  for (int slot : job.device_slots) slot_busy_[static_cast<size_t>(slot)] = false;
  if (job.master_port != 0) ports_in_use_.erase(job.master_port);
  std::map<ObserverId, std::shared_ptr<JobObserver>> observers;
  if (auto it = runtimes_.find(job.id); it != runtimes_.end()) {
    observers = std::move(it->second->observers);
    runtimes_.erase(it);
  }
  Persist(job);
  for (auto& [id, obs] : observers) obs->OnEnded(job);
  Schedule();
  MaybeFinishShutdown();
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
  if (signal != 0) {
    for (size_t r = 0; r < rt.ranks.size(); ++r) {
      if (rt.ranks[r].alive) launcher_.SignalRank(job->ranks[r].pid, signal);
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

std::string JobManager::LogPath(const std::string& id, int rank) const {
  return rank < 0 ? store_.JobDir(id) + "/output.log"
                  : Cat(store_.JobDir(id), "/rank-", rank, ".log");
}

uint64_t JobManager::LogSize(const std::string& id, int rank) const {
  struct stat st {};
  if (stat(LogPath(id, rank).c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_size);
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

void JobManager::Persist(const Job& job) {
  if (auto s = store_.Save(job); !s.ok()) {
    spdlog::error("job={} record not saved: {}", job.id, std::string(s.message()));
  }
}

}  // namespace ltd
