// The List RPC's stream: pages of jobs built on the loop thread one at a
// time, each once the client has taken the one before, so that a client
// that does not read holds one page (at most 1 MiB) of ltd's memory, not
// the whole listing. The loop hands pages over through a handle that
// outlives the reactor, so a client that hangs up first costs nothing
// but the page being built.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "ltd.grpc.pb.h"

namespace ltd {

class PageStream final : public grpc::ServerWriteReactor<v1::ListReply> {
 public:
  struct Handle {
    // Writes `page`; then finishes with `end`, or, without one, asks the
    // pager for the next page. Nothing once the client is gone.
    void Send(v1::ListReply page, std::optional<grpc::Status> end);
    void Finish(const grpc::Status& status);

    std::mutex mu;
    PageStream* stream ABSL_GUARDED_BY(mu) = nullptr;
  };

  PageStream();
  std::shared_ptr<Handle> handle() const { return handle_; }
  // Called for each page after the first, on a gRPC thread, once the page
  // before it is written: it has the next one built and sent through the
  // handle (on the loop). Set before the first page is sent.
  void SetPager(std::function<void()> pager) { pager_ = std::move(pager); }
  // Kept until the stream is gone: what it holds of a quota, say.
  void Keep(std::shared_ptr<void> held) { kept_ = std::move(held); }

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void Take(std::optional<v1::ListReply> page, std::optional<grpc::Status> end);
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<Handle> handle_;
  std::function<void()> pager_;
  std::mutex mu_;
  std::optional<v1::ListReply> page_ ABSL_GUARDED_BY(mu_);   // the one being written
  std::optional<grpc::Status> status_ ABSL_GUARDED_BY(mu_);  // set once the last page is in
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<void> kept_;
};

}  // namespace ltd
