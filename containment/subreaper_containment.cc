#include "subreaper_containment.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "process_group_containment.h"
#include "spdlog/spdlog.h"
#include "str_util.h"
#include "uv_handle.h"

namespace ltd {
namespace {

// Nothing tells ltd when the last marked process is gone, so an ending
// job is looked at this often; a SIGKILLed process is gone within a few.
constexpr uint64_t kRecheckMs = 10;
// Stragglers are killed again, loudly, this often.
constexpr int kRekillEvery = 100;  // checks, i.e. about 1 s
// Scans per KillJob: each one catches what forked during the previous.
constexpr int kKillRounds = 20;

// Every process below the live ranks in the parent tree. Catches
// descendants that left the rank's process group but are still in its tree
// even if their environment was scrubbed. A rank pid counts only while it
// is still our child with the job's markers: a reaped rank's pid may have
// been reused by anyone.
std::vector<pid_t> Descendants(const std::vector<pid_t>& ranks, const EnvMatch& job) {
  const std::vector<ProcEntry> all = ListProcesses();
  const pid_t self = getpid();
  std::set<pid_t> tree;
  for (const ProcEntry& e : all) {
    if (e.ppid != self || e.state == 'Z') continue;
    if (std::find(ranks.begin(), ranks.end(), e.pid) == ranks.end()) continue;
    if (auto env = ProcEnviron::Read(e.pid); env && job(*env)) tree.insert(e.pid);
  }
  if (tree.empty()) return {};
  std::vector<pid_t> found;
  // Parents may be listed after their children: repeat until stable.
  for (bool grew = true; grew;) {
    grew = false;
    for (const ProcEntry& e : all) {
      if (tree.count(e.ppid) != 0 && tree.insert(e.pid).second) {
        found.push_back(e.pid);
        grew = true;
      }
    }
  }
  return found;
}

// Children of this process in a session other than its own, and their
// descendants: ranks (each leads a session) and what this subreaper
// adopted from them; never its own helpers (they stay in its session).
std::vector<pid_t> Adopted() {
  const std::vector<ProcEntry> all = ListProcesses();
  const pid_t self = getpid();
  const pid_t own_session = getsid(0);
  std::set<pid_t> tree;
  for (const ProcEntry& e : all) {
    if (e.ppid == self && e.state != 'Z' && e.session != own_session) tree.insert(e.pid);
  }
  std::vector<pid_t> found(tree.begin(), tree.end());
  for (bool grew = !tree.empty(); grew;) {
    grew = false;
    for (const ProcEntry& e : all) {
      if (e.state != 'Z' && tree.count(e.ppid) != 0 && tree.insert(e.pid).second) {
        found.push_back(e.pid);
        grew = true;
      }
    }
  }
  return found;
}

}  // namespace

// A job in EndJob. Destroying it closes its timer, after which libuv
// calls nothing of it.
struct SubreaperContainment::Waiter {
  SubreaperContainment* owner = nullptr;
  std::string job_id;
  std::function<void()> on_empty;
  UvPtr<uv_timer_t> timer;
  int checks = 0;
};

absl::StatusOr<std::unique_ptr<SubreaperContainment>> SubreaperContainment::Create(
    uv_loop_t* loop, std::string instance_marker) {
  if (absl::Status s = BecomeChildSubreaper(); !s.ok()) return s;
  return std::unique_ptr<SubreaperContainment>(
      new SubreaperContainment(loop, std::move(instance_marker)));
}

SubreaperContainment::SubreaperContainment(uv_loop_t* loop, std::string instance_marker)
    : loop_(loop), marker_(std::move(instance_marker)), reaper_(loop) {}

SubreaperContainment::~SubreaperContainment() {
  waiters_.clear();
  // ltd stops only after every job ended; anything marked still alive is a
  // bug, and still must not outlive ltd.
  const int left =
      KillProcesses([&](const ProcEnviron& env) { return env.Has(marker_); }, kKillRounds);
  if (left > 0) spdlog::error("{} process(es) of ltd's jobs were alive at exit; killed", left);
}

absl::Status SubreaperContainment::BeginJob(const std::string& job_id, const JobLimits& limits) {
  if (limits.any() || limits.isolate_gpus) {
    return absl::FailedPreconditionError(
        "--mem, --cpus and GPU isolation need ltd's cgroup containment");
  }
  begun_.insert(job_id);
  return absl::OkStatus();
}

std::vector<pid_t> SubreaperContainment::JobProcesses(const std::string& job_id) const {
  std::vector<pid_t> pids = FindProcesses(JobMatch(job_id));
  if (begun_.size() == 1 && begun_.count(job_id) != 0) {
    for (pid_t pid : Adopted()) {
      if (std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
    }
  }
  return pids;
}

EnvMatch SubreaperContainment::JobMatch(const std::string& job_id) const {
  return [job = Cat("LT_JOB_ID=", job_id), marker = marker_](const ProcEnviron& env) {
    return env.Has(job) && env.Has(marker);
  };
}

void SubreaperContainment::KillJob(const std::string& job_id, const std::vector<pid_t>& rank_pids) {
  // The ranks' trees first, while the parent links still hold them.
  for (pid_t pid : Descendants(rank_pids, JobMatch(job_id)))
    kill(pid, SIGKILL);  // ESRCH: gone already
  KillProcessGroups(rank_pids);
  const int killed = KillProcesses(JobMatch(job_id), kKillRounds);
  if (killed > 0) spdlog::debug("job={} SIGKILL to {} marked process(es)", job_id, killed);
  // Orphans that scrubbed their markers, adopted here (one job only).
  if (begun_.size() == 1 && begun_.count(job_id) != 0) {
    for (pid_t pid : Adopted()) kill(pid, SIGKILL);
  }
}

void SubreaperContainment::EndJob(const std::string& job_id, std::function<void()> on_empty) {
  if (waiters_.erase(job_id) > 0) {
    spdlog::warn("job={} EndJob while already ending; the first caller is dropped", job_id);
  }
  auto waiter = std::make_unique<Waiter>();
  Waiter* w = waiter.get();
  w->owner = this;
  w->job_id = job_id;
  w->on_empty = std::move(on_empty);
  w->timer = UvInit<uv_timer_t>([&](uv_timer_t* h) { return uv_timer_init(loop_, h); });
  if (!w->timer) {
    // Cannot happen on Linux (uv_timer_init does not fail); still the job
    // must end.
    spdlog::error("job={} cannot wait for its processes; ending it now", job_id);
    w->on_empty();
    return;
  }
  w->timer->data = w;
  waiters_[job_id] = std::move(waiter);
  // The first look comes on the next loop turn: on_empty never runs from
  // within EndJob.
  uv_timer_start(
      w->timer.get(),
      [](uv_timer_t* t) {
        auto* w = static_cast<Waiter*>(t->data);
        w->owner->Check(w);
      },
      0, kRecheckMs);
}

void SubreaperContainment::Check(Waiter* w) {
  const std::vector<pid_t> left = JobProcesses(w->job_id);
  if (left.empty()) {
    // Zombies among them are reaped by reaper_ as their SIGCHLD comes.
    reaper_.ReapNow();
    auto on_empty = std::move(w->on_empty);
    const std::string id = w->job_id;
    waiters_.erase(id);  // w is gone
    on_empty();          // may begin the job's next attempt, with a new waiter
    return;
  }
  if (++w->checks % kRekillEvery != 0) return;
  KillProcesses(JobMatch(w->job_id), kKillRounds);
  for (pid_t pid : left) kill(pid, SIGKILL);
  // Said at 1, 2, 4, 8 ... s, not every second (see CgroupContainment).
  const int seconds = w->checks / kRekillEvery;
  if ((seconds & (seconds - 1)) != 0) return;
  spdlog::warn(
      "job={} {} marked process(es) still alive {}s after teardown (first pid={}); "
      "killing again",
      w->job_id, left.size(), seconds, left.front());
}

std::vector<Containment::Left> SubreaperContainment::Remaining(const std::string& job_id,
                                                               size_t max) {
  // Marked processes carry no trustworthy rank (their environment is the
  // user's to change): the rank is not known.
  std::vector<Left> out;
  for (pid_t pid : JobProcesses(job_id)) {
    if (out.size() >= max) break;
    out.push_back({pid, -1});
  }
  return out;
}

void SubreaperContainment::Forget(const std::string& job_id) {
  waiters_.erase(job_id);
  begun_.erase(job_id);
}

}  // namespace ltd
