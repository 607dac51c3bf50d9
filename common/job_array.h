// `submit --array SPEC`, as sbatch's: which tasks an array job has and how
// many of them may run at once. SPEC is `0-15`, `1,3,5-7`, `0-15:2` (a
// step), any of those then `%N` (at most N tasks running at once).
//
// SPEC comes from a user (the command line, a script's #LTD line, a
// request): hostile bytes, parsed by one pure function (a fuzzer calls it
// alone) with bounds on everything, so that an array can never make more
// jobs than a user could submit one by one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ltd {

// The most tasks one array has, and the highest task id; as Slurm's
// default MaxArraySize (1001), ids 0..kMaxArrayIndex.
inline constexpr size_t kMaxArrayTasks = 1000;
inline constexpr uint32_t kMaxArrayIndex = 100000;
inline constexpr size_t kMaxArraySpecBytes = 1024;

struct ArraySpec {
  std::vector<uint32_t> tasks;  // ascending, each once
  uint32_t throttle = 0;        // %N: at most N running at once; 0: no limit
};

// SPEC, or one line saying what is wrong with it and what to give instead.
absl::StatusOr<ArraySpec> ParseArraySpec(std::string_view spec);

// SPEC in sbatch's words: runs folded into ranges ("0-5,7,9-11%2",
// "0-12:4"). Longer than kMaxArraySpecBytes for some arrays of ids that
// follow no pattern, which ParseArraySpec then refuses.
std::string FormatArraySpec(const ArraySpec& spec);

// "12_3" split into the array's id and the task id; false for anything
// else (a plain id, a name).
bool SplitTaskRef(std::string_view ref, std::string* array_id, uint32_t* task);

}  // namespace ltd
