#include "submit_tokens.h"

#include <algorithm>

namespace ltd {

void SubmitTokens::Remember(uid_t uid, const std::string& token, const std::string& id,
                            WallTime at) {
  if (token.empty()) return;
  std::vector<Entry>& entries = by_user_[uid];
  // Too old to be asked for again: a client waits 10 minutes for ltd.
  std::erase_if(entries, [&](const Entry& e) { return e.at + kMaxAge < at; });
  entries.push_back(Entry{token, id, at});
  if (entries.size() > kPerUser) {
    entries.erase(std::min_element(entries.begin(), entries.end(),
                                   [](const Entry& a, const Entry& b) { return a.at < b.at; }));
  }
}

std::optional<std::string> SubmitTokens::Find(uid_t uid, const std::string& token,
                                              WallTime now) const {
  if (token.empty()) return std::nullopt;
  auto it = by_user_.find(uid);
  if (it == by_user_.end()) return std::nullopt;
  for (const Entry& e : it->second) {
    if (e.token == token && e.at + kMaxAge >= now) return e.id;
  }
  return std::nullopt;
}

}  // namespace ltd
