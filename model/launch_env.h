// What a rank is started with: its environment, the torchrun contract of
// docs/protocol.md on top of the client's. (The program is found by lt-exec, as the
// user, in the user's PATH: see exec_shim.cc.) Pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "job.h"

namespace ltd {

// The client's environment, minus what ltd sets, plus RANK, WORLD_SIZE,
// MASTER_*, TORCHELASTIC_*, LT_*, and `extra` (containment markers).
std::vector<std::string> RankEnvironment(const Job& job, int rank, const std::string& job_dir,
                                         const std::vector<std::string>& extra);

}  // namespace ltd
