// A supervisor belongs to the ltd that started it until that ltd has
// watched it (which starts the job's ranks). Until then the job's record
// is PENDING: should that ltd go first (SIGKILLed, stopped), the next one
// queues the job again and starts a supervisor of its own, and this one
// must go, having changed nothing. Else it waits out its restore window
// for a watch that never comes, and as it ends it writes the job LOST
// over what the other supervisor recorded and kills what runs in the
// job's cgroup, which is the other's.
//
// Two supervisors of one job at once (this one slow to start while the
// next ltd starts the other) take turns on the job's lock file: the later
// waits until the earlier, whose ltd is gone, has exited.
#pragma once

#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "fd.h"
#include "uv_handle.h"

namespace ltd {

// Whether the peer of the connected socket `fd` has closed it (the ltd
// at its other end is gone). Does not read.
bool PeerGone(int fd);

// The job's supervisor lock, held (flock) until the returned fd closes
// (close-on-exec: no rank holds it). Waits up to `deadline` for another
// supervisor of the job to exit; nullopt when the ltd at the other end of
// `ltd_fd` went meanwhile, and this supervisor should go.
absl::StatusOr<std::optional<Fd>> LockJob(const std::string& lock_path, int ltd_fd,
                                          std::chrono::milliseconds deadline);

// Calls `gone` on the loop once the ltd at the other end of `ltd_fd` has
// closed its end, unless Watched() came first. Loop thread.
class FirstContact {
 public:
  static absl::StatusOr<std::unique_ptr<FirstContact>> Watch(uv_loop_t* loop, int ltd_fd,
                                                             std::function<void()> gone);
  FirstContact(const FirstContact&) = delete;
  FirstContact& operator=(const FirstContact&) = delete;

  // Whether the ltd has gone: a watch it sent just before may still have
  // come, and is not to start the job (the next ltd may have read its
  // record as PENDING already).
  bool Gone() const { return fd_.valid() && PeerGone(fd_.get()); }
  // ltd watches the job: from now on its going is the restore window's.
  void Watched();

 private:
  FirstContact() = default;
  Fd fd_;  // a dup of the connection: the server owns and closes the original
  UvPtr<uv_poll_t> poll_;
  std::function<void()> gone_;
};

}  // namespace ltd
