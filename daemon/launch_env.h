// What a rank is started with: its program, resolved the way a shell would
// in the client's PATH and working directory, and its environment, the
// torchrun contract of SPEC.md on top of the client's. Pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "job.h"

namespace ltd {

// The path to execute, or NotFound with "cannot execute PROG: <strerror>".
// Checked as the job's user would be, so a job that cannot start fails
// before any rank runs.
absl::StatusOr<std::string> ResolveProgram(const JobSpec& spec);

// The client's environment, minus what ltd sets, plus RANK, WORLD_SIZE,
// MASTER_*, TORCHELASTIC_*, LT_*, and `extra` (containment markers).
std::vector<std::string> RankEnvironment(const Job& job, int rank, const std::string& job_dir,
                                         const std::vector<std::string>& extra);

}  // namespace ltd
