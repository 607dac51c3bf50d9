// The submit tokens ltd has seen lately, per user: a client that lost ltd
// before a job's id came back submits again with the same token and gets
// the job ltd made then, never a second one. Kept in each job's record
// (JobSpec::submit_token), so that the next ltd rebuilds this from the
// records it recovers. Bounded in number (kPerUser per user, the oldest
// forgotten first) and in age (kMaxAge: a client waits for ltd 10 minutes).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "clock.h"

namespace ltd {

class SubmitTokens {
 public:
  static constexpr size_t kPerUser = 256;
  static constexpr std::chrono::hours kMaxAge{1};

  // Job `id` was submitted by `uid` at `at` with `token` ("": nothing kept).
  void Remember(uid_t uid, const std::string& token, const std::string& id, WallTime at);
  // The job `uid` submitted with `token` no longer than kMaxAge before `now`.
  std::optional<std::string> Find(uid_t uid, const std::string& token, WallTime now) const;

 private:
  struct Entry {
    std::string token, id;
    WallTime at;
  };
  std::map<uid_t, std::vector<Entry>> by_user_;
};

}  // namespace ltd
