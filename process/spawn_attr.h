// How children are spawned: posix_spawn attributes of a child that starts
// clean (no signal blocked and every signal at its default, whatever the
// spawner blocks or handles: a libuv pool thread blocks them all; ltd and
// lt-shim handle several), and where a spawn's source fds must sit.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>

#include <cerrno>

#include "absl/status/status.h"
#include "fd.h"
#include "posix_error.h"

namespace ltd {

// The highest fd any spawn here dups onto: a rank's lt-exec gets 0 to 6
// (4: what to run, 5: the stack pipe, 6: its groups when they come
// later), a supervisor 3 and 4.
constexpr int kHighestSpawnTarget = 6;

// posix_spawn applies its dup2s in order, so a source fd that is also a
// target (0 to kHighestSpawnTarget) may be overwritten by an earlier dup2
// before its own. Fds that low are free whenever the spawner closed one
// (a supervisor, a rank's pipes): this moves `fd` (close-on-exec) above.
inline absl::Status AboveSpawnFds(Fd& fd) {
  if (fd.get() > kHighestSpawnTarget) return absl::OkStatus();
  Fd moved(fcntl(fd.get(), F_DUPFD_CLOEXEC, kHighestSpawnTarget + 1));
  if (!moved.valid()) return PosixError("fcntl(F_DUPFD_CLOEXEC)", "a child's fd", errno);
  fd = std::move(moved);
  return absl::OkStatus();
}

class CleanSpawnAttr {
 public:
  // `new_session`: the child leads a session of its own (and so its own
  // process group), out of reach of signals meant for the spawner's.
  // `new_group`: it leads a process group of its own in the spawner's
  // session, so that one kill(-pgid) reaches everything it started.
  explicit CleanSpawnAttr(bool new_session, bool new_group = false) {
    posix_spawnattr_init(&attr_);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr_, &none);
    posix_spawnattr_setsigdefault(&attr_, &all);
    posix_spawnattr_setpgroup(&attr_, 0);
    posix_spawnattr_setflags(&attr_, (new_session ? POSIX_SPAWN_SETSID : 0) |
                                         (new_group && !new_session ? POSIX_SPAWN_SETPGROUP : 0) |
                                         POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  ~CleanSpawnAttr() { posix_spawnattr_destroy(&attr_); }
  CleanSpawnAttr(const CleanSpawnAttr&) = delete;
  CleanSpawnAttr& operator=(const CleanSpawnAttr&) = delete;

  const posix_spawnattr_t* get() const { return &attr_; }

 private:
  posix_spawnattr_t attr_;
};

}  // namespace ltd
