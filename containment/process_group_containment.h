// The weakest containment, used when neither cgroups nor a subreaper can
// be had: every rank's process group is killed, descendants that left it
// are missed.
#pragma once

#include <uv.h>

#include "containment.h"

namespace ltd {

class ProcessGroupContainment final : public Containment {
 public:
  explicit ProcessGroupContainment(uv_loop_t* loop) : loop_(loop) {}
  std::string_view name() const override { return "process-group"; }
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

 private:
  uv_loop_t* loop_;
};

// Runs `fn` on the next loop iteration (a zero-delay one-shot timer).
void RunSoon(uv_loop_t* loop, std::function<void()> fn);

// SIGKILL to each rank's process group (to the rank alone while its start
// has not made one); ESRCH is the expected "already gone".
void KillProcessGroups(const std::vector<pid_t>& rank_pids);

}  // namespace ltd
