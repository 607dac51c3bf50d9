// posix_spawn attributes of a child that starts clean: no signal blocked
// and every signal at its default, whatever the spawner blocks or handles
// (a libuv pool thread blocks them all; ltd and lt-shim handle several).
#pragma once

#include <signal.h>
#include <spawn.h>

namespace ltd {

class CleanSpawnAttr {
 public:
  // `new_session`: the child leads a session of its own (and so its own
  // process group), out of reach of signals meant for the spawner's.
  explicit CleanSpawnAttr(bool new_session) {
    posix_spawnattr_init(&attr_);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr_, &none);
    posix_spawnattr_setsigdefault(&attr_, &all);
    posix_spawnattr_setflags(&attr_, (new_session ? POSIX_SPAWN_SETSID : 0) |
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
