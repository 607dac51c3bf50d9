#include "event_stream.h"

namespace ltd {

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

EventStream::EventStream(std::function<void()> on_gone)
    : handle_(std::make_shared<Handle>()), on_gone_(std::move(on_gone)) {
  handle_->stream = this;
}

void EventStream::set_on_gone(std::function<void()> on_gone) {
  std::lock_guard lock(mu_);
  on_gone_ = std::move(on_gone);
}

bool EventStream::PushLocked(v1::JobEvent event) {
  std::lock_guard lock(mu_);
  if (broken_ || finish_ || finished_) return false;
  const size_t size = event.ByteSizeLong();
  if (event.has_output() && queued_bytes_ + size > kMaxQueuedBytes) {
    ++dropped_;  // the client reads slower than the ranks write
    return true;
  }
  if (dropped_ > 0) {
    v1::JobEvent notice;
    notice.set_notice("ltd: " + std::to_string(dropped_) +
                      " output line(s) dropped: the client was too slow");
    dropped_ = 0;
    queued_bytes_ += notice.ByteSizeLong();
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
  std::lock_guard lock(mu_);
  writing_ = false;
  queued_bytes_ -= std::min(queued_bytes_, queue_.front().ByteSizeLong());
  queue_.pop_front();
  if (!ok) {
    broken_ = true;  // the client went away; finish now
    queue_.clear();
  }
  WriteNextLocked();
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
  std::function<void()> on_gone;
  {
    std::lock_guard hl(handle_->mu);
    handle_->stream = nullptr;
    std::lock_guard lock(mu_);
    on_gone = std::move(on_gone_);
  }
  if (on_gone) on_gone();
  delete this;
}

}  // namespace ltd
