#include "event_stream.h"

#include <malloc.h>

#include <atomic>
#include <chrono>

namespace ltd {
namespace {

// What a queued event costs in memory, roughly: its bytes and the message
// around them. Lines are short; counting only their bytes would let a
// queue of them hold many times its bound.
size_t Cost(const v1::JobEvent& event) { return event.ByteSizeLong() + 128; }

// Streams alive now. When the last one ends, what their queues held goes
// back to the system: glibc keeps freed memory in its arenas otherwise, and
// ltd's RSS would stay at its busiest for ever. At most once a second.
std::atomic<int> live_streams{0};
std::atomic<int64_t> last_trim_ms{0};

void TrimWhenIdle() {
  if (live_streams.load() != 0) return;
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t last = last_trim_ms.load();
  if (now - last < 1000 || !last_trim_ms.compare_exchange_strong(last, now)) return;
  malloc_trim(0);
}

}  // namespace

bool EventStream::Handle::Push(v1::JobEvent event) {
  std::lock_guard lock(mu);
  return stream != nullptr && stream->PushLocked(std::move(event));
}

void EventStream::Handle::Finish(const grpc::Status& status) {
  std::lock_guard lock(mu);
  if (stream != nullptr) stream->FinishLocked(status);
}

bool EventStream::Handle::OnGone(std::function<void()> fn) {
  std::lock_guard lock(mu);
  if (stream == nullptr) return false;
  stream->set_on_gone(std::move(fn));
  return true;
}

bool EventStream::Handle::HasRoom() {
  std::lock_guard lock(mu);
  if (stream == nullptr) return true;  // gone: a push will say so
  std::lock_guard inner(stream->mu_);
  return stream->queued_bytes_ < kMaxQueuedBytes;
}

bool EventStream::Handle::OnRoom(std::function<void()> fn) {
  std::lock_guard lock(mu);
  if (stream == nullptr) return false;
  std::lock_guard inner(stream->mu_);
  if (stream->queued_bytes_ < kMaxQueuedBytes || stream->broken_ || stream->finished_) return false;
  stream->on_room_ = std::move(fn);
  return true;
}

EventStream::EventStream(std::function<void()> on_gone)
    : handle_(std::make_shared<Handle>()), on_gone_(std::move(on_gone)) {
  handle_->stream = this;
  ++live_streams;
}

void EventStream::set_on_gone(std::function<void()> on_gone) {
  std::lock_guard lock(mu_);
  on_gone_ = std::move(on_gone);
}

bool EventStream::PushLocked(v1::JobEvent event) {
  std::lock_guard lock(mu_);
  if (broken_ || finish_ || finished_) return false;
  const size_t size = Cost(event);
  if (event.has_output() && queued_bytes_ + size > kMaxQueuedBytes) {
    ++dropped_;  // the client reads slower than the ranks write
    return true;
  }
  if (dropped_ > 0) {
    v1::JobEvent notice;
    notice.set_notice("ltd: " + std::to_string(dropped_) +
                      " output line(s) dropped: the client was too slow");
    dropped_ = 0;
    queued_bytes_ += Cost(notice);
    queue_.push_back(std::move(notice));
  }
  queued_bytes_ += size;
  queue_.push_back(std::move(event));
  WriteNextLocked();
  return true;
}

void EventStream::FinishLocked(const grpc::Status& status) {
  std::lock_guard lock(mu_);
  if (finish_ || finished_) return;
  finish_ = status;
  WriteNextLocked();
}

void EventStream::WriteNextLocked() {
  if (writing_ || finished_) return;
  if (!queue_.empty() && !broken_) {
    writing_ = true;
    StartWrite(&queue_.front());
    return;
  }
  if (finish_ || broken_) {
    finished_ = true;
    Finish(broken_ ? grpc::Status::CANCELLED : *finish_);
  }
}

void EventStream::OnWriteDone(bool ok) {
  std::function<void()> on_room;
  {
    std::lock_guard lock(mu_);
    writing_ = false;
    queued_bytes_ -= std::min(queued_bytes_, Cost(queue_.front()));
    queue_.pop_front();
    if (!ok) {
      broken_ = true;  // the client went away; finish now
      queue_.clear();
    }
    if (on_room_ && (broken_ || queued_bytes_ <= kMaxQueuedBytes / 2)) on_room = std::move(on_room_);
    WriteNextLocked();
  }
  if (on_room) on_room();
}

void EventStream::OnCancel() {
  // The client hung up (or the server is shutting down): stop writing, and
  // finish at once unless a write is in flight, whose completion will.
  std::lock_guard lock(mu_);
  broken_ = true;
  if (writing_) {
    queue_.erase(queue_.begin() + 1, queue_.end());
  } else {
    queue_.clear();
  }
  WriteNextLocked();
}

void EventStream::OnDone() {
  std::function<void()> on_gone, on_room;
  {
    std::lock_guard hl(handle_->mu);
    handle_->stream = nullptr;
    std::lock_guard lock(mu_);
    on_gone = std::move(on_gone_);
    on_room = std::move(on_room_);  // a waiting sender learns the end by pushing
  }
  if (on_gone) on_gone();
  if (on_room) on_room();
  delete this;
  --live_streams;
  TrimWhenIdle();
}

}  // namespace ltd
