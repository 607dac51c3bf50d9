// Owns one file descriptor; closes it exactly once.
#ifndef LTWORKER_SRC_UNIQUE_FD_H_
#define LTWORKER_SRC_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace ltworker::internal {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

  void Reset(int fd = -1) {
    // close() errors are not actionable here: on Linux the fd is released
    // even when close reports EINTR or EIO, so retrying would be wrong.
    if (fd_ >= 0) (void)::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace ltworker::internal

#endif  // LTWORKER_SRC_UNIQUE_FD_H_
