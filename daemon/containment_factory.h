// Picks how jobs are contained on this host: cgroup v2 where ltd may write
// its cgroup subtree, else a child subreaper, else process groups. In two
// steps, so that lt-guardian can be on watch before anything exists that
// it would have to clean up:
//
//   plan  = PlanContainment(store);            // names only, creates nothing
//   Guardian::Start(..., plan.guardian_args);  // kills all that, should ltd die
//   SetUpContainment(loop, mode, plan);        // sweeps leftovers, creates
#pragma once

#include <uv.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "containment.h"
#include "job_store.h"

namespace ltd {

struct ContainmentPlan {
  // LT_DAEMON_TAG=<state tag>.<instance>: goes into every rank's
  // environment (ManagerConfig::extra_rank_env) and marks this ltd
  // process's jobs for the subreaper mode and the guardian.
  std::string rank_marker;
  std::string state_tag;  // shared by every ltd on this state dir
  std::string instance;   // this ltd process
  // <own cgroup>/ltd-<state tag>, or empty with the reason in cgroup_error.
  std::string cgroup_base;
  absl::Status cgroup_error;
  std::string run_dir() const { return cgroup_base + "/run-" + instance; }
  // lt-guardian's arguments: --cgroup RUN_DIR (if there is a cgroup2
  // mount; the cgroup may never be made), --marker K=V.
  std::vector<std::string> guardian_args;
};

ContainmentPlan PlanContainment(const JobStore& store);

// Sweeps what an earlier ltd on this state dir left, then builds the
// containment. `mode`: "auto", "cgroup", "subreaper" or "process-group".
// Fails, with a one-line message that says what to do, when the mode asked
// for cannot be had; "auto" falls back instead and logs why.
absl::StatusOr<std::unique_ptr<Containment>> SetUpContainment(uv_loop_t* loop,
                                                              const std::string& mode,
                                                              const ContainmentPlan& plan);

// Both steps, without a guardian.
absl::StatusOr<std::unique_ptr<Containment>> MakeContainment(uv_loop_t* loop,
                                                             const std::string& mode,
                                                             const JobStore& store);

// The tag every ltd on `state_dir` shares: a hash of its canonical path.
std::string StateTag(const std::string& state_dir);

}  // namespace ltd
