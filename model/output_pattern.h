// `submit --output PATTERN` / `--error PATTERN`, as sbatch's -o/-e: a path
// where %j is the job id, %r the rank, %n the job's name (its id when it
// has none) and %% a percent sign.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace ltd {

// OK, or one line saying what is wrong with the pattern of `flag`.
absl::Status CheckOutputPattern(std::string_view flag, std::string_view pattern);
// The path for one rank. A name's '/' becomes '_', so that a name cannot
// choose the directory.
std::string ExpandOutputPattern(std::string_view pattern, std::string_view job_id, int rank,
                                std::string_view name);
// Whether ranks share the file (the pattern has no %r).
bool PatternPerRank(std::string_view pattern);

}  // namespace ltd
