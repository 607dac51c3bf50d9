// `submit --dependency`, as sbatch's: afterok:ID[:ID...] (the job starts
// once each succeeded; today's --after), afterany:ID[:ID...] (once each
// ended, however), afternotok:ID[:ID...] (once each ended without
// success), and singleton (once every earlier job of the same user and
// name ended). Several are joined with ','; all must be met. A job is an
// id or a name (as --after takes it).
//
// The text is a client's: one pure parser turns it into a typed value or
// one line saying what is wrong (a fuzzer calls it alone).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ltd {

enum class JobState;

enum class DependencyKind { kAfterOk, kAfterAny, kAfterNotOk };
std::string_view ToString(DependencyKind kind);  // "afterok", ...

struct DependencyRef {
  DependencyKind kind = DependencyKind::kAfterOk;
  std::string job;  // an id or a name, as typed
  bool operator==(const DependencyRef&) const = default;
};

struct DependencySpec {
  std::vector<DependencyRef> refs;
  bool singleton = false;
};

inline constexpr size_t kMaxDependencyBytes = 4096;

// `--dependency TEXT`, or one line naming the flag and what to give.
absl::StatusOr<DependencySpec> ParseDependency(std::string_view text);

// What a dependency of `kind` on a job in `state` (nullopt: no record of
// it left) comes to: still to wait, met, or never to be met.
enum class DependencyOutcome { kWaiting, kMet, kNever };
DependencyOutcome OutcomeOf(DependencyKind kind, std::optional<JobState> state);

}  // namespace ltd
