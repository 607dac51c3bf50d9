// ltd's calls to one supervisor, whichever wire it speaks: frames over its
// socket (a supervisor of this release, api_version 2) or gRPC (one of an
// earlier release, api_version 1, adopted across an upgrade). A refusal
// or a failure is a status whose words are ltd's, never a library's. Loop
// thread; every callback comes on the loop, on a later turn than its call.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shim.pb.h"

namespace ltd {

class ShimChannel {
 public:
  virtual ~ShimChannel() = default;

  using Sink = std::function<void(const shim::v1::Event&)>;
  // The watch ended: empty `error` after the final record, else why.
  using End = std::function<void(std::string error)>;
  template <class T>
  using Done = std::function<void(absl::StatusOr<T>)>;

  // Beats, slim and typed records, and output, each to `sink`; then `end`
  // once. One watch per channel.
  virtual void Watch(Sink sink, End end) = 0;
  // The watch ends (`end` is called, on a later turn). Calls in flight
  // are still answered, or end at their deadline; no new call is sent.
  virtual void Cancel() = 0;
  virtual void Kill(const shim::v1::KillRequest& request, Done<shim::v1::KillReply> done) = 0;
  virtual void SetOutput(bool on, Done<shim::v1::SetOutputReply> done) = 0;
  // Answered within the request's budget, or DEADLINE_EXCEEDED a little after.
  virtual void Stack(const shim::v1::StackRequest& request, Done<shim::v1::StackReply> done) = 0;
  // A new channel to the same supervisor over its socket, for a watch that
  // broke while the supervisor lives on.
  virtual std::unique_ptr<ShimChannel> Reopen() = 0;
};

}  // namespace ltd
