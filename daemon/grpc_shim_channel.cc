#include "grpc_shim_channel.h"

#include <utility>

namespace ltd {
namespace {

namespace pb = shim::v1;

// gRPC's status in ltd's words: the code is kept (gRPC's numbers are
// absl's), the text only where it is the supervisor's own.
absl::Status StatusOf(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::OK:
      return absl::OkStatus();
    case grpc::INVALID_ARGUMENT:
    case grpc::FAILED_PRECONDITION:
    case grpc::RESOURCE_EXHAUSTED:
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    case grpc::UNIMPLEMENTED:
      return absl::UnimplementedError("its release does not know the call");
    case grpc::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError("it did not answer in time");
    default:
      return absl::UnavailableError("its connection failed");
  }
}

}  // namespace

GrpcShimChannel::GrpcShimChannel(Loop& loop, std::shared_ptr<grpc::Channel> channel,
                                 std::string socket_path)
    : loop_(loop),
      channel_(std::move(channel)),
      stub_(pb::Supervisor::NewStub(channel_)),
      socket_path_(std::move(socket_path)) {}

void GrpcShimChannel::Watch(Sink sink, End end) {
  Loop* l = &loop_;
  auto shared_sink = std::make_shared<Sink>(std::move(sink));
  watcher_ = ShimWatcher::Start(
      *stub_,
      [l, shared_sink](pb::Event event, std::function<void()> taken) {
        l->Post([shared_sink, event = std::move(event), taken = std::move(taken)] {
          (*shared_sink)(event);
          taken();
        });
      },
      [l, end = std::move(end)](grpc::Status status) {
        std::string why = status.ok() ? std::string() : std::string(StatusOf(status).message());
        l->Post([end, why = std::move(why)] { end(why); });
      });
}

void GrpcShimChannel::Cancel() {
  if (watcher_) watcher_->Cancel();
  watcher_.reset();
}

std::unique_ptr<ShimChannel> GrpcShimChannel::Reopen() {
  return std::make_unique<GrpcShimChannel>(loop_, ShimSocketChannel(socket_path_), socket_path_);
}

void GrpcShimChannel::Kill(const pb::KillRequest& request, Done<pb::KillReply> done) {
  auto call = std::make_shared<UnaryCall<pb::KillRequest, pb::KillReply>>();
  call->request = request;
  Loop* l = &loop_;
  stub_->async()->Kill(&call->ctx, &call->request, &call->reply,
                       [l, call, done = std::move(done)](grpc::Status s) {
                         l->Post([s, call, done] {
                           if (!s.ok()) return done(StatusOf(s));
                           done(call->reply);
                         });
                       });
}

void GrpcShimChannel::SetOutput(bool on, Done<pb::SetOutputReply> done) {
  auto call = std::make_shared<UnaryCall<pb::SetOutputRequest, pb::SetOutputReply>>();
  call->request.set_on(on);
  Loop* l = &loop_;
  stub_->async()->SetOutput(&call->ctx, &call->request, &call->reply,
                            [l, call, done = std::move(done)](grpc::Status s) {
                              l->Post([s, call, done] {
                                if (!s.ok()) return done(StatusOf(s));
                                done(call->reply);
                              });
                            });
}

void GrpcShimChannel::Stack(const pb::StackRequest& request, Done<pb::StackReply> done) {
  auto call = std::make_shared<UnaryCall<pb::StackRequest, pb::StackReply>>();
  call->request = request;
  // The supervisor answers within the budget; two seconds more for the wire.
  call->ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(request.budget_ms()) + std::chrono::seconds(2));
  Loop* l = &loop_;
  stub_->async()->Stack(&call->ctx, &call->request, &call->reply,
                        [l, call, done = std::move(done)](grpc::Status s) {
                          l->Post([s, call, done] {
                            if (!s.ok()) return done(StatusOf(s));
                            done(std::move(call->reply));
                          });
                        });
}

}  // namespace ltd
