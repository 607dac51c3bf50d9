#include "shim_watcher.h"

#include <grpcpp/create_channel_posix.h>

namespace ltd {

std::shared_ptr<grpc::Channel> ShimSocketChannel(const std::string& path) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxRecordBytes);
  // Local and either there or not: no reconnect backoff worth having.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  return grpc::CreateCustomChannel("unix:" + path, grpc::InsecureChannelCredentials(), args);
}

std::shared_ptr<ShimWatcher> ShimWatcher::Start(shim::v1::Supervisor::Stub& stub, Sink sink,
                                                End end) {
  auto w = std::shared_ptr<ShimWatcher>(new ShimWatcher(std::move(sink), std::move(end)));
  w->self_ = w;  // alive until OnDone
  w->request_.set_beats(true);
  w->request_.set_slim_records(true);
  w->request_.set_typed_records(true);
  stub.async()->Watch(&w->ctx_, &w->request_, w.get());
  // Held until a read fails: a read may start late (from the loop, once
  // it took what came before), and OnDone must not come between.
  w->AddHold();
  w->StartRead(&w->event_);
  w->StartCall();
  return w;
}
void ShimWatcher::OnReadDone(bool ok) {
  if (!ok) return RemoveHold();  // OnDone follows
  const size_t cost = event_.ByteSizeLong() + 128;
  {
    std::lock_guard lock(mu_);
    in_flight_ += cost;
    ++events_in_flight_;
  }
  shim::v1::Event event = std::move(event_);
  event_.Clear();
  sink_(std::move(event), [self = self_, cost] { self->Taken(cost); });
  {
    std::lock_guard lock(mu_);
    if (in_flight_ >= kMaxInFlight || events_in_flight_ >= kMaxEventsInFlight) {
      parked_ = true;  // the loop is behind: Taken reads on
      return;
    }
  }
  StartRead(&event_);
}
void ShimWatcher::OnDone(const grpc::Status& status) {
  end_(status);
  self_.reset();  // last: may free this
}

void ShimWatcher::Taken(size_t cost) {
  {
    std::lock_guard lock(mu_);
    in_flight_ -= std::min(in_flight_, cost);
    events_in_flight_ -= std::min<size_t>(events_in_flight_, 1);
    if (!parked_ || in_flight_ >= kMaxInFlight / 2 || events_in_flight_ >= kMaxEventsInFlight / 2)
      return;
    parked_ = false;  // this call alone starts the next read
  }
  StartRead(&event_);
}

}  // namespace ltd
