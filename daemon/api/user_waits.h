// Work that waits on what a user controls (a submit's --output on their
// file system, which may never answer) runs here: on a thread of its own,
// never on one of gRPC's few threads nor on the loop, so that one user's
// stuck mount cannot hold back another user's `ps`. Each user has at most
// `per_user` such waits at once and ltd `in_all`; past either bound a call
// is refused at once, in one line, instead of queued behind the stuck
// ones. The work itself bounds its wait (UserFiles' deadline): the
// destructor waits for running work, so no thread outlives the service.
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"

namespace ltd {

class UserWaits {
 public:
  // Two at once per user: a user's own submits may wait on each other,
  // never on ltd's threads; two let a user's normal burst (a submit while
  // a slow NFS answers another) go on. 64 in all: threads, each mostly
  // asleep in poll(2), for ~32 users stuck at once.
  static constexpr int kPerUser = 2;
  static constexpr int kInAll = 64;

  // `what`: how a refusal names the waits ("submits waiting for their files").
  explicit UserWaits(std::string what, int per_user = kPerUser, int in_all = kInAll)
      : what_(std::move(what)), per_user_(per_user), in_all_(in_all) {}
  ~UserWaits();  // waits for running work; each bounds its own wait
  UserWaits(const UserWaits&) = delete;
  UserWaits& operator=(const UserWaits&) = delete;

  // Runs `work` on a thread of its own for `uid`, or refuses at once
  // (RESOURCE_EXHAUSTED, saying what to do) when a bound is reached;
  // `work` then never runs.
  absl::Status Run(uid_t uid, std::function<void()> work);

  // Work of `uid` running now (tests).
  int Running(uid_t uid) const;

 private:
  void Done(uid_t uid);

  const std::string what_;
  const int per_user_;
  const int in_all_;
  mutable std::mutex mu_;
  std::condition_variable idle_;
  std::map<uid_t, int> running_ ABSL_GUARDED_BY(mu_);
  int total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ltd
