// What the containment tests share: whether this test may make cgroups,
// and waits on this process's children and on paths.
#pragma once

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "cgroup_fs.h"

namespace ltd::test {

inline bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// Reaps every exited child of this process; true once it has no child at
// all (tests that stand in for init adopt ltd's orphans).
inline bool ReapedAll() {
  for (;;) {
    const pid_t pid = waitpid(-1, nullptr, WNOHANG);
    if (pid > 0) continue;
    return pid < 0 && errno == ECHILD;
  }
}

// Whether this test may make cgroups: root, a cgroup2 mount, a writable
// own cgroup. Otherwise the cgroup cases are skipped and only the
// subreaper fallback runs.
inline bool CgroupsWritable() {
  auto own = OwnCgroupDir();
  return own.ok() && access((*own + "/cgroup.procs").c_str(), W_OK) == 0 &&
         access(own->c_str(), W_OK) == 0;
}

}  // namespace ltd::test
