#include "live_bytes.h"

namespace ltd {

void LiveBytes::Waiting(const std::string& id, uid_t uid, uint64_t bytes) {
  NotWaiting(id);
  waiting_.emplace(id, Entry{uid, bytes});
  waiting_usage_[uid] += bytes;
}

void LiveBytes::NotWaiting(const std::string& id) {
  auto it = waiting_.find(id);
  if (it == waiting_.end()) return;
  auto user = waiting_usage_.find(it->second.uid);
  if (user != waiting_usage_.end()) {
    user->second -= std::min(user->second, it->second.bytes);
    // A user with nothing live is no user of the state dir for this.
    if (user->second == 0) waiting_usage_.erase(user);
  }
  waiting_.erase(it);
}

FinishedJobs::Usage LiveBytes::Total(std::chrono::milliseconds now,
                                     const std::function<FinishedJobs::Usage()>& measure_placed) {
  if (!placed_at_ || now - *placed_at_ >= kRemeasure || now < *placed_at_) {
    placed_usage_ = measure_placed();
    placed_at_ = now;
  }
  FinishedJobs::Usage total = waiting_usage_;
  for (const auto& [uid, bytes] : placed_usage_) total[uid] += bytes;
  return total;
}

}  // namespace ltd
