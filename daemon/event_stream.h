// One server-streaming RPC (attached submit, attach, logs, wait): a write
// reactor fed from the loop thread. The loop pushes events; the reactor
// writes them one at a time; a slow client gets a bounded queue and a
// notice of what it missed, never an unbounded ltd.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "ltd.grpc.pb.h"

namespace ltd {

class EventStream final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  // Shared with the loop; the reactor is gone once `alive` reads false.
  struct Handle {
    std::mutex mu;
    EventStream* stream = nullptr;  // guarded by mu
    // Push an event; false once the client is gone.
    bool Push(v1::JobEvent event);
    void Finish(const grpc::Status& status);
    // Runs `fn` when the RPC ends; false (and `fn` dropped) if it has.
    bool OnGone(std::function<void()> fn);
    // Whether the queue has room for more (a sender that can wait, such
    // as a log replay, sends only then).
    bool HasRoom();
    // Runs `fn` (on a gRPC thread) once the queue has drained to half, or
    // the RPC ended; false (and `fn` dropped) when there is room already.
    bool OnRoom(std::function<void()> fn);
  };

  // What a client that reads slower than its job writes may cost ltd: live
  // output past this is dropped (and said so: `logs` has every line), a log
  // replay waits.
  static constexpr size_t kMaxQueuedBytes = 1 << 20;

  // `on_gone` runs on a gRPC thread when the RPC ends for any reason.
  explicit EventStream(std::function<void()> on_gone = nullptr);
  std::shared_ptr<Handle> handle() const { return handle_; }
  void set_on_gone(std::function<void()> on_gone);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  bool PushLocked(v1::JobEvent event);
  void FinishLocked(const grpc::Status& status);
  void WriteNextLocked();

  std::shared_ptr<Handle> handle_;
  std::mutex mu_;
  std::deque<v1::JobEvent> queue_;      // guarded by mu_
  size_t queued_bytes_ = 0;             // guarded by mu_
  uint64_t dropped_ = 0;                // guarded by mu_
  bool writing_ = false;                // guarded by mu_
  bool broken_ = false;                 // guarded by mu_: a write failed
  std::optional<grpc::Status> finish_;  // guarded by mu_: finish once drained
  bool finished_ = false;               // guarded by mu_
  std::function<void()> on_gone_;       // guarded by mu_
  std::function<void()> on_room_;       // guarded by mu_
};

}  // namespace ltd
