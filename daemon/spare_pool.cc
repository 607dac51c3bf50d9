#include "spare_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "pidfd.h"
#include "spare_wire.h"
#include "spdlog/spdlog.h"

namespace ltd {

template <void (SparePool::*kOn)(SparePool::Spare*)>
bool SparePool::Poll(UvPtr<uv_poll_t>& poll, int fd, Spare* spare) {
  if (!poll) {
    poll = UvInit<uv_poll_t>([&](uv_poll_t* p) { return uv_poll_init(loop_.get(), p, fd); });
    if (!poll) return false;
  }
  poll->data = spare;
  // Started already: as it is (a start stops it first, and then each is a
  // system call).
  if (uv_is_active(reinterpret_cast<uv_handle_t*>(poll.get()))) return true;
  return uv_poll_start(poll.get(), UV_READABLE, [](uv_poll_t* p, int, int) {
           auto* s = static_cast<Spare*>(p->data);
           (s->pool->*kOn)(s);
         }) == 0;
}

void SparePool::Prepare(std::chrono::milliseconds delay) {
  if (!on_ || !spares_.empty() ||
      (timer_ && uv_is_active(reinterpret_cast<uv_handle_t*>(timer_.get())))) {
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

absl::StatusOr<std::unique_ptr<SparePool::Spare>> SparePool::StartOne() {
  auto spare = std::make_unique<Spare>();
  auto spawned = spawn_(&spare->assign);
  if (!spawned.ok()) return spawned.status();
  spare->process = std::move(*spawned);
  spdlog::debug("spare supervisor pid {} started", spare->process.pid);
  return spare;
}

void SparePool::Start() {
  if (!on_ || !spares_.empty()) return;
  auto spare = StartOne();
  if (!spare.ok()) {
    spdlog::warn("cannot start a spare supervisor ({}); each job's starts with it",
                 std::string(spare.status().message()));
    return;
  }
  Keep(std::move(*spare));
}

void SparePool::Keep(std::unique_ptr<Spare> spare) {
  // Idle priority from now until it has a job: its start-up (mapping,
  // static initialisers) takes no CPU that work wants. It has one thread
  // until then (one again once free: shim/spare.h), whose id is its pid.
  const sched_param idle{};
  if (sched_setscheduler(spare->process.pid, SCHED_IDLE, &idle) != 0) {
    spdlog::debug("spare supervisor pid {} stays at normal priority: {}", spare->process.pid,
                  std::strerror(errno));
  }
  spare->pool = this;
  spare->since = std::chrono::steady_clock::now();
  if (!Poll<&SparePool::OnExit>(spare->exit_poll, spare->process.pidfd.get(), spare.get())) {
    // Not watched, it could die unseen: it goes now.
    return KillOne(std::move(spare));
  }
  spares_.push_back(std::move(spare));
  if (spares_.size() > 1 && !trim_timer_) {
    trim_timer_ = UvInit<uv_timer_t>([&](uv_timer_t* t) { return uv_timer_init(loop_.get(), t); });
    if (!trim_timer_) return;
    trim_timer_->data = this;
    const auto every = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(kIdleLimit).count());
    uv_timer_start(
        trim_timer_.get(), [](uv_timer_t* t) { static_cast<SparePool*>(t->data)->Trim(); }, every,
        every);
    uv_unref(reinterpret_cast<uv_handle_t*>(trim_timer_.get()));
  }
}

void SparePool::OnExit(Spare* spare) {
  if (spare->lent) {
    // Its job's watcher reaps it and says why; the EOF on its socket
    // lets it go from here (OnWord). Until then this poll rests.
    uv_poll_stop(spare->exit_poll.get());
    return;
  }
  // It had no job: nothing of anyone's is lost. The next job takes
  // another, or starts its own supervisor and prepares another spare.
  siginfo_t info{};
  if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(spare->process.pidfd.get()), &info,
             WEXITED | WNOHANG) != 0) {
    if (errno != ECHILD) return;  // reaped already: gone all the same
  } else if (info.si_pid == 0) {
    return;
  } else if (!spare->retiring) {
    spdlog::warn("spare supervisor pid {} {}", spare->process.pid, ExitText(info));
  }
  std::erase_if(spare->retiring ? retiring_ : spares_,
                [&](const auto& s) { return s.get() == spare; });
}

void SparePool::Retire(std::unique_ptr<Spare> spare) {
  spare->word_poll.reset();
  PidfdSendSignal(spare->process.pidfd.get(), SIGKILL);
  spare->pool = this;
  spare->retiring = true;
  if (!Poll<&SparePool::OnExit>(spare->exit_poll, spare->process.pidfd.get(), spare.get())) {
    return KillOne(std::move(spare));  // reaped now, then
  }
  retiring_.push_back(std::move(spare));
}

std::optional<SpawnedShim> SparePool::Take(const std::string& job_id) {
  if (!on_) return std::nullopt;
  std::unique_ptr<Spare> spare;
  if (spares_.empty()) {
    // None waits: one started now, at normal priority, which takes this
    // job at once and serves the next ones too.
    auto started = StartOne();
    // The job starts its own as it would without spares, and says why not.
    if (!started.ok()) return std::nullopt;
    spare = std::move(*started);
  } else {
    spare = std::move(spares_.back());
    spares_.pop_back();
    // Normal priority before it reads its job: from then on it is the
    // job's supervisor, and starts threads that would inherit the policy.
    const sched_param normal{};
    if (sched_setscheduler(spare->process.pid, SCHED_OTHER, &normal) != 0) {
      spdlog::warn(
          "cannot give a spare supervisor normal priority ({}); supervisors start with "
          "their jobs from now on",
          std::strerror(errno));
      on_ = false;
      KillOne(std::move(spare));
      Kill();
      return std::nullopt;
    }
  }
  auto connection = ShimConnection();
  if (!connection.ok()) {
    spdlog::warn("job={} cannot give a spare supervisor the job: {}", job_id,
                 std::string(connection.status().message()));
    KillOne(std::move(spare));
    return std::nullopt;
  }
  if (!SendJob(spare->assign.get(), job_id, connection->second.get()).ok()) {
    KillOne(std::move(spare));  // it died since it was last polled
    return std::nullopt;
  }
  // The job's watcher reaps it by a copy of the pool's pidfd. Without a
  // copy it is not taken back: it exits after its job (EOF on its socket).
  Fd copy(fcntl(spare->process.pidfd.get(), F_DUPFD_CLOEXEC, 0));
  if (!copy.valid())
    return SpawnedShim{spare->process.pid, std::move(spare->process.pidfd),
                       std::move(connection->first)};
  SpawnedShim taken{spare->process.pid, std::move(copy), std::move(connection->first)};
  spare->pool = this;
  if (Poll<&SparePool::OnWord>(spare->word_poll, spare->assign.get(), spare.get())) {
    spare->lent = true;
    lent_.push_back(std::move(spare));
  }
  return taken;
}

void SparePool::OnWord(Spare* spare) {
  const SpareWord word = ReadSpareWord(spare->assign.get());
  if (word == SpareWord::kNothingYet) return;
  if (!spare->lent) {
    // It says nothing while it waits: this is its end (EOF), and its exit
    // poll reaps it. Until then this poll rests.
    if (word == SpareWord::kGone) uv_poll_stop(spare->word_poll.get());
    return;
  }
  auto it =
      std::find_if(lent_.begin(), lent_.end(), [&](const auto& l) { return l.get() == spare; });
  if (it == lent_.end()) return;
  std::unique_ptr<Spare> back = std::move(*it);
  lent_.erase(it);
  back->lent = false;
  // Gone: it exits after its job, as any supervisor does, and what
  // watched it reaps it.
  if (word == SpareWord::kGone) return;
  // Its job's watcher lets go of it first: from then on only this pool
  // reaps it, so that its pid is its own while it lives (or is a zombie).
  freed_(back->process.pid);
  pollfd exited{back->process.pidfd.get(), POLLIN, 0};
  if (poll(&exited, 1, 0) != 0) {
    siginfo_t info{};
    (void)waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(back->process.pidfd.get()),
                 &info, WEXITED | WNOHANG);
    return;
  }
  // Its exit poll rested if it died meanwhile: the check above saw that.
  if (!on_ || spares_.size() >= kMaxSpares) return Retire(std::move(back));
  spdlog::debug("supervisor pid {} is free again: a spare", back->process.pid);
  Keep(std::move(back));
}

void SparePool::Trim() {
  // The first to wait go first, but the last one: the next job's.
  const auto now = std::chrono::steady_clock::now();
  while (spares_.size() > 1 && now - spares_.front()->since >= kIdleLimit) {
    std::unique_ptr<Spare> oldest = std::move(spares_.front());
    spares_.erase(spares_.begin());
    Retire(std::move(oldest));
  }
  if (spares_.size() <= 1) trim_timer_.reset();
}

void SparePool::Kill() {
  for (auto* all : {&spares_, &retiring_}) {
    for (auto& spare : *all) KillOne(std::move(spare));
    all->clear();
  }
}

void SparePool::KillOne(std::unique_ptr<Spare> spare) {
  spare->exit_poll.reset();
  PidfdSendSignal(spare->process.pidfd.get(), SIGKILL);
  siginfo_t info{};
  while (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(spare->process.pidfd.get()),
                &info, WEXITED) != 0 &&
         errno == EINTR) {
  }
}

}  // namespace ltd
