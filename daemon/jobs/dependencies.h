// --after and --dependency: jobs that wait for others to succeed (afterok),
// end (afterany) or fail (afternotok) before they may queue for devices
// (model/dependency.h). Pure bookkeeping, no clock, no I/O: the job manager asks and
// acts. A waiting job names only jobs that existed when it was submitted,
// so the graph cannot have a cycle.
#pragma once

#include <sys/types.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "dependency.h"
#include "job.h"

namespace ltd {

class Dependencies {
 public:
  // `id` of user `uid` waits until each job in `unmet` ended as its kind
  // asks.
  void AddKinds(const std::string& id, uid_t uid, std::map<std::string, DependencyKind> unmet);
  // `id` waits until every job in `unmet` has succeeded (afterok).
  void Add(const std::string& id, uid_t uid, const std::set<std::string>& unmet);
  bool Waiting(const std::string& id) const { return waiters_.count(id) != 0; }
  // The jobs `id` still waits for, by id, in submission order.
  std::vector<std::string> Unmet(const std::string& id) const;
  // How many jobs of `uid` wait (they count toward its pending limit).
  size_t waiting(uid_t uid) const;

  struct Outcome {
    std::vector<std::string> ready;   // nothing left to wait for: queue them
    std::vector<std::string> failed;  // waited for it in vain: cancel them
  };
  // Job `id` ended in `state` (final).
  Outcome Ended(const std::string& id, JobState state);
  Outcome Ended(const std::string& id, bool succeeded) {
    return Ended(id, succeeded ? JobState::kSucceeded : JobState::kFailed);
  }
  // `id` will not run (cancelled while it waited): forget it.
  void Remove(const std::string& id);

 private:
  struct Waiter {
    uid_t uid = 0;
    std::map<std::string, DependencyKind> unmet;
  };
  std::map<std::string, Waiter> waiters_;                    // by waiting job
  std::map<std::string, std::set<std::string>> dependents_;  // job -> who waits for it
};

}  // namespace ltd
