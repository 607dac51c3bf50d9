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

struct AdoptedChildReaper::Handles {
  uv_signal_t sigchld{};
  // SIGCHLD comes once per child; a burst of 200 dying children is
  // coalesced into one /proc scan on the next loop iteration.
  uv_timer_t soon{};
  AdoptedChildReaper* owner = nullptr;  // null once the owner is gone
  int open = 2;
  bool scheduled = false;
};

AdoptedChildReaper::AdoptedChildReaper(uv_loop_t* loop) : loop_(loop), handles_(new Handles) {
  handles_->owner = this;
  handles_->sigchld.data = handles_;
  handles_->soon.data = handles_;
  uv_timer_init(loop_, &handles_->soon);
  uv_signal_init(loop_, &handles_->sigchld);
  // Several SIGCHLD watchers may coexist: libuv's own for its processes
  // and this one.
  const int rc = uv_signal_start(
      &handles_->sigchld,
      [](uv_signal_t* h, int) {
        auto* hs = static_cast<Handles*>(h->data);
        if (hs->owner == nullptr || hs->scheduled) return;
        hs->scheduled = true;
        uv_timer_start(
            &hs->soon,
            [](uv_timer_t* t) {
              auto* hs = static_cast<Handles*>(t->data);
              hs->scheduled = false;
              if (hs->owner != nullptr) hs->owner->ReapNow();
            },
            0, 0);
      },
      SIGCHLD);
  if (rc != 0) {
    spdlog::error("uv_signal_start(SIGCHLD): {}; orphaned job processes may stay zombies",
                  uv_strerror(rc));
  }
}

AdoptedChildReaper::~AdoptedChildReaper() {
  handles_->owner = nullptr;
  auto on_closed = [](uv_handle_t* h) {
    auto* hs = static_cast<Handles*>(h->data);
    if (--hs->open == 0) delete hs;
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&handles_->sigchld), on_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&handles_->soon), on_closed);
}

void AdoptedChildReaper::ReapNow() {
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
