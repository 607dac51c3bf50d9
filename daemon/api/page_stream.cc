#include "page_stream.h"

namespace ltd {

void PageStream::Handle::Send(std::deque<v1::ListReply> pages, const grpc::Status& status) {
  std::lock_guard lock(mu);
  if (stream != nullptr) stream->Start(std::move(pages), status);
}

PageStream::PageStream() : handle_(std::make_shared<Handle>()) {
  std::lock_guard lock(handle_->mu);
  handle_->stream = this;
}

void PageStream::Start(std::deque<v1::ListReply> pages, const grpc::Status& status) {
  std::lock_guard lock(mu_);
  if (status_) return;  // a second Send: the first one stands
  pages_ = std::move(pages);
  status_ = status;
  WriteNextLocked();
}

void PageStream::WriteNextLocked() {
  if (writing_ || finished_) return;
  if (!cancelled_ && !pages_.empty()) {
    writing_ = true;
    StartWrite(&pages_.front());
    return;
  }
  if (cancelled_ || status_) {
    finished_ = true;
    Finish(cancelled_ ? grpc::Status::CANCELLED : *status_);
  }
}

void PageStream::OnWriteDone(bool ok) {
  std::lock_guard lock(mu_);
  writing_ = false;
  pages_.pop_front();
  if (!ok) cancelled_ = true;  // the client went away
  WriteNextLocked();
}

void PageStream::OnCancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  WriteNextLocked();  // finishes now, or once the write in flight is done
}

void PageStream::OnDone() {
  {
    std::lock_guard lock(handle_->mu);
    handle_->stream = nullptr;
  }
  delete this;
}

}  // namespace ltd
