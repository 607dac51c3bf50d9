// Picks how jobs are contained on this host: cgroup v2 where ltd may write
// its cgroup subtree, else a child subreaper, else process groups. Also
// sweeps what an earlier ltd on the same state dir left when it died, and
// names what lt-guardian must kill should this ltd die.
#pragma once

#include <uv.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "containment.h"
#include "job_store.h"

namespace ltd {

struct ContainmentSetup {
  std::unique_ptr<Containment> containment;
  // LT_DAEMON_TAG=<state tag>.<instance>: goes into every rank's
  // environment (ManagerConfig::extra_rank_env) and marks this ltd
  // process's jobs for the subreaper mode and the guardian.
  std::string rank_marker;
  // lt-guardian's arguments: --cgroup RUN_DIR (cgroup mode), --marker K=V.
  std::vector<std::string> guardian_args;
};

// `mode`: "auto", "cgroup", "subreaper" or "process-group". Fails, with a
// one-line message that says what to do, when the mode asked for cannot
// be had; "auto" falls back instead and logs why.
absl::StatusOr<ContainmentSetup> SetUpContainment(uv_loop_t* loop, const std::string& mode,
                                                  const JobStore& store);

// SetUpContainment's containment alone.
absl::StatusOr<std::unique_ptr<Containment>> MakeContainment(uv_loop_t* loop,
                                                             const std::string& mode,
                                                             const JobStore& store);

// The tag every ltd on `state_dir` shares: a hash of its canonical path.
std::string StateTag(const std::string& state_dir);

}  // namespace ltd
