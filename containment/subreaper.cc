#include "subreaper.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "process_scan.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

absl::Status BecomeChildSubreaper() {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    return absl::PermissionDeniedError(
        Cat("prctl(PR_SET_CHILD_SUBREAPER): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

AdoptedChildReaper::AdoptedChildReaper(uv_loop_t* loop) : loop_(loop) {
  // SIGCHLD comes once per child; a burst of 200 dying children is
  // coalesced into one /proc scan on the next loop iteration.
  soon_ = UvInit<uv_timer_t>([&](uv_timer_t* h) { return uv_timer_init(loop_, h); });
  sigchld_ = UvInit<uv_signal_t>([&](uv_signal_t* h) { return uv_signal_init(loop_, h); });
  if (!soon_ || !sigchld_) {
    spdlog::error("cannot watch SIGCHLD; orphaned job processes may stay zombies");
    return;
  }
  soon_->data = this;
  sigchld_->data = this;
  // Several SIGCHLD watchers may coexist: libuv's own for its processes
  // and this one.
  const int rc = uv_signal_start(
      sigchld_.get(),
      [](uv_signal_t* h, int) {
        auto* self = static_cast<AdoptedChildReaper*>(h->data);
        if (uv_is_active(reinterpret_cast<uv_handle_t*>(self->soon_.get()))) return;
        uv_timer_start(
            self->soon_.get(),
            [](uv_timer_t* t) { static_cast<AdoptedChildReaper*>(t->data)->ReapNow(); }, 0, 0);
      },
      SIGCHLD);
  if (rc != 0) {
    spdlog::error("uv_signal_start(SIGCHLD): {}; orphaned job processes may stay zombies",
                  uv_strerror(rc));
  }
}

void AdoptedChildReaper::ReapNow() {
  // Most SIGCHLDs are ranks', which the launcher has reaped through their
  // pidfds by the time this runs: when no child of ours is a zombie, the
  // scan of every process on the host is skipped.
  siginfo_t zombie{};
  if (waitid(P_ALL, 0, &zombie, WEXITED | WNOHANG | WNOWAIT) != 0 || zombie.si_pid == 0) return;
  // The pids libuv will reap itself: every process handle of the loop.
  std::set<pid_t> libuv_pids;
  uv_walk(
      loop_,
      [](uv_handle_t* h, void* arg) {
        if (h->type != UV_PROCESS) return;
        static_cast<std::set<pid_t>*>(arg)->insert(reinterpret_cast<uv_process_t*>(h)->pid);
      },
      &libuv_pids);
  const pid_t self = getpid();
  const pid_t own_session = getsid(0);
  for (const ProcEntry& e : ListProcesses()) {
    if (e.ppid != self || e.state != 'Z' || libuv_pids.count(e.pid) != 0) continue;
    if (is_rank_ && is_rank_(e.pid)) continue;
    if (e.session == own_session) continue;
    int status = 0;
    pid_t rc;
    do {
      rc = waitpid(e.pid, &status, WNOHANG);
    } while (rc < 0 && errno == EINTR);
    if (rc == e.pid) {
      ++reaped_;
      spdlog::debug("reaped adopted pid={}", e.pid);
    } else if (rc < 0 && errno != ECHILD) {
      // ECHILD: someone else waited for it first (a forked helper's owner).
      spdlog::warn("waitpid({}): {}", e.pid, std::strerror(errno));
    }
  }
}

}  // namespace ltd
