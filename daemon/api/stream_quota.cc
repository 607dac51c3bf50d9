#include "stream_quota.h"

#include "str_util.h"

namespace ltd {

StreamQuota::StreamQuota(size_t max_per_user) : max_per_user_(max_per_user) {}

absl::StatusOr<StreamQuota::Ticket> StreamQuota::Take(uid_t uid) {
  {
    std::lock_guard lock(state_->mu);
    size_t& open = state_->open[uid];
    if (uid != 0 && max_per_user_ > 0 && open >= max_per_user_) {
      return absl::ResourceExhaustedError(Cat(
          "uid ", uid, " has ", open, " streams open, the most one user may (--user-max-streams ",
          max_per_user_, "); end some (logs -f, attach, wait) and try again"));
    }
    ++open;
  }
  // The ticket's deleter gives the stream back; it holds the state alive.
  auto* token = new uid_t(uid);
  return Ticket(token, [state = state_](uid_t* held) {
    {
      std::lock_guard lock(state->mu);
      auto it = state->open.find(*held);
      if (it != state->open.end() && --it->second == 0) state->open.erase(it);
    }
    delete held;
  });
}

size_t StreamQuota::Open(uid_t uid) const {
  std::lock_guard lock(state_->mu);
  auto it = state_->open.find(uid);
  return it == state_->open.end() ? 0 : it->second;
}

}  // namespace ltd
