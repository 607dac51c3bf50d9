#include "process_group_containment.h"

#include <signal.h>

namespace ltd {

void RunSoon(uv_loop_t* loop, std::function<void()> fn) {
  struct Soon {
    uv_timer_t timer;
    std::function<void()> fn;
  };
  auto* soon = new Soon{{}, std::move(fn)};
  soon->timer.data = soon;
  uv_timer_init(loop, &soon->timer);
  uv_timer_start(
      &soon->timer,
      [](uv_timer_t* t) {
        auto* s = static_cast<Soon*>(t->data);
        auto fn = std::move(s->fn);
        uv_close(reinterpret_cast<uv_handle_t*>(t),
                 [](uv_handle_t* h) { delete static_cast<Soon*>(h->data); });
        fn();
      },
      0, 0);
}

void KillProcessGroups(const std::vector<pid_t>& rank_pids) {
  for (pid_t pid : rank_pids) {
    if (pid > 0) kill(-pid, SIGKILL);
  }
}

void ProcessGroupContainment::KillJob(const std::string&, const std::vector<pid_t>& rank_pids) {
  KillProcessGroups(rank_pids);
}

void ProcessGroupContainment::EndJob(const std::string&, std::function<void()> on_empty) {
  RunSoon(loop_, std::move(on_empty));
}

}  // namespace ltd
