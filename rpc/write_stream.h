// One server-streaming RPC fed from the loop thread: the loop pushes
// events; the reactor writes them one at a time; a slow reader gets a
// bounded queue and a notice of what it missed, never an unbounded writer.
// ltd's client streams (attached submit, attach, logs, wait) are each
// one of these.
//
// `Traits` says what may be dropped and how to say so:
//   static bool Droppable(const Event&);      // live output, say
//   static Event Notice(uint64_t dropped);    // "N lines dropped"
//   static size_t Parts(const Event&);        // optional: lines in one event
#pragma once

#include <grpcpp/grpcpp.h>
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

namespace ltd {

namespace write_stream_internal {

// Streams alive now, for tests and metrics.
inline std::atomic<int> live_streams{0};
inline std::atomic<int64_t> last_trim_ms{0};

// When a stream ends, what its queue held goes back to the system: glibc
// keeps freed memory in its arenas otherwise, and the process's RSS would
// stay at its busiest for ever (waiting for every stream to end would
// never trim while any client stays attached). At most once a second.
inline void TrimAfterEnd() {
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t last = last_trim_ms.load();
  if (now - last < 1000 || !last_trim_ms.compare_exchange_strong(last, now)) return;
  malloc_trim(0);
}

}  // namespace write_stream_internal

template <typename Event, typename Traits>
class WriteStream final : public grpc::ServerWriteReactor<Event> {
 public:
  // Shared with the loop; the reactor is gone once `stream` reads null.
  struct Handle {
    std::mutex mu;
    WriteStream* stream = nullptr;  // guarded by mu
    // Push an event; false once the reader is gone.
    bool Push(Event event) {
      std::lock_guard lock(mu);
      return stream != nullptr && stream->PushLocked(std::move(event));
    }
    void Finish(const grpc::Status& status) {
      std::lock_guard lock(mu);
      if (stream != nullptr) stream->FinishLocked(status);
    }
    // Push(event), then Finish(status): the last event and the end go out
    // in one operation of gRPC's when nothing is queued before the event
    // (StartWriteAndFinish), a write and its wake-ups fewer a stream.
    bool PushAndFinish(Event event, const grpc::Status& status) {
      std::lock_guard lock(mu);
      return stream != nullptr && stream->PushLocked(std::move(event), &status);
    }
    // Runs `fn` when the RPC ends; false (and `fn` dropped) if it has.
    bool OnGone(std::function<void()> fn) {
      std::lock_guard lock(mu);
      if (stream == nullptr) return false;
      stream->set_on_gone(std::move(fn));
      return true;
    }
    // A droppable event that was not even built, the queue being full:
    // counted as dropped, as Push would have. False once the reader is
    // gone. Cheaper than building the event for a full queue.
    bool DropIfFull() {
      std::lock_guard lock(mu);
      if (stream == nullptr) return false;
      std::lock_guard inner(stream->mu_);
      if (stream->queued_bytes_ < kMaxQueuedBytes) return false;
      ++stream->dropped_;
      return true;
    }
    // Whether the queue has room for more (a sender that can wait, such
    // as a log replay, sends only then).
    bool HasRoom() {
      std::lock_guard lock(mu);
      if (stream == nullptr) return true;  // gone: a push will say so
      std::lock_guard inner(stream->mu_);
      return stream->queued_bytes_ < kMaxQueuedBytes;
    }
    // Runs `fn` (on a gRPC thread) once every event pushed has been
    // written, or the RPC ended; false (and `fn` dropped) when nothing is
    // queued now. A sender that can wait (a log replay) pushes its next
    // event then: a reader that stopped reading holds the one write gRPC
    // has not finished, and costs no work until that write completes.
    bool OnDrained(std::function<void()> fn) {
      std::lock_guard lock(mu);
      if (stream == nullptr) return false;
      std::lock_guard inner(stream->mu_);
      if (stream->queue_.empty() || stream->broken_ || stream->finished_) return false;
      stream->on_drained_ = std::move(fn);
      return true;
    }
  };

  // What a reader slower than its job's output may cost: droppable events
  // past this are dropped (and said so), a sender that can wait waits.
  static constexpr size_t kMaxQueuedBytes = 1 << 20;

  // `on_gone` runs on a gRPC thread when the RPC ends for any reason.
  explicit WriteStream(std::function<void()> on_gone = nullptr)
      : handle_(std::make_shared<Handle>()), on_gone_(std::move(on_gone)) {
    handle_->stream = this;
    ++write_stream_internal::live_streams;
  }
  std::shared_ptr<Handle> handle() const { return handle_; }
  // Kept until the stream is gone: what it holds of a quota, say.
  void Keep(std::shared_ptr<void> held) { kept_ = std::move(held); }
  void set_on_gone(std::function<void()> on_gone) {
    std::lock_guard lock(mu_);
    on_gone_ = std::move(on_gone);
  }

  void OnWriteDone(bool ok) override {
    std::function<void()> on_drained;
    {
      std::lock_guard lock(mu_);
      writing_ = false;
      queued_bytes_ -= std::min(queued_bytes_, Cost(queue_.front()));
      queue_.pop_front();
      if (!ok) {
        broken_ = true;  // the reader went away; finish now
        queue_.clear();
      }
      if (on_drained_ && (broken_ || queue_.empty())) on_drained = std::move(on_drained_);
      WriteNextLocked();
    }
    if (on_drained) on_drained();
  }

  void OnCancel() override {
    // The reader hung up (or the server is shutting down): stop writing,
    // and finish at once unless a write is in flight, whose completion will.
    std::lock_guard lock(mu_);
    broken_ = true;
    if (writing_) {
      queue_.erase(queue_.begin() + 1, queue_.end());
    } else {
      queue_.clear();
    }
    WriteNextLocked();
  }

  void OnDone() override {
    std::function<void()> on_gone, on_drained;
    {
      std::lock_guard hl(handle_->mu);
      handle_->stream = nullptr;
      std::lock_guard lock(mu_);
      on_gone = std::move(on_gone_);
      on_drained = std::move(on_drained_);  // a waiting sender learns the end by pushing
    }
    if (on_gone) on_gone();
    if (on_drained) on_drained();
    delete this;
    --write_stream_internal::live_streams;
    write_stream_internal::TrimAfterEnd();
  }

 private:
  // What a queued event costs in memory, at most: its bytes and the
  // messages, string and queue slot around them (measured: ~200 bytes for
  // a short output line). Lines are short; counting only their bytes
  // would let a queue of them hold many times its bound.
  // An event of many parts (a run of output lines) costs that per part.
  static size_t Cost(const Event& event) {
    size_t cost = event.ByteSizeLong() + 256;
    if constexpr (requires { Traits::Parts(event); }) cost += 256 * Traits::Parts(event);
    return cost;
  }

  // With `then_finish`, the stream finishes so once the event is written.
  bool PushLocked(Event event, const grpc::Status* then_finish = nullptr) {
    std::lock_guard lock(mu_);
    if (broken_ || finish_ || finished_) return false;
    if (then_finish != nullptr) finish_ = *then_finish;
    const size_t size = Cost(event);
    if (Traits::Droppable(event) && queued_bytes_ + size > kMaxQueuedBytes) {
      ++dropped_;  // the reader reads slower than the ranks write
      WriteNextLocked();
      return true;
    }
    if (dropped_ > 0) {
      Event notice = Traits::Notice(dropped_);
      dropped_ = 0;
      queued_bytes_ += Cost(notice);
      queue_.push_back(std::move(notice));
    }
    queued_bytes_ += size;
    queue_.push_back(std::move(event));
    WriteNextLocked();
    return true;
  }

  void FinishLocked(const grpc::Status& status) {
    std::lock_guard lock(mu_);
    if (finish_ || finished_) return;
    finish_ = status;
    WriteNextLocked();
  }

  void WriteNextLocked() {
    if (writing_ || finished_) return;
    if (!queue_.empty() && !broken_) {
      writing_ = true;
      if (finish_ && queue_.size() == 1) {
        // The last event and the status together; no OnWriteDone comes,
        // the event lives in the queue until OnDone.
        finished_ = true;
        this->StartWriteAndFinish(&queue_.front(), grpc::WriteOptions(), *finish_);
        return;
      }
      this->StartWrite(&queue_.front());
      return;
    }
    if (finish_ || broken_) {
      finished_ = true;
      this->Finish(broken_ ? grpc::Status::CANCELLED : *finish_);
    }
  }

  std::shared_ptr<Handle> handle_;
  std::mutex mu_;
  std::deque<Event> queue_;             // guarded by mu_
  size_t queued_bytes_ = 0;             // guarded by mu_
  uint64_t dropped_ = 0;                // guarded by mu_
  bool writing_ = false;                // guarded by mu_
  bool broken_ = false;                 // guarded by mu_: a write failed
  std::optional<grpc::Status> finish_;  // guarded by mu_: finish once drained
  bool finished_ = false;               // guarded by mu_
  std::function<void()> on_gone_;       // guarded by mu_
  std::function<void()> on_drained_;    // guarded by mu_
  std::shared_ptr<void> kept_;
};

}  // namespace ltd
