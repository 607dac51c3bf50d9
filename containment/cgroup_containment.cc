#include "cgroup_containment.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "cgroup_fs.h"
#include "gpu_devices.h"
#include "process_group_containment.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

// How often an emptying job is looked at again should no cgroup.events
// notification come, and its leftovers killed once more, loudly: a safety
// net for a lost inotify event or a process stuck in the kernel.
constexpr uint64_t kRecheckMs = 1000;

absl::Status MakeDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return PosixError("mkdir", dir, errno);
  return absl::OkStatus();
}

// Forks a child that joins `dir` and exits: the one proof that counts,
// since joining needs write access up to the common ancestor of ltd's
// cgroup and the target, which no permission bit on `dir` alone shows.
// Runs before ltd starts any thread, so fork is safe here.
absl::Status ProbeJoin(const std::string& dir) {
  const std::string procs = dir + "/cgroup.procs";
  const pid_t child = fork();
  if (child < 0) return PosixError("fork", "cgroup probe", errno);
  if (child == 0) {
    const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) _exit(errno & 0xff);
    if (write(fd, "0\n", 2) != 2) _exit(errno & 0xff);
    _exit(0);
  }
  int status = 0;
  pid_t rc;
  do {
    rc = waitpid(child, &status, 0);
  } while (rc < 0 && errno == EINTR);
  if (rc != child) return PosixError("waitpid", "cgroup probe", errno);
  if (!WIFEXITED(status)) return absl::InternalError("cgroup probe child died of a signal");
  if (WEXITSTATUS(status) != 0) return PosixError("write", procs, WEXITSTATUS(status));
  return absl::OkStatus();
}

}  // namespace

// Bounded wait for a cgroup to empty after a kill. Only start-up and
// shutdown use it; jobs are watched through cgroup.events on the loop.
bool WaitEmpty(const std::string& dir, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto populated = CgroupPopulated(dir);
    // A v1 cgroup has no cgroup.events: its processes are counted.
    if (!populated.ok() && absl::IsNotFound(populated.status()) && access(dir.c_str(), F_OK) == 0) {
      populated = CountCgroupProcs(dir) > 0;
    }
    if (!populated.ok() || !*populated) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// A job in EndJob. Destroying it closes its handles, after which libuv
// calls nothing of it.
struct CgroupContainment::Waiter {
  CgroupContainment* owner = nullptr;
  std::string job_id;
  std::string dir;
  std::function<void()> on_empty;
  UvPtr<uv_fs_event_t> events;
  UvPtr<uv_timer_t> timer;
  int timer_checks = 0;
};

absl::StatusOr<std::unique_ptr<CgroupContainment>> CgroupContainment::Create(
    uv_loop_t* loop, const std::string& base, const std::string& run, bool proven,
    LimitPlaces places) {
  const std::string run_dir = base + "/" + run;
  // The base is there but for the first run under it (a spare supervisor
  // makes a run a job); made where it is not, twice: another process's
  // sweep (SweepStaleLtruns) may remove it as empty between two mkdirs.
  absl::Status made = MakeDir(run_dir);
  for (int round = 0; round < 2 && absl::IsNotFound(made); ++round) {
    if (absl::Status s = MakeDir(base); !s.ok()) return s;
    made = MakeDir(run_dir);
  }
  if (absl::Status s = made; !s.ok()) {
    rmdir(base.c_str());  // only if empty: a predecessor's leftovers stay for the sweep
    return s;
  }
  if (!proven) {
    const std::string probe = run_dir + "/probe";
    absl::Status s = MakeDir(probe);
    if (s.ok()) s = ProbeJoin(probe);
    rmdir(probe.c_str());
    if (!s.ok()) {
      rmdir(run_dir.c_str());
      rmdir(base.c_str());
      return s;
    }
  }
  // Not required (cgroup.kill reaches orphans wherever they are
  // reparented), but it keeps orphans' zombies ltd's to reap rather than
  // init's, which may not be a reaping init in a container.
  if (absl::Status sub = BecomeChildSubreaper(); !sub.ok()) {
    spdlog::warn("{}; orphans of jobs will be reaped by init", std::string(sub.message()));
  }
  return std::unique_ptr<CgroupContainment>(
      new CgroupContainment(loop, base, run_dir, std::move(places)));
}

CgroupContainment::CgroupContainment(uv_loop_t* loop, std::string base_dir, std::string run_dir,
                                     LimitPlaces places)
    : loop_(loop),
      base_dir_(std::move(base_dir)),
      run_dir_(std::move(run_dir)),
      reaper_(loop),
      places_(std::move(places)) {
  run_watch_ = UvInit<uv_fs_event_t>([&](uv_fs_event_t* h) { return uv_fs_event_init(loop_, h); });
  if (!run_watch_) return;
  const std::string events = run_dir_ + "/cgroup.events";
  if (int rc = uv_fs_event_start(
          run_watch_.get(), [](uv_fs_event_t*, const char*, int, int) {}, events.c_str(), 0);
      rc != 0) {
    spdlog::warn("uv_fs_event_start({}): {}", events, uv_strerror(rc));
  }
}

CgroupContainment::~CgroupContainment() {
  waiters_.clear();
  run_watch_.reset();
  // ltd stops only after every job ended, so the run cgroup is empty; if
  // not, that is a bug, and still nothing may survive it.
  if (auto populated = CgroupPopulated(run_dir_); populated.ok() && *populated) {
    spdlog::error("{} still holds {} process(es) at exit; killing them", run_dir_,
                  CountCgroupProcs(run_dir_));
    if (absl::Status s = KillCgroup(run_dir_); !s.ok())
      spdlog::error("{}", std::string(s.message()));
    if (!WaitEmpty(run_dir_, std::chrono::seconds(2))) {
      spdlog::error("{} did not empty within 2s of cgroup.kill", run_dir_);
    }
  }
  if (absl::Status s = RemoveCgroupTree(run_dir_); !s.ok())
    spdlog::error("{}", std::string(s.message()));
  // Another ltd process on the same state dir may still use the base.
  if (rmdir(base_dir_.c_str()) != 0 && errno != ENOTEMPTY && errno != EBUSY && errno != ENOENT) {
    spdlog::warn("rmdir({}): {}", base_dir_, std::strerror(errno));
  }
  // The v1 hierarchies' run cgroups, made by the first job with a limit.
  for (const ControllerPlace* place : {&places_.memory, &places_.cpu, &places_.devices}) {
    if (place->layout != CgroupLayout::kV1) continue;
    const std::string run = RunDirIn(*place);
    if (access(run.c_str(), F_OK) != 0) continue;
    if (absl::Status s = RemoveCgroupTree(run); !s.ok()) {
      spdlog::error("{}", std::string(s.message()));
    }
    const std::string base = run.substr(0, run.rfind('/'));
    rmdir(base.c_str());  // only if empty: see above
  }
}

std::string CgroupContainment::RunDirIn(const ControllerPlace& place) const {
  if (place.layout != CgroupLayout::kV1) return run_dir_;
  const auto name = [](const std::string& dir) { return dir.substr(dir.rfind('/') + 1); };
  return Cat(place.own_dir, "/", name(base_dir_), "/", name(run_dir_));
}

absl::Status CgroupContainment::SetUpLimits(const std::string& job_id, const JobLimits& limits) {
  RemoveLimited(job_id);
  if (!limits.any() && !limits.isolate_gpus) return absl::OkStatus();
  Limited& l = limited_[job_id];
  l.limits = limits;
  // The job's cgroup in `place`'s hierarchy, the controller enabled down
  // to it (v2; to its children too when `per_rank`), or made (v1).
  auto job_cgroup = [&](const ControllerPlace& place, std::string_view controller,
                        bool per_rank) -> absl::StatusOr<std::string> {
    if (place.layout == CgroupLayout::kNone) return place.why;
    if (place.layout == CgroupLayout::kV2) {
      const std::string& bottom = per_rank ? JobDir(job_id) : run_dir_;
      if (absl::Status s = EnableV2Controller(place.own_dir, bottom, controller); !s.ok()) {
        return s;
      }
      return JobDir(job_id);
    }
    const std::string run = RunDirIn(place);
    // Twice: another process's sweep (SweepStaleLtruns) may remove the
    // base while it is empty, between two of the mkdirs.
    absl::Status made = absl::OkStatus();
    for (int round = 0; round < 2; ++round) {
      for (const std::string& dir :
           {run.substr(0, run.rfind('/')), run, Cat(run, "/job-", job_id)}) {
        made = MakeCgroupDir(dir);
        if (!made.ok()) break;
      }
      if (!absl::IsNotFound(made)) break;
    }
    if (!made.ok()) return made;
    return Cat(run, "/job-", job_id);
  };
  absl::Status s = absl::OkStatus();
  if (limits.memory()) {
    auto dir = job_cgroup(places_.memory, "memory", limits.memory_per_rank_bytes != 0);
    if (dir.ok()) {
      l.memory_dir = *dir;
      if (limits.memory_bytes != 0)
        s = SetMemoryLimit(places_.memory.layout, l.memory_dir, limits.memory_bytes);
    } else {
      s = dir.status();
    }
    if (!s.ok()) s = absl::FailedPreconditionError(Cat("--mem cannot be set: ", s.message()));
  }
  if (s.ok() && limits.cpu_millis != 0) {
    auto dir = job_cgroup(places_.cpu, "cpu", false);
    if (dir.ok()) {
      l.cpu_dir = *dir;
      s = SetCpuLimit(places_.cpu.layout, l.cpu_dir, limits.cpu_millis);
    } else {
      s = dir.status();
    }
    if (!s.ok()) s = absl::FailedPreconditionError(Cat("--cpus cannot be set: ", s.message()));
  }
  if (s.ok() && limits.isolate_gpus) {
    // No controller to enable on v2: the program attaches to any cgroup.
    auto dir = places_.devices.layout == CgroupLayout::kV2
                   ? absl::StatusOr<std::string>(JobDir(job_id))
                   : job_cgroup(places_.devices, "devices", false);
    if (dir.ok()) {
      l.devices_dir = *dir;
      s = places_.devices.layout == CgroupLayout::kV2
              ? AttachGpuDeviceProgram(l.devices_dir, limits.gpu_minors)
              : DenyOtherGpusV1(l.devices_dir, limits.gpu_minors);
    } else {
      s = dir.status();
    }
    if (!s.ok()) {
      s = absl::FailedPreconditionError(
          Cat("the job's GPUs cannot be isolated from other jobs: ", s.message()));
    }
  }
  if (!s.ok()) RemoveLimited(job_id);
  return s;
}

void CgroupContainment::RemoveLimited(const std::string& job_id) {
  auto it = limited_.find(job_id);
  if (it == limited_.end()) return;
  const Limited l = std::move(it->second);
  limited_.erase(it);
  const std::string v2 = JobDir(job_id);
  for (const std::string& dir : {l.memory_dir, l.cpu_dir, l.devices_dir}) {
    if (dir.empty() || dir == v2) continue;
    if (absl::Status s = RemoveCgroupTree(dir); !s.ok()) {
      spdlog::error("job={} cleanup: {}", job_id, std::string(s.message()));
    }
  }
}

std::optional<uint64_t> CgroupContainment::OomKills(const std::string& job_id, int rank) {
  auto it = limited_.find(job_id);
  if (it == limited_.end() || !it->second.limits.memory()) return std::nullopt;
  const Limited& l = it->second;
  const std::string dir =
      l.limits.memory_per_rank_bytes != 0 ? Cat(l.memory_dir, "/rank-", rank) : l.memory_dir;
  return ReadOomKills(places_.memory.layout, dir);
}

std::string CgroupContainment::JobDir(const std::string& job_id) const {
  return Cat(run_dir_, "/job-", job_id);
}

absl::Status CgroupContainment::BeginJob(const std::string& job_id, const JobLimits& limits) {
  cpu_used_.erase(job_id);  // the attempt before's, not taken
  const std::string dir = JobDir(job_id);
  if (mkdir(dir.c_str(), 0755) != 0) {
    if (errno != EEXIST) return PosixError("mkdir", dir, errno);
    // Left by an attempt whose cgroup could not be removed: start clean.
    spdlog::warn("job={} cgroup {} already exists; killing what is in it", job_id, dir);
    if (absl::Status s = KillCgroup(dir); !s.ok()) return s;
  }
  return SetUpLimits(job_id, limits);
}

std::vector<std::string> CgroupContainment::RankCgroups(const std::string& job_id, int rank) {
  const std::string dir = Cat(JobDir(job_id), "/rank-", rank);
  // On failure lt-exec cannot join it and the rank fails with that error,
  // so no rank ever runs outside its cgroup.
  if (absl::Status s = MakeDir(dir); !s.ok()) {
    spdlog::error("job={} rank={}: {}", job_id, rank, std::string(s.message()));
  }
  rank_cgroups_[job_id].insert(rank);
  std::vector<std::string> dirs = {dir};
  auto it = limited_.find(job_id);
  if (it == limited_.end()) return dirs;
  const Limited& l = it->second;
  if (l.limits.memory()) {
    const CgroupLayout layout = places_.memory.layout;
    std::string memory = l.memory_dir;
    if (l.limits.memory_per_rank_bytes != 0) {
      memory = Cat(l.memory_dir, "/rank-", rank);
      absl::Status s = MakeCgroupDir(memory);
      if (s.ok()) s = SetMemoryLimit(layout, memory, l.limits.memory_per_rank_bytes);
      if (!s.ok()) {
        // The rank must not run without its limit: lt-exec fails to join.
        spdlog::error("job={} rank={} --mem-per-rank: {}", job_id, rank, std::string(s.message()));
        if (memory != dir) rmdir(memory.c_str());
        dirs.push_back(memory + "/limit-not-set");
        return dirs;
      }
    }
    // v2: the rank's own cgroup is below the job's, whose limit holds it.
    if (layout == CgroupLayout::kV1) dirs.push_back(memory);
  }
  if (!l.cpu_dir.empty() && places_.cpu.layout == CgroupLayout::kV1 &&
      std::find(dirs.begin(), dirs.end(), l.cpu_dir) == dirs.end()) {
    dirs.push_back(l.cpu_dir);
  }
  if (!l.devices_dir.empty() && places_.devices.layout == CgroupLayout::kV1 &&
      std::find(dirs.begin(), dirs.end(), l.devices_dir) == dirs.end()) {
    dirs.push_back(l.devices_dir);
  }
  return dirs;
}

void CgroupContainment::KillJob(const std::string& job_id, const std::vector<pid_t>& rank_pids) {
  // A rank still inside lt-exec, before it joined its cgroup, is only
  // reachable through its process group.
  KillProcessGroups(rank_pids);
  const std::string dir = JobDir(job_id);
  if (absl::Status s = KillCgroup(dir); !s.ok() && !absl::IsNotFound(s)) {
    spdlog::error("job={} kill: {}", job_id, std::string(s.message()));
  }
}

void CgroupContainment::EndJob(const std::string& job_id, std::function<void()> on_empty) {
  if (waiters_.erase(job_id) > 0) {
    spdlog::warn("job={} EndJob while already ending; the first caller is dropped", job_id);
  }
  auto waiter = std::make_unique<Waiter>();
  Waiter* w = waiter.get();
  w->owner = this;
  w->job_id = job_id;
  w->dir = JobDir(job_id);
  w->on_empty = std::move(on_empty);
  w->events = UvInit<uv_fs_event_t>([&](uv_fs_event_t* h) { return uv_fs_event_init(loop_, h); });
  w->timer = UvInit<uv_timer_t>([&](uv_timer_t* h) { return uv_timer_init(loop_, h); });
  if (!w->events || !w->timer) {
    // Cannot happen on Linux (neither init allocates nor fails); still the
    // job must end: it is looked at once, now.
    spdlog::error("job={} cannot watch {}; looking once", job_id, w->dir);
    auto done = std::move(w->on_empty);
    (void)RemoveCgroupTree(w->dir);
    done();
    return;
  }
  w->events->data = w;
  w->timer->data = w;
  waiters_[job_id] = std::move(waiter);
  // Watch before the first look, so the last exit cannot fall between.
  const std::string events = w->dir + "/cgroup.events";
  if (int rc = uv_fs_event_start(
          w->events.get(),
          [](uv_fs_event_t* h, const char*, int, int status) {
            auto* w = static_cast<Waiter*>(h->data);
            if (status < 0)
              spdlog::warn("job={} cgroup.events: {}", w->job_id, uv_strerror(status));
            w->owner->Check(w, false);
          },
          events.c_str(), 0);
      rc != 0 && rc != UV_ENOENT) {
    spdlog::warn("job={} uv_fs_event_start({}): {}; checking every {}ms instead", job_id, events,
                 uv_strerror(rc), kRecheckMs);
  }
  // The first look comes on the next loop turn, so on_empty never runs
  // from within EndJob.
  uv_timer_start(
      w->timer.get(),
      [](uv_timer_t* t) {
        auto* w = static_cast<Waiter*>(t->data);
        w->owner->Check(w, true);
      },
      0, kRecheckMs);
}

void CgroupContainment::Check(Waiter* w, bool from_timer) {
  auto populated = CgroupPopulated(w->dir);
  if (!populated.ok() && !absl::IsNotFound(populated.status())) {
    spdlog::error("job={} {}", w->job_id, std::string(populated.status().message()));
  }
  if (absl::IsNotFound(populated.status()) || (populated.ok() && !*populated)) {
    Done(w);
    return;
  }
  if (!from_timer || w->timer_checks++ == 0) return;
  // Killed again every check (cheap, and a lost SIGKILL is possible), but
  // said at 1, 2, 4, 8 ... s: a process stuck in the kernel would
  // otherwise fill the log with a line a second until its job's
  // supervisor gives up on it (Forget).
  const int seconds = w->timer_checks - 1;
  if ((seconds & (seconds - 1)) == 0) {
    spdlog::warn("job={} {} still holds {} process(es) {}s after teardown; killing again",
                 w->job_id, w->dir, CountCgroupProcs(w->dir), seconds);
  }
  if (absl::Status s = KillCgroup(w->dir); !s.ok() && !absl::IsNotFound(s)) {
    spdlog::error("job={} kill: {}", w->job_id, std::string(s.message()));
  }
}

std::vector<Containment::Left> CgroupContainment::Remaining(const std::string& job_id, size_t max) {
  std::vector<Left> out;
  const std::string dir = JobDir(job_id);
  auto add = [&](const std::string& cg, int rank) {
    for (pid_t pid : CgroupProcs(cg)) {
      if (out.size() >= max) return;
      out.push_back({pid, rank});
    }
  };
  add(dir, -1);  // none normally: every rank joins a rank-R below
  for (const std::string& child : ChildCgroups(dir)) {
    int rank = -1;
    // "rank-R" as RankCgroups names it; lt-exec's user cannot make cgroups
    // here, so nothing else is found.
    if (child.starts_with("rank-")) {
      const std::string digits = child.substr(5);
      if (!digits.empty() && digits.size() < 9 &&
          digits.find_first_not_of("0123456789") == std::string::npos) {
        rank = std::stoi(digits);
      }
    }
    add(Cat(dir, "/", child), rank);
  }
  return out;
}

void CgroupContainment::Forget(const std::string& job_id) {
  // Its cgroups stay (the processes hold them); the daemon removes them
  // once they are gone (UnkillableHandler).
  if (waiters_.erase(job_id) > 0) {
    spdlog::info("job={} ends with processes left in {}; no longer waited for", job_id,
                 JobDir(job_id));
  }
  limited_.erase(job_id);
  cpu_used_.erase(job_id);
  rank_cgroups_.erase(job_id);
}

std::optional<std::chrono::microseconds> CgroupContainment::TakeCpuUsed(const std::string& job_id) {
  auto it = cpu_used_.find(job_id);
  if (it == cpu_used_.end()) return std::nullopt;
  const std::chrono::microseconds used = it->second;
  cpu_used_.erase(it);
  return used;
}

void CgroupContainment::Done(Waiter* w) {
  // Read before the cgroup goes: its count dies with it. Every process of
  // it is gone, so the figure is final.
  if (auto used = CgroupCpuUsage(w->dir)) {
    cpu_used_[w->job_id] = *used;
  } else {
    cpu_used_.erase(w->job_id);
  }
  // Its ranks' cgroups by name, then its own: a listing of what is left
  // only where one is (RemoveCgroupTree).
  if (auto ranks = rank_cgroups_.find(w->job_id); ranks != rank_cgroups_.end()) {
    for (int rank : ranks->second) rmdir(Cat(w->dir, "/rank-", rank).c_str());
    rank_cgroups_.erase(ranks);
  }
  if (absl::Status s = RemoveCgroupTree(w->dir); !s.ok()) {
    spdlog::error("job={} cleanup: {}", w->job_id, std::string(s.message()));
  }
  RemoveLimited(w->job_id);
  spdlog::debug("job={} cgroup {} empty and removed", w->job_id, w->dir);
  auto on_empty = std::move(w->on_empty);
  const std::string id = w->job_id;
  waiters_.erase(id);  // w is gone
  on_empty();          // may begin the job's next attempt, with a new waiter
}

int SweepCgroupLeftovers(const std::string& base, const std::set<std::string>& keep,
                         std::chrono::milliseconds timeout) {
  std::vector<std::string> dirs;
  for (const std::string& name : ChildCgroups(base)) {
    if (keep.contains(name) || !name.starts_with("run-")) continue;
    const std::string dir = base + "/" + name;
    const int procs = CountCgroupProcs(dir);
    if (procs > 0) {
      spdlog::warn("killing {} process(es) left in {} by an ltd that died", procs, dir);
    }
    if (absl::Status s = KillCgroup(dir); !s.ok() && !absl::IsNotFound(s)) {
      spdlog::error("sweep: {}", std::string(s.message()));
    }
    dirs.push_back(dir);
  }
  int removed = 0;
  for (const std::string& dir : dirs) {
    if (!WaitEmpty(dir, timeout)) {
      spdlog::error("sweep: {} did not empty within {}ms of cgroup.kill", dir, timeout.count());
      continue;
    }
    if (absl::Status s = RemoveCgroupTree(dir); !s.ok()) {
      spdlog::error("sweep: {}", std::string(s.message()));
      continue;
    }
    ++removed;
  }
  return removed;
}

}  // namespace ltd
