// The process layer's one way to start a helper program (lt-userio): with
// posix_spawn, as ninja does; with exactly the fds it is given and no other
// (whatever else the spawner holds, close-on-exec or not: ltd's state-dir
// lock, its sockets, other users' pipes), an empty environment, "/" as
// its working directory, a process group of its own in the spawner's
// session (the adopted-child sweep leaves it to us), and held through a
// pidfd from the start.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fd.h"

namespace ltd {

struct SpawnedHelper {
  pid_t pid = -1;
  Fd pidfd;  // invalid on a kernel without pidfds
};

// Starts `argv` (an absolute path first) with `fds[i]` as its fd i (-1:
// /dev/null there) and nothing above. The caller reaps it.
absl::StatusOr<SpawnedHelper> SpawnHelper(const std::vector<std::string>& argv,
                                          const std::vector<int>& fds);

}  // namespace ltd
