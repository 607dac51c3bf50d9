// Reaps the helpers (lt-userio) that nobody waits for: one that answered
// and exits, and one killed at its deadline that sits in the kernel until
// the user's file system answers, for a minute or for ever. A thread of
// its own polls their pidfds (never a waitpid that blocks, never on a
// loop) and reaps each when it goes, so that none stays a zombie of ours,
// and counts per user those still alive: the bound on helpers a user's
// file system can hold at once. The thread blocks only in poll, so the
// process exits whenever it likes, stuck helpers or not.
#pragma once

#include <sys/types.h>

#include <map>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "fd.h"

namespace ltd {

class HelperReaper {
 public:
  // The process's one reaper; its thread starts with the first Adopt.
  static HelperReaper& Get();

  // Counts a helper of `uid` about to start: false (nothing counted) when
  // `max` of theirs are alive already.
  bool Reserve(uid_t uid, int max);
  // The reserved helper did not start.
  void Unreserve(uid_t uid);
  // Reaps `pid` (reserved for `uid`) whenever it ends; its count goes then.
  void Adopt(uid_t uid, pid_t pid, Fd pidfd);
  int alive(uid_t uid) const;

 private:
  HelperReaper();
  struct Helper {
    uid_t uid;
    pid_t pid;
    Fd pidfd;
  };
  void Run();
  // Reaps what has ended; true when `h` is gone.
  static bool Reaped(const Helper& h);

  mutable std::mutex mu_;
  std::map<uid_t, int> alive_ ABSL_GUARDED_BY(mu_);
  std::vector<Helper> adopted_ ABSL_GUARDED_BY(mu_);  // the thread's to reap
  Fd wake_;                                           // an eventfd: something was adopted
  bool thread_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ltd
