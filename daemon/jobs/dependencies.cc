#include "dependencies.h"

#include <algorithm>

namespace ltd {
namespace {

// Job ids count up: shorter is older, then by text.
bool OlderId(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

}  // namespace

void Dependencies::AddKinds(const std::string& id, uid_t uid,
                            std::map<std::string, DependencyKind> unmet) {
  if (unmet.empty()) return;
  for (const auto& [dep, kind] : unmet) dependents_[dep].insert(id);
  waiters_[id] = Waiter{uid, std::move(unmet)};
}

void Dependencies::Add(const std::string& id, uid_t uid, const std::set<std::string>& unmet) {
  std::map<std::string, DependencyKind> kinds;
  for (const std::string& dep : unmet) kinds.emplace(dep, DependencyKind::kAfterOk);
  AddKinds(id, uid, std::move(kinds));
}

std::vector<std::string> Dependencies::Unmet(const std::string& id) const {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return {};
  std::vector<std::string> out;
  for (const auto& [dep, kind] : it->second.unmet) out.push_back(dep);
  std::sort(out.begin(), out.end(), OlderId);
  return out;
}

size_t Dependencies::waiting(uid_t uid) const {
  return static_cast<size_t>(std::count_if(waiters_.begin(), waiters_.end(),
                                           [&](const auto& w) { return w.second.uid == uid; }));
}

Dependencies::Outcome Dependencies::Ended(const std::string& id, JobState state) {
  Outcome out;
  auto it = dependents_.find(id);
  if (it == dependents_.end()) return out;
  const std::set<std::string> waiting = std::move(it->second);
  dependents_.erase(it);
  for (const std::string& w : waiting) {
    auto wit = waiters_.find(w);
    if (wit == waiters_.end()) continue;
    auto kind = wit->second.unmet.find(id);
    if (kind == wit->second.unmet.end()) continue;
    if (OutcomeOf(kind->second, state) != DependencyOutcome::kMet) {
      out.failed.push_back(w);
      Remove(w);
      continue;
    }
    wit->second.unmet.erase(id);
    if (wit->second.unmet.empty()) {
      waiters_.erase(wit);
      out.ready.push_back(w);
    }
  }
  std::sort(out.ready.begin(), out.ready.end(), OlderId);
  std::sort(out.failed.begin(), out.failed.end(), OlderId);
  return out;
}

void Dependencies::Remove(const std::string& id) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  for (const auto& [dep, kind] : it->second.unmet) {
    auto d = dependents_.find(dep);
    if (d == dependents_.end()) continue;
    d->second.erase(id);
    if (d->second.empty()) dependents_.erase(d);
  }
  waiters_.erase(it);
}

}  // namespace ltd
