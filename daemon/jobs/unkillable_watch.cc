#include "unkillable_watch.h"

#include <iterator>

#include "process_scan.h"
#include "spdlog/spdlog.h"

namespace ltd {

UnkillableWatch::UnkillableWatch(Clock& clock, Alive alive, Gone gone)
    : clock_(clock), alive_(std::move(alive)), gone_(std::move(gone)) {}

UnkillableWatch::~UnkillableWatch() {
  if (timer_ != 0) clock_.CancelTimer(timer_);
}

bool UnkillableWatch::Add(const Job& job) {
  Held held;
  held.slots = job.device_slots;
  held.user = job.user;
  for (const UnkillableProcess& p : job.unkillable) {
    if (!p.gone_at) held.processes.push_back(p);
  }
  if (held.processes.empty()) return false;
  jobs_[job.id] = std::move(held);
  Arm();
  return true;
}

std::string UnkillableWatch::Holding(int slot) const {
  for (const auto& [id, held] : jobs_) {
    for (int s : held.slots) {
      if (s == slot) return id;
    }
  }
  return "";
}

std::string UnkillableWatch::HoldingUser(int slot) const {
  const std::string id = Holding(slot);
  return id.empty() ? "" : jobs_.at(id).user;
}

std::vector<UnkillableProcess> UnkillableWatch::HoldingProcesses(int slot) const {
  const std::string id = Holding(slot);
  return id.empty() ? std::vector<UnkillableProcess>{} : jobs_.at(id).processes;
}

void UnkillableWatch::Arm() {
  if (timer_ != 0 || jobs_.empty()) return;
  timer_ = clock_.StartTimer(kRecheck, [this] {
    timer_ = 0;
    Check();
    Arm();
  });
}

void UnkillableWatch::Check() {
  size_t budget = kMaxChecksPerTurn;
  std::vector<std::string> done;
  // From where the last turn stopped, round the jobs once at most.
  auto it = jobs_.lower_bound(next_);
  for (size_t seen = 0; seen < jobs_.size() && budget > 0; ++seen) {
    if (it == jobs_.end()) it = jobs_.begin();
    Held& held = it->second;
    // Those not looked at this turn go first next turn.
    std::vector<UnkillableProcess> later, still;
    for (UnkillableProcess& p : held.processes) {
      if (budget == 0) {
        later.push_back(std::move(p));
        continue;
      }
      --budget;
      if (alive_(p)) {
        still.push_back(std::move(p));
      } else {
        spdlog::info("job={} rank={} pid={} that would not die is gone", it->first, p.rank, p.pid);
      }
    }
    later.insert(later.end(), std::make_move_iterator(still.begin()),
                 std::make_move_iterator(still.end()));
    held.processes = std::move(later);
    if (held.processes.empty()) done.push_back(it->first);
    ++it;
  }
  next_ = it == jobs_.end() ? "" : it->first;
  for (const std::string& id : done) {
    auto found = jobs_.find(id);
    const std::vector<int> slots = std::move(found->second.slots);
    jobs_.erase(found);
    gone_(id, slots);  // may Add again
  }
}

bool ProcessStillThere(const UnkillableProcess& p) {
  const std::optional<ProcEntry> e = ReadProcEntry(p.pid);
  return e && e->state != 'Z' && e->state != 'X' &&
         (p.start_time == 0 || e->start_time == p.start_time);
}

}  // namespace ltd
