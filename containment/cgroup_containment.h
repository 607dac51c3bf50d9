// Containment on cgroup v2. ltd makes a subtree inside its own cgroup
// (under systemd, the delegated one; never anywhere else):
//
//   <own cgroup>/ltd-<state tag>/run-<instance>/job-<id>/rank-<r>
//
// The state tag comes from the state dir, so an ltd restarted on the same
// state finds what a dead predecessor left; the run level is per ltd
// process, so the guardian of a dead ltd never touches its successor's
// jobs. A process cannot leave its cgroup without write access to the
// subtree, so setsid() and double forks do not escape: cgroup.kill ends
// them all, and cgroup.events says, through inotify, when the last is gone.
#pragma once

#include <uv.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "cgroup_limits.h"
#include "containment.h"
#include "subreaper.h"
#include "uv_handle.h"

namespace ltd {

class CgroupContainment final : public Containment {
 public:
  // Makes `base`/`run` (base is normally <own cgroup>/ltd-<tag>) and proves
  // a child process can join a cgroup in it, unless `proven` (ltd proved it
  // in the same base for its supervisors). Fails with the call, path and
  // errno when cgroups cannot be used here. `places`: where memory and
  // CPU limits go (FindLimitPlaces); none by default.
  static absl::StatusOr<std::unique_ptr<CgroupContainment>> Create(uv_loop_t* loop,
                                                                   const std::string& base,
                                                                   const std::string& run,
                                                                   bool proven = false,
                                                                   LimitPlaces places = {});
  ~CgroupContainment() override;  // removes the run cgroup, and base if empty
  CgroupContainment(const CgroupContainment&) = delete;
  CgroupContainment& operator=(const CgroupContainment&) = delete;

  std::string_view name() const override { return "cgroup"; }
  absl::Status BeginJob(const std::string& job_id, const JobLimits& limits) override;
  std::vector<std::string> RankCgroups(const std::string& job_id, int rank) override;
  std::optional<uint64_t> OomKills(const std::string& job_id, int rank) override;
  std::optional<std::chrono::microseconds> TakeCpuUsed(const std::string& job_id) override;
  void KillJob(const std::string& job_id, const std::vector<pid_t>& rank_pids) override;
  void EndJob(const std::string& job_id, std::function<void()> on_empty) override;
  std::vector<Left> Remaining(const std::string& job_id, size_t max) override;
  void Forget(const std::string& job_id) override;
  void LeaveToLauncher(std::function<bool(pid_t)> is_rank) override {
    reaper_.LeaveAlone(std::move(is_rank));
  }

  const std::string& run_dir() const { return run_dir_; }
  std::string JobDir(const std::string& job_id) const;

 private:
  struct Waiter;
  // A job's limits in this attempt and the cgroups that hold them.
  struct Limited {
    JobLimits limits;
    std::string memory_dir;  // the job's memory cgroup (v2: JobDir)
    std::string cpu_dir;
    std::string devices_dir;  // v2: JobDir
  };
  CgroupContainment(uv_loop_t* loop, std::string base_dir, std::string run_dir, LimitPlaces places);
  void Check(Waiter* w, bool from_timer);
  void Done(Waiter* w);
  // The run cgroup of this instance in `place`'s hierarchy (v2: run_dir_).
  std::string RunDirIn(const ControllerPlace& place) const;
  absl::Status SetUpLimits(const std::string& job_id, const JobLimits& limits);
  // Removes the job's v1 cgroups (empty once its v2 one is).
  void RemoveLimited(const std::string& job_id);

  uv_loop_t* loop_;
  std::string base_dir_;
  std::string run_dir_;
  // Held for ltd's life so libuv's inotify fd exists from the start: ltd's
  // fd count then stays flat across jobs, which is how a leak shows.
  UvPtr<uv_fs_event_t> run_watch_;
  std::map<std::string, std::unique_ptr<Waiter>> waiters_;  // jobs in EndJob, by id
  AdoptedChildReaper reaper_;
  LimitPlaces places_;
  std::map<std::string, Limited> limited_;  // jobs with limits, by id
  // What each emptied job's cgroup had used, until its supervisor takes it:
  // one entry a job of this supervisor at most.
  std::map<std::string, std::chrono::microseconds> cpu_used_;
  // The rank-R cgroups each job's attempt made: removed by name at its
  // end, without a listing of the job's cgroup.
  std::map<std::string, std::set<int>> rank_cgroups_;
};

// Bounded wait for a cgroup to empty after a kill; true once it is (or is
// gone). Only start-up, shutdown and a dead supervisor's sweep use it.
bool WaitEmpty(const std::string& dir, std::chrono::milliseconds timeout);

// Kills and removes every run-* cgroup under `base` but those in `keep`
// (the leftovers of ltds and supervisors that died on this state dir);
// waits up to `timeout` for them to empty. Returns how many it removed.
int SweepCgroupLeftovers(const std::string& base, const std::set<std::string>& keep,
                         std::chrono::milliseconds timeout);

}  // namespace ltd
