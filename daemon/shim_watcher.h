// ltd's gRPC client of a supervisor of an earlier release (proto/shim.proto,
// api_version 1; grpc_shim_channel.h): the channel to its socket, unary
// calls with a deadline, and the reader of its Watch stream, which hands
// each event to the loop with bounded memory.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "shim.grpc.pb.h"

namespace ltd {

// A supervisor on this machine answers in microseconds; one that does not
// answer in this long is wedged, and ltd must not wait on it.
constexpr auto kShimCallTimeout = std::chrono::seconds(5);

// A job's record carries its user's bytes (a command line of up to 2 MB):
// past gRPC's default 4 MB a record would break the watch for good.
constexpr int kMaxRecordBytes = 64 << 20;

// To the supervisor listening on `path` (its job dir's shim.sock).
std::shared_ptr<grpc::Channel> ShimSocketChannel(const std::string& path);

// What one asynchronous unary call to a supervisor needs until its
// callback has run (the callback holds it), with the usual deadline.
template <class Request, class Reply>
struct UnaryCall {
  UnaryCall() { ctx.set_deadline(std::chrono::system_clock::now() + kShimCallTimeout); }
  grpc::ClientContext ctx;
  Request request;
  Reply reply;
};

// Reads the supervisor's Watch stream; each event goes to the loop. ltd's
// memory is bounded whatever a supervisor sends: past kMaxInFlight bytes
// handed to the loop and not yet taken, the next read waits for the loop,
// so a supervisor that sends faster than ltd handles blocks on its stream
// (a bounded queue of its own), never grows ltd.
class ShimWatcher final : public grpc::ClientReadReactor<shim::v1::Event> {
 public:
  // `taken` must be called (on any thread) once the event is handled or
  // dropped: it lets the next read go.
  using Sink = std::function<void(shim::v1::Event, std::function<void()> taken)>;
  using End = std::function<void(grpc::Status)>;
  static constexpr size_t kMaxInFlight = 1 << 20;
  // And at most this many events: each output line is fanned out to every
  // attached client on the loop, and what waits in the loop's queue delays
  // every other user's call (lines past it wait in the supervisor, which
  // drops live output for a slow reader; the log has every line).
  static constexpr size_t kMaxEventsInFlight = 64;

  // Watches the supervisor of `stub`: Beats, slim and typed records.
  static std::shared_ptr<ShimWatcher> Start(shim::v1::Supervisor::Stub& stub, Sink sink, End end);
  void Cancel() { ctx_.TryCancel(); }

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  ShimWatcher(Sink sink, End end) : sink_(std::move(sink)), end_(std::move(end)) {}
  void Taken(size_t cost);
  grpc::ClientContext ctx_;
  shim::v1::WatchRequest request_;
  shim::v1::Event event_;  // written by the read in flight; one at a time
  Sink sink_;
  End end_;
  std::shared_ptr<ShimWatcher> self_;
  std::mutex mu_;
  size_t in_flight_ = 0;         // guarded by mu_: bytes handed to the loop, not yet taken
  size_t events_in_flight_ = 0;  // guarded by mu_
  bool parked_ = false;          // guarded by mu_: no read in flight until Taken
};

}  // namespace ltd
