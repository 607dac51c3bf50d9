#include "page_stream.h"

namespace ltd {

void PageStream::Handle::Send(v1::ListReply page, std::optional<grpc::Status> end) {
  std::lock_guard lock(mu);
  if (stream != nullptr) stream->Take(std::move(page), std::move(end));
}

void PageStream::Handle::Finish(const grpc::Status& status) {
  std::lock_guard lock(mu);
  if (stream != nullptr) stream->Take(std::nullopt, status);
}

PageStream::PageStream() : handle_(std::make_shared<Handle>()) {
  std::lock_guard lock(handle_->mu);
  handle_->stream = this;
}

void PageStream::Take(std::optional<v1::ListReply> page, std::optional<grpc::Status> end) {
  std::lock_guard lock(mu_);
  // Past the end, or a page while one is written: the pager asks for one
  // page at a time, so neither comes but from a second Finish.
  if (status_ || page_) return;
  page_ = std::move(page);
  status_ = std::move(end);
  WriteNextLocked();
}

void PageStream::WriteNextLocked() {
  if (writing_ || finished_) return;
  if (!cancelled_ && page_) {
    writing_ = true;
    StartWrite(&*page_);
    return;
  }
  if (cancelled_ || status_) {
    finished_ = true;
    Finish(cancelled_ ? grpc::Status::CANCELLED : *status_);
  }
}

void PageStream::OnWriteDone(bool ok) {
  bool more = false;
  {
    std::lock_guard lock(mu_);
    writing_ = false;
    page_.reset();
    if (!ok) cancelled_ = true;  // the client went away
    more = !cancelled_ && !status_;
    WriteNextLocked();
  }
  if (more && pager_) pager_();
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
