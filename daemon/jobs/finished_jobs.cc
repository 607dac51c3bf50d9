#include "finished_jobs.h"

#include <algorithm>
#include <set>
#include <vector>

namespace ltd {
namespace {

// Ids count up: a shorter one is older.
bool IdLess(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

}  // namespace

void FinishedJobs::Add(const std::string& id, uid_t uid, uint64_t bytes) {
  if (owner_.count(id) != 0) Remove(id);
  User& user = users_[uid];
  user.jobs.push_back(Entry{id, bytes, next_seq_++});
  user.bytes += bytes;
  bytes_ += bytes;
  owner_.emplace(id, Owner{uid, user.jobs.back().seq});
}

void FinishedJobs::SortById() {
  std::vector<std::pair<Entry, uid_t>> all;
  for (auto& [uid, user] : users_) {
    for (Entry& e : user.jobs) all.emplace_back(std::move(e), uid);
    user.jobs.clear();
  }
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return IdLess(a.first.id, b.first.id); });
  next_seq_ = 0;
  for (auto& [entry, uid] : all) {
    entry.seq = next_seq_++;
    owner_[entry.id] = Owner{uid, entry.seq};
    users_[uid].jobs.push_back(std::move(entry));
  }
}

std::pair<FinishedJobs::User*, std::deque<FinishedJobs::Entry>::iterator> FinishedJobs::Find(
    const Owner& o, std::string_view id) {
  auto user = users_.find(o.uid);
  if (user == users_.end()) return {nullptr, {}};
  std::deque<Entry>& jobs = user->second.jobs;
  auto it = std::lower_bound(jobs.begin(), jobs.end(), o.seq,
                             [](const Entry& e, uint64_t seq) { return e.seq < seq; });
  if (it == jobs.end() || it->id != id) return {nullptr, {}};
  return {&user->second, it};
}

void FinishedJobs::SetBytes(const std::string& id, uint64_t bytes) {
  auto owner = owner_.find(id);
  if (owner == owner_.end()) return;
  auto [user, e] = Find(owner->second, id);
  if (user == nullptr) return;
  user->bytes = user->bytes - e->bytes + bytes;
  bytes_ = bytes_ - e->bytes + bytes;
  e->bytes = bytes;
}

void FinishedJobs::Remove(const std::string& id) {
  auto owner = owner_.find(id);
  if (owner == owner_.end()) return;
  const Owner o = owner->second;
  owner_.erase(owner);
  auto [user, it] = Find(o, id);
  if (user == nullptr) return;
  std::deque<Entry>& jobs = user->jobs;
  user->bytes -= it->bytes;
  bytes_ -= it->bytes;
  jobs.erase(it);
  if (jobs.empty()) users_.erase(o.uid);
}

size_t FinishedJobs::Users(const Usage& live, std::optional<uid_t> also) const {
  std::set<uid_t> users;
  for (const auto& [uid, user] : users_) users.insert(uid);
  for (const auto& [uid, bytes] : live) users.insert(uid);
  if (also) users.insert(*also);
  return users.size();
}

std::optional<std::string> FinishedJobs::NextToPrune(size_t keep, uint64_t max_bytes,
                                                     const Usage& live) const {
  if (owner_.empty()) return std::nullopt;
  // Of two users as far over, the one whose oldest job is older.
  const User* pick = nullptr;
  uint64_t pick_key = 0;
  auto consider = [&](const User& user, uint64_t key) {
    if (pick == nullptr || key > pick_key ||
        (key == pick_key && user.jobs.front().seq < pick->jobs.front().seq)) {
      pick = &user;
      pick_key = key;
    }
  };
  if (owner_.size() > keep) {
    // The user with the most finished jobs is the furthest over an equal
    // share of `keep`, and over it: they hold more than keep / users.
    for (const auto& [uid, user] : users_) consider(user, user.jobs.size());
    return pick->jobs.front().id;
  }
  if (max_bytes == 0) return std::nullopt;
  uint64_t live_total = 0;
  for (const auto& [uid, bytes] : live) live_total += bytes;
  if (bytes_ + live_total <= max_bytes) return std::nullopt;
  const uint64_t share = max_bytes / Users(live);
  for (const auto& [uid, user] : users_) {
    auto it = live.find(uid);
    const uint64_t used = user.bytes + (it == live.end() ? 0 : it->second);
    if (used > share) consider(user, used - share);
  }
  if (pick == nullptr) return std::nullopt;
  return pick->jobs.front().id;
}

FinishedJobs::Share FinishedJobs::ShareOf(uid_t uid, uint64_t max_bytes, const Usage& live) const {
  Share s;
  s.total = bytes_;
  for (const auto& [u, bytes] : live) s.total += bytes;
  if (auto it = live.find(uid); it != live.end()) s.live_used = it->second;
  s.used = s.live_used;
  if (auto it = users_.find(uid); it != users_.end()) s.used += it->second.bytes;
  s.users = Users(live, uid);
  s.share = max_bytes / s.users;
  return s;
}

}  // namespace ltd
