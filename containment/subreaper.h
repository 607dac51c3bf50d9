// ltd as a child subreaper: when a rank dies, its orphaned descendants
// (double-forked daemons, DataLoader workers that setsid()) become ltd's
// children instead of init's, so they stay within reach and ltd reaps
// them, leaving no zombie behind.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "uv_handle.h"

namespace ltd {

// prctl(PR_SET_CHILD_SUBREAPER) on this process.
absl::Status BecomeChildSubreaper();

// Reaps ltd's zombie children that it did not spawn: descendants that
// were reparented to ltd. The launcher reaps its ranks itself (and libuv
// the pids of its uv_process_t handles), so this never calls waitpid(-1),
// which would take a rank's exit status away from them; it waits for
// exactly the zombies it finds that are neither the launcher's (`is_rank`)
// nor a process handle's of the loop, and that are outside ltd's own
// session: every rank starts a new session, so no job process can be in
// ltd's, while helpers ltd forks itself (gdb for a hang report) are, and
// their forker waits for them.
class AdoptedChildReaper {
 public:
  // Starts watching SIGCHLD; destruction closes its handles.
  explicit AdoptedChildReaper(uv_loop_t* loop);
  AdoptedChildReaper(const AdoptedChildReaper&) = delete;
  AdoptedChildReaper& operator=(const AdoptedChildReaper&) = delete;

  // The pids of children the launcher reaps itself.
  void LeaveAlone(std::function<bool(pid_t)> is_rank) { is_rank_ = std::move(is_rank); }
  // One pass now: reaps every adopted zombie there is.
  void ReapNow();
  uint64_t reaped() const { return reaped_; }

 private:
  uv_loop_t* loop_;
  UvPtr<uv_signal_t> sigchld_;
  UvPtr<uv_timer_t> soon_;  // armed: a reap pass is due on the next turn
  std::function<bool(pid_t)> is_rank_;
  uint64_t reaped_ = 0;
};

}  // namespace ltd
