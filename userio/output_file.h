// A job's --output/--error file as lt-userio opens and checks it, having
// become the user (become_user.h): the kernel checks the user's rights on
// every directory of the path. Beyond those rights, only a regular file on
// an ordinary file system is taken: a sysctl under /proc/sys, a sysfs or
// cgroup attribute, a user namespace's uid_map are regular files too, and
// writing one acts on the kernel rather than storing lines.
#pragma once

#include <string>

namespace ltd::userio {

struct Outcome {
  int fd = -1;          // Open's file, when it succeeded
  std::string message;  // empty: ok; else one line
  // The message says what the file is and what to give instead ("PATH is
  // a FIFO; give a regular file"); otherwise it is a failed call with
  // the OS's words ("open(PATH): Permission denied").
  bool refused = false;
};

// The name of the pseudo file system `f_type` (statfs) is, or nullptr for
// one that stores files (ext4, xfs, tmpfs, nfs, fuse, ...).
const char* PseudoFileSystem(long f_type);

// Opens `path` for appending (created 0644; cut to empty with `truncate`).
// Refused: a symbolic link as the last component, anything but a regular
// file, a file on a pseudo file system.
Outcome OpenOutputFile(const std::string& path, bool truncate);

// Whether `path` could be created or written, nothing created: an existing
// file must be a regular file on an ordinary file system that may be
// written; a new one needs a directory that may be written in, on one.
// `dir_only`: only the directory `path` is in (its name is not known yet).
Outcome CheckOutputFile(const std::string& path, bool dir_only);

}  // namespace ltd::userio
