// Ranks that would not die: a job ends without them (its record lists
// them, Job::unkillable), but its device slots stay out of use until every
// one of them is gone, since a process in the kernel's uninterruptible
// sleep may still hold its GPU. The watch looks at each of them again on a
// timer (a bounded number of /proc reads a turn, never a wait) and says
// when a job's last one is gone. Loop thread only; no libuv, so its tests
// drive it with a fake clock and a fake /proc.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "clock.h"
#include "job.h"

namespace ltd {

class UnkillableWatch {
 public:
  // Whether the process is still there (not gone, not a zombie, and the
  // same one: its start time is the one recorded).
  using Alive = std::function<bool(const UnkillableProcess&)>;
  // The job's last unkillable process is gone: its slots may be used.
  using Gone = std::function<void(const std::string& job_id, const std::vector<int>& slots)>;
  static constexpr Millis kRecheck{1000};
  static constexpr size_t kMaxChecksPerTurn = 256;

  UnkillableWatch(Clock& clock, Alive alive, Gone gone);
  ~UnkillableWatch();
  UnkillableWatch(const UnkillableWatch&) = delete;
  UnkillableWatch& operator=(const UnkillableWatch&) = delete;

  // Watches `job`'s unkillable processes not yet gone; false when there
  // are none (then its slots are free at once).
  bool Add(const Job& job);
  // The job whose unkillable processes hold `slot`; "" when none do.
  std::string Holding(int slot) const;
  // That job's user (Job::user); "" when none hold it.
  std::string HoldingUser(int slot) const;
  // The processes that hold `slot`, not seen gone yet (empty: none).
  std::vector<UnkillableProcess> HoldingProcesses(int slot) const;
  size_t jobs() const { return jobs_.size(); }

 private:
  struct Held {
    std::vector<int> slots;
    std::string user;
    std::vector<UnkillableProcess> processes;  // those not seen gone yet
  };
  void Arm();
  void Check();

  Clock& clock_;
  Alive alive_;
  Gone gone_;
  std::map<std::string, Held> jobs_;
  std::string next_;  // where the next turn goes on (a turn checks a bounded number)
  Clock::TimerId timer_ = 0;
};

// UnkillableWatch::Alive from /proc.
bool ProcessStillThere(const UnkillableProcess& p);

}  // namespace ltd
