// Files a job's user names, opened with that user's rights, never root's:
// `submit --output PATTERN`. The work runs on a thread of its own whose
// filesystem ids and groups are the user's (setfsuid, setfsgid and
// setgroups as raw system calls change only the calling thread; glibc's
// wrappers would change every thread of the process), so the kernel
// checks the user's permissions on every directory of the path, and root's
// capabilities on files are dropped with the fsuid.
//
// The path is the user's to choose, and so is its file system: a FUSE
// mount of theirs, or an NFS server that stopped answering, can leave an
// open or a stat waiting for ever. The caller waits at most a deadline; a
// thread still waiting then is left to finish on its own, and a user may
// have at most kMaxWaitingPerUser calls waiting at once (more are refused at
// once), so that neither ltd's API nor a supervisor's loop waits on a
// user's file system.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "fd.h"

namespace ltd {

inline constexpr std::chrono::milliseconds kFileDeadline{5000};
inline constexpr int kMaxWaitingPerUser = 8;

// Runs `fn` on a new thread that has become `uid` (with `gid` and its
// login groups, looked up there) for file access, and returns its status;
// DeadlineExceeded if it has not returned within `deadline`. `fn` must own
// what it uses (the thread may outlive the call). Not root (ltrun): this
// process is the user already, and `fn` runs here.
absl::Status RunAsFileUser(uid_t uid, gid_t gid, std::function<absl::Status()> fn,
                           std::chrono::milliseconds deadline = kFileDeadline);

// On the calling thread, with its ids (inside RunAsFileUser's `fn`):
// Opens `path` for appending output (created 0644, or cut to empty with
// `truncate`). Refused: a symbolic link as the last component, anything
// but a regular file (a FIFO, a device), and whatever may not be written.
// The error names the path and why, in one line.
absl::StatusOr<Fd> OpenOutputFile(const std::string& path, bool truncate);
// Whether `path` could be created or written (the same checks, nothing
// created): an existing file must be a regular file that may be written, a
// new one needs a directory that may be written in. With `dir_only`, only
// the directory `path` is in is checked (the file's name is not known yet).
absl::Status CheckOutputFile(const std::string& path, bool dir_only);

}  // namespace ltd
