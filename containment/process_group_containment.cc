#include "process_group_containment.h"

#include <signal.h>

#include <cerrno>
#include <memory>

#include "uv_handle.h"

namespace ltd {

void RunSoon(uv_loop_t* loop, std::function<void()> fn) {
  struct Soon {
    UvPtr<uv_timer_t> timer;
    std::function<void()> fn;
  };
  auto soon = std::make_unique<Soon>();
  soon->timer = UvInit<uv_timer_t>([&](uv_timer_t* h) { return uv_timer_init(loop, h); });
  if (!soon->timer) {
    fn();  // cannot happen on Linux: uv_timer_init does not fail
    return;
  }
  soon->fn = std::move(fn);
  soon->timer->data = soon.get();
  uv_timer_start(
      soon->timer.get(),
      [](uv_timer_t* t) {
        std::unique_ptr<Soon> s(static_cast<Soon*>(t->data));  // closes the timer when done
        s->fn();
      },
      0, 0);
  (void)soon.release();  // the timer's callback owns it now
}

void KillProcessGroups(const std::vector<pid_t>& rank_pids) {
  for (pid_t pid : rank_pids) {
    // A rank whose start has not made it a session leader yet has no group
    // and is a single process (rank_start.h): killed alone. Its pid is
    // still its own: the caller has not reaped it.
    if (pid > 0 && kill(-pid, SIGKILL) != 0 && errno == ESRCH) kill(pid, SIGKILL);
  }
}

void ProcessGroupContainment::KillJob(const std::string&, const std::vector<pid_t>& rank_pids) {
  KillProcessGroups(rank_pids);
}

void ProcessGroupContainment::EndJob(const std::string&, std::function<void()> on_empty) {
  RunSoon(loop_, std::move(on_empty));
}

}  // namespace ltd
