// The resource limits a job's ranks run with: the submitting process's
// (ltctl sends them), each the lower of those and ltd's own as ltd was
// started, as Slurm's PropagateResourceLimits=ALL does. Without them
// (a client of an earlier release) ranks get ltd's own as it was started:
// never the fd limit ltd raises for itself (20,000 and more).
#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ltd {

struct ResourceLimit {
  int resource = 0;   // RLIMIT_*
  uint64_t soft = 0;  // RLIM_INFINITY: none
  uint64_t hard = 0;
  bool operator==(const ResourceLimit&) const = default;
};

// The limits that travel, by name (AS CORE CPU DATA FSIZE MEMLOCK NOFILE
// NPROC RSS STACK), as Slurm names them without RLIMIT_.
const std::vector<int>& PropagatedResources();
std::string_view ResourceName(int resource);
std::optional<int> ResourceByName(std::string_view name);

// This process's limits of PropagatedResources().
std::vector<ResourceLimit> OwnLimits();

// ltd's own limits as it was started: taken by the first call (ltd's main
// calls it before it raises its fd limit).
const std::vector<ResourceLimit>& StartLimits();

// What the ranks get: each of `asked` (a client's, hostile) the lower of it
// and `own`'s; `own` where the client sent nothing. InvalidArgument (one
// line) for a name ltd does not know or a soft limit above its hard one.
struct AskedLimit {
  std::string name;
  uint64_t soft = 0;
  uint64_t hard = 0;
};
absl::StatusOr<std::vector<ResourceLimit>> RankLimits(const std::vector<AskedLimit>& asked,
                                                      const std::vector<ResourceLimit>& own);

// lt-exec's `--rlimit RESOURCE:SOFT:HARD`, in decimal (lt-exec takes the
// standard library only).
std::string FormatLimit(const ResourceLimit& limit);

}  // namespace ltd
