#include "spare_pool.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "pidfd.h"
#include "spdlog/spdlog.h"

namespace ltd {

void SparePool::Prepare(std::chrono::milliseconds delay) {
  if (!on_ || spare_ || (timer_ && uv_is_active(reinterpret_cast<uv_handle_t*>(timer_.get())))) {
    return;
  }
  if (!timer_) {
    timer_ = UvInit<uv_timer_t>([&](uv_timer_t* t) { return uv_timer_init(loop_.get(), t); });
    if (!timer_) return;
    timer_->data = this;
  }
  // At the earliest after what this turn of the loop is doing.
  uv_timer_start(
      timer_.get(), [](uv_timer_t* t) { static_cast<SparePool*>(t->data)->Start(); },
      static_cast<uint64_t>(delay.count()), 0);
}

void SparePool::Start() {
  if (!on_ || spare_) return;
  auto spare = std::make_unique<Spare>();
  auto spawned = spawn_(&spare->assign);
  if (!spawned.ok()) {
    spdlog::warn("cannot start a spare supervisor ({}); each job's starts with it",
                 std::string(spawned.status().message()));
    return;
  }
  spare->process = std::move(*spawned);
  // Idle priority from now until it has a job: its start-up (mapping,
  // relocating, static initialisers) takes no CPU that work wants. It has
  // one thread until then, whose id is its pid.
  const sched_param idle{};
  if (sched_setscheduler(spare->process.pid, SCHED_IDLE, &idle) != 0) {
    spdlog::debug("spare supervisor pid {} stays at normal priority: {}", spare->process.pid,
                  std::strerror(errno));
  }
  spare->exit_poll = UvInit<uv_poll_t>(
      [&](uv_poll_t* p) { return uv_poll_init(loop_.get(), p, spare->process.pidfd.get()); });
  if (spare->exit_poll) {
    spare->exit_poll->data = this;
    uv_poll_start(spare->exit_poll.get(), UV_READABLE,
                  [](uv_poll_t* p, int, int) { static_cast<SparePool*>(p->data)->OnExit(); });
  }
  spdlog::debug("spare supervisor pid {} started", spare->process.pid);
  spare_ = std::move(spare);
}

void SparePool::OnExit() {
  // It had no job: nothing of anyone's is lost. The next job starts its
  // own supervisor and prepares another spare.
  siginfo_t info{};
  if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(spare_->process.pidfd.get()), &info,
             WEXITED | WNOHANG) != 0 ||
      info.si_pid == 0) {
    return;
  }
  spdlog::warn("spare supervisor pid {} {}", spare_->process.pid, ExitText(info));
  spare_.reset();
}

std::optional<SpawnedShim> SparePool::Take(const std::string& job_id) {
  if (!spare_) return std::nullopt;
  spare_->exit_poll.reset();
  // Normal priority before it reads its job: from then on it is the job's
  // supervisor, and starts threads that would inherit the idle policy.
  const sched_param normal{};
  if (sched_setscheduler(spare_->process.pid, SCHED_OTHER, &normal) != 0) {
    spdlog::warn(
        "cannot give the spare supervisor normal priority ({}); supervisors start with "
        "their jobs from now on",
        std::strerror(errno));
    on_ = false;
    Kill();
    return std::nullopt;
  }
  const std::string line = job_id + "\n";
  if (write(spare_->assign.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    Kill();  // it died since it was last polled (EPIPE; ltd ignores SIGPIPE)
    return std::nullopt;
  }
  SpawnedShim taken = std::move(spare_->process);
  spare_.reset();
  return taken;
}

void SparePool::Kill() {
  if (!spare_) return;
  spare_->exit_poll.reset();
  PidfdSendSignal(spare_->process.pidfd.get(), SIGKILL);
  siginfo_t info{};
  while (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(spare_->process.pidfd.get()),
                &info, WEXITED) != 0 &&
         errno == EINTR) {
  }
  spare_.reset();
}

}  // namespace ltd
