// Values as users type them after a flag, checked the same way for ltd,
// ltctl and ltrun: a refusal is one line of one shape, naming the flag,
// what was given and what to give instead ("--grace '5x' is not a
// duration; use e.g. 500ms, 10s, 1h30m, 01:30:00 or plain seconds").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "duration.h"

namespace ltd {

// A duration (duration.h's spellings).
absl::StatusOr<Millis> DurationFlag(const std::string& flag, const std::string& text);
// A time limit (`--time`): a duration, a plain number being minutes as
// with sbatch.
absl::StatusOr<Millis> TimeLimitFlag(const std::string& flag, const std::string& text);

// A size (byte_size.h's spellings) of at least `at_least` bytes, which
// the message names as the size it was given as, `at_least_text` ("1M").
absl::StatusOr<uint64_t> ByteSizeFlag(const std::string& flag, const std::string& text,
                                      uint64_t at_least, const std::string& at_least_text);

// A number of CPUs, more than 0 with at most 3 decimals ("4", "1.5"), in
// thousandths of a CPU (job_limits.h's ParseCpus).
absl::StatusOr<uint32_t> CpusFlag(const std::string& flag, const std::string& text);

// One --env KEY=VALUE: a KEY (not empty) and a '=' (the value may be
// empty). The message quotes what was given, escaped and cut short.
absl::Status EnvFlag(std::string_view kv);

}  // namespace ltd
