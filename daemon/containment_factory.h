// Picks how jobs are contained on this host: cgroup v2 where ltd may write
// its cgroup subtree, else a child subreaper, else process groups.
#pragma once

#include <uv.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "containment.h"
#include "job_store.h"

namespace ltd {

// `mode`: "auto", "cgroup", "subreaper" or "process-group".
absl::StatusOr<std::unique_ptr<Containment>> MakeContainment(uv_loop_t* loop,
                                                             const std::string& mode,
                                                             const JobStore& store);

}  // namespace ltd
