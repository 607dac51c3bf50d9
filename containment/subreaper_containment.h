// The fallback containment where cgroups cannot be written (ltd not root,
// no delegated cgroup): ltd is a child subreaper, so a rank's orphaned
// descendants become ltd's children rather than init's, and every process
// of a job is known by the markers it inherits: LT_JOB_ID=<id> and this
// ltd's LT_DAEMON_TAG, so two ltds never touch each other's jobs. A
// process that scrubs its environment (`setsid env -i ...`) is still found
// while it is below a live rank in the process tree, and, once orphaned,
// as a child this subreaper adopted in a session other than its own (the
// helpers it starts itself stay in its session): while this process runs
// one job only (lt-shim, ltrun), such a child and its descendants are that
// job's. Orphans never pass a subreaper, so this holds while this process
// lives; a scrubbed process of a supervisor killed with its job is found
// by markers only (the start-up sweep), and so missed.
#pragma once

#include <uv.h>

#include <map>
#include <memory>
#include <set>
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
  absl::Status BeginJob(const std::string& job_id, const JobLimits& limits) override;
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
  // The job's processes: those with its markers, and those adopted (see
  // above) when `job_id` is the only job begun here.
  std::vector<pid_t> JobProcesses(const std::string& job_id) const;
  void Check(Waiter* w);

  uv_loop_t* loop_;
  std::string marker_;
  std::map<std::string, std::unique_ptr<Waiter>> waiters_;  // jobs in EndJob, by id
  AdoptedChildReaper reaper_;
  std::set<std::string> begun_;  // jobs begun and not forgotten
};

}  // namespace ltd
