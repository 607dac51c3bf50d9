#include "helper_reaper.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdint>
#include <system_error>
#include <thread>

#include "spdlog/spdlog.h"

namespace ltd {

HelperReaper& HelperReaper::Get() {
  // Never destroyed: its thread may poll until the process exits.
  static HelperReaper* reaper = new HelperReaper();
  return *reaper;
}

HelperReaper::HelperReaper() : wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

bool HelperReaper::Reserve(uid_t uid, int max) {
  std::lock_guard lock(mu_);
  int& n = alive_[uid];
  if (n >= max) return false;
  ++n;
  return true;
}

void HelperReaper::Unreserve(uid_t uid) {
  std::lock_guard lock(mu_);
  if (--alive_[uid] <= 0) alive_.erase(uid);
}

int HelperReaper::alive(uid_t uid) const {
  std::lock_guard lock(mu_);
  auto it = alive_.find(uid);
  return it == alive_.end() ? 0 : it->second;
}

bool HelperReaper::Reaped(const Helper& h) {
  siginfo_t info{};
  const int rc = h.pidfd.valid()
                     ? waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(h.pidfd.get()),
                              &info, WEXITED | WNOHANG)
                     : waitid(P_PID, static_cast<id_t>(h.pid), &info, WEXITED | WNOHANG);
  // ECHILD: someone reaped it already (no child of ours any more).
  if (rc != 0) return errno != EINTR;
  return info.si_pid != 0;
}

void HelperReaper::Adopt(uid_t uid, pid_t pid, Fd pidfd) {
  Helper h{uid, pid, std::move(pidfd)};
  if (Reaped(h)) {  // most have exited already: no thread needed for them
    Unreserve(uid);
    return;
  }
  std::lock_guard lock(mu_);
  adopted_.push_back(std::move(h));
  if (!thread_ && wake_.valid()) {
    try {
      std::thread([this] { Run(); }).detach();
      thread_ = true;
    } catch (const std::system_error& e) {
      spdlog::warn("no thread to reap helpers ({}); one is reaped with the next", e.what());
    }
  }
  const uint64_t one = 1;
  if (wake_.valid()) (void)!write(wake_.get(), &one, sizeof one);
}

void HelperReaper::Run() {
  std::vector<pollfd> fds;
  for (;;) {
    bool polled_all = true;
    {
      std::lock_guard lock(mu_);
      // Whatever ended since the last look goes (the pidfd closed here,
      // by the thread alone, so the fds polled below stay these).
      for (size_t i = 0; i < adopted_.size();) {
        if (Reaped(adopted_[i])) {
          if (--alive_[adopted_[i].uid] <= 0) alive_.erase(adopted_[i].uid);
          adopted_[i] = std::move(adopted_.back());
          adopted_.pop_back();
        } else {
          ++i;
        }
      }
      fds.assign(1, pollfd{wake_.get(), POLLIN, 0});
      for (const Helper& h : adopted_) {
        if (h.pidfd.valid()) {
          fds.push_back(pollfd{h.pidfd.get(), POLLIN, 0});
        } else {
          polled_all = false;
        }
      }
    }
    // Without pidfds (kernels before 5.3), a look every second.
    if (poll(fds.data(), fds.size(), polled_all ? -1 : 1000) > 0 && (fds[0].revents & POLLIN)) {
      uint64_t n;
      (void)!read(wake_.get(), &n, sizeof n);
    }
  }
}

}  // namespace ltd
