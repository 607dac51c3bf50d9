// How many streams (attached submits, attaches, logs, waits, lists) each
// user holds open at once. A stream costs ltd a bounded queue (1 MiB) and,
// reading a log, an fd: without a bound per user, one user's streams take
// the memory and fds every other user needs. Root is not bounded.
// Thread-safe: streams open on gRPC's threads and end on them.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"

namespace ltd {

class StreamQuota {
 public:
  // `max_per_user` 0: no bound.
  explicit StreamQuota(size_t max_per_user);

  // A ticket that holds one of `uid`'s streams until it is destroyed (the
  // stream's end), or RESOURCE_EXHAUSTED naming the limit.
  using Ticket = std::shared_ptr<void>;
  absl::StatusOr<Ticket> Take(uid_t uid);

  // Streams `uid` holds now.
  size_t Open(uid_t uid) const;

 private:
  struct State {
    std::mutex mu;
    std::map<uid_t, size_t> open ABSL_GUARDED_BY(mu);
  };
  const size_t max_per_user_;
  // Shared with the tickets: a stream may end after the service is gone.
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace ltd
