#include "user_waits.h"

#include <thread>

#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

UserWaits::~UserWaits() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [this] { return total_ == 0; });
}

absl::Status UserWaits::Run(uid_t uid, std::function<void()> work) {
  {
    std::lock_guard lock(mu_);
    int& mine = running_[uid];
    if (mine >= per_user_) {
      return absl::ResourceExhaustedError(Cat(
          "too many ", what_, ": ", mine, " of yours are waiting on their file system (at most ",
          per_user_, " at once); wait for them to be answered and submit again"));
    }
    if (total_ >= in_all_) {
      if (mine == 0) running_.erase(uid);
      return absl::ResourceExhaustedError(Cat("too many ", what_, " on this server (", total_,
                                              " of all users'); try again in a few seconds"));
    }
    ++mine;
    ++total_;
  }
  try {
    std::thread([this, uid, work = std::move(work)]() mutable {
      work();
      work = nullptr;  // what it holds goes before the service may
      Done(uid);
    }).detach();
  } catch (const std::system_error& e) {
    // No thread to be had (the host's thread limit): refused as a bound is.
    Done(uid);
    spdlog::warn("a thread for {}: {}", what_, e.what());
    return absl::ResourceExhaustedError(
        Cat("ltd cannot start a thread for ", what_, " now; try again in a few seconds"));
  }
  return absl::OkStatus();
}

void UserWaits::Done(uid_t uid) {
  std::lock_guard lock(mu_);
  auto it = running_.find(uid);
  if (it != running_.end() && --it->second <= 0) running_.erase(it);
  // Notified under the lock: the destructor may return, and the condition
  // variable go, as soon as it sees total_ == 0.
  if (--total_ == 0) idle_.notify_all();
}

int UserWaits::Running(uid_t uid) const {
  std::lock_guard lock(mu_);
  auto it = running_.find(uid);
  return it == running_.end() ? 0 : it->second;
}

}  // namespace ltd
