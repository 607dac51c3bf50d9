// Files a job's user names, opened with that user's rights, never root's:
// `submit --output PATTERN`. The open runs on a thread of its own whose
// filesystem ids and groups are the user's (setfsuid, setfsgid and
// setgroups as raw system calls change only the calling thread; glibc's
// wrappers would change every thread of the process), so the kernel
// checks the user's permissions on every directory of the path, and root's
// capabilities on files are dropped with the fsuid.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fd.h"

namespace ltd {

struct FileUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary, as the job's ranks get them
};

// The user as the job's ranks are: `uid`, `gid` and its login groups.
FileUser FileUserOf(uid_t uid, gid_t gid);

// Opens `path` for appending output (created 0644 as the user, or cut to
// empty with `truncate`). Refused: a symbolic link as the last component,
// anything but a regular file (a FIFO, a device), and whatever the user
// may not write. The error names the path and why, in one line.
absl::StatusOr<Fd> OpenOutputAsUser(const std::string& path, const FileUser& user, bool truncate);

// Whether the user could create or write `path` (the same checks, nothing
// created): an existing file must be a regular file the user may write, a
// new one needs a directory the user may write in.
// With `dir_only`, only the directory `path` is in is checked (the file's
// name is not known yet).
absl::Status CheckOutputAsUser(const std::string& path, const FileUser& user, bool dir_only);

}  // namespace ltd
