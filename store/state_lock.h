// One state dir, one ltd. A second ltd on the same state dir would take the
// first one's running jobs for leftovers of a dead one and sweep them, so
// ltd holds an exclusive lock on <state-dir>/ltd.lock for its whole life,
// whatever happens to its socket file. The kernel drops the lock when ltd
// dies, however it dies, and the last child that shares its fd (one that
// ltd was starting as it died) has reached its exec.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "fd.h"

namespace ltd {

class StateLock {
 public:
  // Fails with a message naming the holder's pid when another ltd has it
  // (still, after a second).
  static absl::StatusOr<StateLock> Acquire(const std::string& state_dir);

 private:
  explicit StateLock(Fd fd) : fd_(std::move(fd)) {}
  Fd fd_;  // the lock lives as long as this open file
};

}  // namespace ltd
