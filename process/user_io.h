// The root side of lt-userio (userio/main.cc): starts it through
// SpawnHelper for the job's user, hands it the request, and waits for its
// answer through a pipe, never past a deadline. A helper that misses the
// deadline is SIGKILLed and left to HelperReaper; each user may have
// kMaxHelpersPerUser alive in this process. Calls block the calling
// thread (NSS for the user's groups, the answer) for at most the
// deadline: never a loop's.
#pragma once

#include <chrono>
#include <string>

#include "fd.h"
#include "user_files.h"

namespace ltd {

class UserIo final : public UserFiles {
 public:
  // `helper`: lt-userio's path.
  explicit UserIo(std::string helper, std::chrono::milliseconds deadline = kFileDeadline)
      : helper_(std::move(helper)), deadline_(deadline) {}

  // lt-userio beside `exec_shim` (lt-exec): a build tree and an install
  // put both in one directory.
  static std::string Beside(const std::string& exec_shim);

  absl::Status Check(const Credentials& who, const std::vector<UserFile>& files,
                     UserFileFailure* failure) override;
  absl::StatusOr<std::unique_ptr<UserFileSink>> Open(const Credentials& who,
                                                     const std::vector<std::string>& paths,
                                                     bool truncate, mode_t umask,
                                                     UserFileFailure* failure) override;

 private:
  std::string helper_;
  std::chrono::milliseconds deadline_;
};

}  // namespace ltd
