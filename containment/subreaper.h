// ltd as a child subreaper: when a rank dies, its orphaned descendants
// (double-forked daemons, DataLoader workers that setsid()) become ltd's
// children instead of init's, so they stay within reach and ltd reaps
// them, leaving no zombie behind.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <cstdint>

#include "absl/status/status.h"
#include "uv_handle.h"

namespace ltd {

// prctl(PR_SET_CHILD_SUBREAPER) on this process.
absl::Status BecomeChildSubreaper();

// Reaps ltd's zombie children that libuv did not spawn: descendants that
// were reparented to ltd. libuv waitpid()s only the pids of its own
// uv_process_t handles, so this never calls waitpid(-1), which would take
// a rank's exit status away from libuv; it waits for exactly the zombies
// it finds whose pid no process handle of the loop holds, and that are
// outside ltd's own session: every rank starts a new session, so no job
// process can be in ltd's, while helpers ltd forks itself (gdb for a hang
// report) are, and their forker waits for them.
class AdoptedChildReaper {
 public:
  // Starts watching SIGCHLD; destruction closes its handles.
  explicit AdoptedChildReaper(uv_loop_t* loop);
  AdoptedChildReaper(const AdoptedChildReaper&) = delete;
  AdoptedChildReaper& operator=(const AdoptedChildReaper&) = delete;

  // One pass now: reaps every adopted zombie there is.
  void ReapNow();
  uint64_t reaped() const { return reaped_; }

 private:
  uv_loop_t* loop_;
  UvPtr<uv_signal_t> sigchld_;
  UvPtr<uv_timer_t> soon_;  // armed: a reap pass is due on the next turn
  uint64_t reaped_ = 0;
};

}  // namespace ltd
