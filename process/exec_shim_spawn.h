// Starting a rank through lt-exec (exec_shim.cc), for where its steps
// cannot run in a child of ours (rank_clone.h).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "rank_clone.h"
#include "rank_start_plan.h"

namespace ltd {

// lt-exec [--cgroup DIR]... [--user UID:GID --groups LIST|--groups-fd 6]
// [--rlimit R:S:H]... --parent PID, with an empty environment and what to
// run on fd 4: it runs as root, and nothing the user sent may reach it.
// `fds` become the rank's stdio, heartbeat fd and stack pipe; the rank
// leads a session of its own.
absl::StatusOr<ClonedRank> SpawnExecShim(const std::string& exec_shim, const RankFds& fds,
                                         std::unique_ptr<RankStartPlan> plan);

// For a child that must not run after all: nobody else reaps it, and a
// SIGKILLed child exits at once.
void KillAndReap(pid_t pid);

}  // namespace ltd
