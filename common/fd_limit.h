// The open-file limit a supervisor needs: each rank holds five of its
// supervisor's fds (stdout, stderr, heartbeats, pidfd, the stack pipe), so
// the usual soft limit of 1,024 stops a job near 200 ranks. Raising the soft limit up to
// the hard one needs no privilege.
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace ltd {

// The fds a supervisor of `ranks` ranks needs, with room for its own.
constexpr uint64_t FdsForRanks(uint64_t ranks) { return ranks * 5 + 128; }

// Raises this process's soft RLIMIT_NOFILE to at least `needed` (0: to the
// hard limit). FailedPrecondition, one line saying what to do, when the
// hard limit is lower than `needed`; the soft limit is then left as it was.
absl::Status RaiseFdLimit(uint64_t needed = 0);

}  // namespace ltd
