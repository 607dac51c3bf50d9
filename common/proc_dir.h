// /proc/PID of one process for certain. A pid names whoever has it now: a
// process read by pid after it was reaped may be another one that took
// the number. A /proc/PID directory fd stays bound to the process it was
// opened for (reads through it fail once that one is gone), so ProcDir
// opens the directory and then checks, through a pidfd, that the process
// is still there: the directory is then the pidfd's process. With a pidfd
// held from spawn, that is the very child; with one opened here by pid,
// it is whoever had the pid at the open, and a caller that needs more
// checks membership again after the open (UvLauncher::Leftovers).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "fd.h"

namespace ltd {

class ProcDir {
 public:
  // nullopt when the process is gone (or never was), or /proc cannot be
  // read. `pidfd`: one held from spawn (not taken over); -1: one is opened
  // here, by pid, before the directory.
  static std::optional<ProcDir> Open(pid_t pid, int pidfd = -1);

  pid_t pid() const { return pid_; }
  int fd() const { return dir_.get(); }
  // A path that reaches the directory through this fd (/proc/self/fd/N),
  // for code that takes paths: whatever it opens below is this process's.
  std::string path() const;
  // Whether the process is still there (not reaped; a zombie is).
  bool Alive() const;
  // A file of the directory ("stat", "wchan", ...), at most `max` bytes.
  absl::StatusOr<std::string> Read(const char* name, size_t max = 65536) const;

 private:
  ProcDir(pid_t pid, Fd dir, Fd own_pidfd, int pidfd)
      : pid_(pid), dir_(std::move(dir)), own_pidfd_(std::move(own_pidfd)), pidfd_(pidfd) {}

  pid_t pid_;
  Fd dir_;
  Fd own_pidfd_;  // the one opened here, if any
  int pidfd_;     // own_pidfd_'s or the caller's
};

}  // namespace ltd
