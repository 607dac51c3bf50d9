#include "scheduler.h"

#include <algorithm>
#include <utility>

#include "str_util.h"

namespace ltd {

Scheduler::Scheduler(SchedulerConfig config)
    : config_(std::move(config)),
      busy_(static_cast<size_t>(std::max(config_.slots, 0)), false),
      unavailable_(busy_.size(), false) {}

void Scheduler::SetUnavailable(int slot, bool unavailable) {
  if (slot >= 0 && static_cast<size_t>(slot) < unavailable_.size())
    unavailable_[static_cast<size_t>(slot)] = unavailable;
}

void Scheduler::ChargeQuarantine(const std::string& id, uid_t uid, int devices) {
  if (quarantined_.contains(id)) return;
  quarantined_[id] = Charged{uid, devices};
  User& user = users_[uid];
  ++user.quarantined;
  user.devices += devices;
}

void Scheduler::EndQuarantine(const std::string& id) {
  auto it = quarantined_.find(id);
  if (it == quarantined_.end()) return;
  const Charged c = it->second;
  quarantined_.erase(it);
  User& user = users_[c.uid];
  --user.quarantined;
  user.devices -= c.devices;
  if (user.queue.empty() && user.counted() == 0) users_.erase(c.uid);
}

absl::Status Scheduler::MayQueue(uid_t uid, const std::string& user, size_t also_waiting,
                                 size_t adding) const {
  const int limit = config_.user_max_pending_jobs;
  const size_t waiting = pending(uid) + also_waiting;
  if (limit > 0 && adding > 1 && waiting + adding > static_cast<size_t>(limit)) {
    return absl::ResourceExhaustedError(
        Cat("user ", user, " has ", waiting, " pending jobs and the array would add ", adding,
            ", past the limit of this ltd, ", limit,
            " (--user-max-pending-jobs); submit a smaller array, or wait for some to start"));
  }
  if (limit > 0 && waiting >= static_cast<size_t>(limit)) {
    return absl::ResourceExhaustedError(
        Cat("user ", user, " already has ", waiting,
            " pending jobs, the limit of this ltd (--user-max-pending-jobs); wait for some to "
            "start or cancel them"));
  }
  return absl::OkStatus();
}

void Scheduler::Enqueue(const std::string& id, uint64_t seq, uid_t uid, int devices,
                        ArrayGate gate) {
  queued_[id] = Queued{seq, uid, devices, std::move(gate)};
  users_[uid].queue.push_back(id);
}

void Scheduler::Dequeue(const std::string& id) {
  auto it = queued_.find(id);
  if (it == queued_.end()) return;
  const uid_t uid = it->second.uid;
  User& user = users_[uid];
  user.queue.erase(std::remove(user.queue.begin(), user.queue.end(), id), user.queue.end());
  queued_.erase(it);
  if (user.queue.empty() && user.counted() == 0) users_.erase(uid);
}

bool Scheduler::Throttled(const Queued& q) const {
  return q.gate.throttle > 0 && !q.gate.array.empty() &&
         array_running(q.gate.array) >= static_cast<int>(q.gate.throttle);
}

std::deque<std::string>::const_iterator Scheduler::Head(const User& user) const {
  // Tasks of one array queue together: the scan passes over a throttled
  // array's tasks, at most the user's pending limit of them.
  return std::find_if(user.queue.begin(), user.queue.end(),
                      [&](const std::string& id) { return !Throttled(queued_.at(id)); });
}

int Scheduler::array_running(const std::string& array) const {
  auto it = array_running_.find(array);
  return it == array_running_.end() ? 0 : it->second;
}

std::vector<Scheduler::Placement> Scheduler::Place() {
  std::vector<Placement> placed;
  for (;;) {
    // Each user's oldest job, unless the user is at its running limit.
    std::vector<std::pair<uid_t, const Queued*>> heads;
    for (auto& [uid, user] : users_) {
      if (user.queue.empty()) continue;
      if (config_.user_max_running_jobs > 0 && user.counted() >= config_.user_max_running_jobs)
        continue;
      const auto head = Head(user);
      if (head == user.queue.end()) continue;
      heads.emplace_back(uid, &queued_.at(*head));
    }
    // The user holding the fewest devices first; then the one served least
    // recently; then the oldest job.
    std::sort(heads.begin(), heads.end(), [&](const auto& a, const auto& b) {
      const User& ua = users_[a.first];
      const User& ub = users_[b.first];
      if (ua.devices != ub.devices) return ua.devices < ub.devices;
      if (ua.served != ub.served) return ua.served < ub.served;
      return a.second->seq < b.second->seq;
    });
    const int free = free_slots();
    auto fits = std::find_if(heads.begin(), heads.end(),
                             [&](const auto& h) { return h.second->devices <= free; });
    if (fits == heads.end()) return placed;
    User& user = users_[fits->first];
    Placement p;
    const auto head = Head(user);
    p.id = *head;
    const int devices = fits->second->devices;
    const std::string array = fits->second->gate.array;
    for (size_t i = 0; i < busy_.size() && static_cast<int>(p.slots.size()) < devices; ++i) {
      if (busy_[i] || unavailable_[i]) continue;
      busy_[i] = true;
      p.slots.push_back(static_cast<int>(i));
    }
    if (!config_.gpu_ids.empty()) {
      std::vector<std::string> ids;
      for (int slot : p.slots) ids.push_back(config_.gpu_ids[static_cast<size_t>(slot)]);
      p.cuda_visible_devices = Join(ids, ",");
    }
    user.queue.erase(head);
    if (!array.empty()) {
      ++array_running_[array];
      array_of_[p.id] = array;
    }
    last_placed_ = {p.id, user.served};
    user.served = ++placements_;
    ++user.running;
    user.devices += devices;
    held_[p.id] = p.slots;
    owner_[p.id] = fits->first;
    queued_.erase(p.id);
    placed.push_back(std::move(p));
  }
}

bool Scheduler::PlacesAtOnce(uid_t uid, int devices) const {
  if (!queued_.empty()) return false;
  if (config_.user_max_running_jobs > 0) {
    const auto user = users_.find(uid);
    if (user != users_.end() && user->second.counted() >= config_.user_max_running_jobs)
      return false;
  }
  return devices <= free_slots();
}

void Scheduler::Hold(const std::string& id, uid_t uid, const std::vector<int>& slots,
                     const std::string& array) {
  if (!array.empty() && !array_of_.contains(id)) {
    ++array_running_[array];
    array_of_[id] = array;
  }
  std::vector<int> held;
  for (int slot : slots) {
    // A record is the supervisor's word, not ltd's: never trust a slot
    // outside this ltd's range or one already taken.
    if (slot < 0 || slot >= static_cast<int>(busy_.size()) || busy_[static_cast<size_t>(slot)])
      continue;
    busy_[static_cast<size_t>(slot)] = true;
    held.push_back(slot);
  }
  User& user = users_[uid];
  ++user.running;
  user.devices += static_cast<int>(held.size());
  owner_[id] = uid;
  held_[id] = std::move(held);
}

void Scheduler::Release(const std::string& id) {
  auto held = held_.find(id);
  if (held == held_.end()) return Dequeue(id);
  if (auto a = array_of_.find(id); a != array_of_.end()) {
    if (--array_running_[a->second] <= 0) array_running_.erase(a->second);
    array_of_.erase(a);
  }
  for (int slot : held->second) busy_[static_cast<size_t>(slot)] = false;
  User& user = users_[owner_.at(id)];
  --user.running;
  user.devices -= static_cast<int>(held->second.size());
  if (user.queue.empty() && user.counted() == 0) users_.erase(owner_.at(id));
  owner_.erase(id);
  held_.erase(held);
}

void Scheduler::Unplace(const std::string& id) {
  const auto owner = owner_.find(id);
  if (owner == owner_.end()) return Dequeue(id);
  const uid_t uid = owner->second;
  const LastPlaced last = std::exchange(last_placed_, {});
  Release(id);
  if (last.id != id) return;
  --placements_;
  if (auto user = users_.find(uid); user != users_.end()) user->second.served = last.served_before;
}

std::string Scheduler::WhyPending(const std::string& id) const {
  auto q = queued_.find(id);
  if (q == queued_.end()) return "";
  const auto u = users_.find(q->second.uid);
  if (u == users_.end()) return "";
  const User& user = u->second;
  if (config_.user_max_running_jobs > 0 && user.counted() >= config_.user_max_running_jobs) {
    if (user.quarantined == 0) return Cat("user limit: ", user.running, " running");
    return Cat("user limit: ", user.counted(), " running, ", user.quarantined,
               " of them ended with processes that would not die (their devices are quarantined)");
  }
  if (Throttled(q->second)) {
    return Cat("array throttle: ", array_running(q->second.gate.array), " of ",
               q->second.gate.tasks, " tasks running");
  }
  if (const auto head = Head(user); head != user.queue.end() && *head != id) {
    return Cat("behind job ", *head, " of the same user");
  }
  const int free = free_slots();
  if (q->second.devices > free) {
    return Cat("needs ", q->second.devices, q->second.devices == 1 ? " device, " : " devices, ",
               free, " free");
  }
  return "waiting for its turn";
}

size_t Scheduler::pending(uid_t uid) const {
  auto it = users_.find(uid);
  return it == users_.end() ? 0 : it->second.queue.size();
}

int Scheduler::free_slots() const {
  int free = 0;
  for (size_t i = 0; i < busy_.size(); ++i) free += !busy_[i] && !unavailable_[i] ? 1 : 0;
  return free;
}

}  // namespace ltd
