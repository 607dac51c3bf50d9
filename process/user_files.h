// Work on the paths a job's user named (--output, --error), as the
// supervisor and ltd's API see it: done by a helper process that has become
// that user (userio/, started by user_io.h), never by a root process or
// thread. Every call waits at most a deadline for the user's file system;
// a helper that misses it is killed and left to the kernel (it may sit in
// an uninterruptible sleep until that file system answers), reaped when it
// goes, and never waited for again.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "credentials.h"

namespace ltd {

inline constexpr std::chrono::milliseconds kFileDeadline{5000};
// Helpers of one user alive at once in one process (answered or not: one
// stuck in the kernel counts until it is gone); past it calls are refused.
inline constexpr int kMaxHelpersPerUser = 8;

struct UserFile {
  std::string path;
  bool dir_only = false;  // Check: only the directory it is in
};

// Why a call failed, beside its status: which file, and whether the
// message already says what to give instead.
struct UserFileFailure {
  static constexpr size_t kNoFile = ~size_t{0};
  size_t file = kNoFile;  // kNoFile: no file's fault (deadline, bound, helper)
  bool refused = false;   // "PATH is on procfs; give ...": complete
};

// The writer helper of one job attempt, its files open. Frames
// (userio/protocol.h) go to fd(), a non-blocking pipe, in order.
class UserFileSink {
 public:
  virtual ~UserFileSink() = default;
  virtual int fd() const = 0;
  // No more frames: the helper writes what it has and exits. Waits for
  // that until `deadline`; past it the helper is killed and left. True
  // when it ended having written everything.
  virtual bool Finish(std::chrono::steady_clock::time_point deadline) = 0;
};

class UserFiles {
 public:
  virtual ~UserFiles() = default;
  // Whether each file could be written by `who`; the first that cannot
  // fails the call, `failure` says which.
  virtual absl::Status Check(const Credentials& who, const std::vector<UserFile>& files,
                             UserFileFailure* failure) = 0;
  // Opens `paths` for appending as `who` (cut to empty with `truncate`)
  // in a helper that then writes what the sink is given; one it creates
  // gets mode 0666 less `umask`.
  virtual absl::StatusOr<std::unique_ptr<UserFileSink>> Open(const Credentials& who,
                                                             const std::vector<std::string>& paths,
                                                             bool truncate, mode_t umask,
                                                             UserFileFailure* failure) = 0;
};

}  // namespace ltd
