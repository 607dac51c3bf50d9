// The fallback containment where cgroups cannot be written (ltd not root,
// no delegated cgroup): ltd is a child subreaper, so a rank's orphaned
// descendants become ltd's children rather than init's, and every process
// of a job is known by the markers it inherits: LT_JOB_ID=<id> and this
// ltd's LT_DAEMON_TAG, so two ltds never touch each other's jobs. Misses
// only a process that execs with a scrubbed environment after leaving its
// rank's process group.
#pragma once

#include <uv.h>

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "containment.h"
#include "process_scan.h"
#include "subreaper.h"

namespace ltd {

class SubreaperContainment final : public Containment {
 public:
  // `instance_marker`: the LT_DAEMON_TAG=... entry every rank carries.
  // Makes ltd a child subreaper; fails if the kernel refuses.
  static absl::StatusOr<std::unique_ptr<SubreaperContainment>> Create(uv_loop_t* loop,
                                                                      std::string instance_marker);
  ~SubreaperContainment() override;
  SubreaperContainment(const SubreaperContainment&) = delete;
  SubreaperContainment& operator=(const SubreaperContainment&) = delete;

  std::string_view name() const override { return "subreaper"; }
  // Limits need cgroups: ltd refuses jobs that ask for one (LimitSupport).
  absl::Status BeginJob(const std::string&, const JobLimits& limits) override {
    return limits.any() || limits.isolate_gpus
               ? absl::FailedPreconditionError(
                     "--mem, --cpus and GPU isolation need ltd's cgroup containment")
               : absl::OkStatus();
  }
  std::vector<std::string> RankCgroups(const std::string&, int) override { return {}; }
  void KillJob(const std::string& job_id, const std::vector<pid_t>& rank_pids) override;
  void EndJob(const std::string& job_id, std::function<void()> on_empty) override;
  std::vector<Left> Remaining(const std::string& job_id, size_t max) override;
  void Forget(const std::string& job_id) override;
  void LeaveToLauncher(std::function<bool(pid_t)> is_rank) override {
    reaper_.LeaveAlone(std::move(is_rank));
  }

 private:
  struct Waiter;
  SubreaperContainment(uv_loop_t* loop, std::string instance_marker);
  EnvMatch JobMatch(const std::string& job_id) const;
  void Check(Waiter* w);

  uv_loop_t* loop_;
  std::string marker_;
  std::map<std::string, std::unique_ptr<Waiter>> waiters_;  // jobs in EndJob, by id
  AdoptedChildReaper reaper_;
};

}  // namespace ltd
