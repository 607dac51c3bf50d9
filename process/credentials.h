// Whom work done for a user runs as: a rank, a file opened for it, a stack
// tool pointed at its processes.
#pragma once

#include <sys/types.h>

#include <optional>
#include <vector>

namespace ltd {

struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  // The supplementary groups: the job's (its submitter's); none: the
  // user's login groups, looked up through NSS.
  std::optional<std::vector<gid_t>> groups;
};

}  // namespace ltd
