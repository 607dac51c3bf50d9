// The List RPC's stream: pages of jobs built on the loop thread, written
// one at a time. The loop hands them over through a handle that outlives
// the reactor, so a client that hangs up first costs nothing but the pages.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "ltd.grpc.pb.h"

namespace ltd {

class PageStream final : public grpc::ServerWriteReactor<v1::ListReply> {
 public:
  struct Handle {
    // Writes `pages`, then finishes with `status`; nothing once the client is gone.
    void Send(std::deque<v1::ListReply> pages, const grpc::Status& status);
    void Finish(const grpc::Status& status) { Send({}, status); }

    std::mutex mu;
    PageStream* stream ABSL_GUARDED_BY(mu) = nullptr;
  };

  PageStream();
  std::shared_ptr<Handle> handle() const { return handle_; }
  // Kept until the stream is gone: what it holds of a quota, say.
  void Keep(std::shared_ptr<void> held) { kept_ = std::move(held); }

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void Start(std::deque<v1::ListReply> pages, const grpc::Status& status);
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<Handle> handle_;
  std::mutex mu_;
  std::deque<v1::ListReply> pages_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> status_ ABSL_GUARDED_BY(mu_);  // set once the pages are in
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<void> kept_;
};

}  // namespace ltd
