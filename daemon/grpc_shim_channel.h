// ltd's calls to a supervisor of an earlier release (api_version 1): the
// Supervisor service over gRPC on its <job dir>/shim.sock, kept so that
// ltd adopts the supervisors of the release before it across an upgrade.
// gRPC's statuses become ltd's words here. Loop thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "loop.h"
#include "shim.grpc.pb.h"
#include "shim_channel.h"
#include "shim_watcher.h"

namespace ltd {

class GrpcShimChannel final : public ShimChannel {
 public:
  // Over `channel`, to the supervisor listening on `socket_path`.
  GrpcShimChannel(Loop& loop, std::shared_ptr<grpc::Channel> channel, std::string socket_path);
  ~GrpcShimChannel() override { Cancel(); }

  void Watch(Sink sink, End end) override;
  void Cancel() override;
  void Kill(const shim::v1::KillRequest& request, Done<shim::v1::KillReply> done) override;
  void SetOutput(bool on, Done<shim::v1::SetOutputReply> done) override;
  void Stack(const shim::v1::StackRequest& request, Done<shim::v1::StackReply> done) override;
  std::unique_ptr<ShimChannel> Reopen() override;

 private:
  Loop& loop_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<shim::v1::Supervisor::Stub> stub_;
  const std::string socket_path_;
  std::shared_ptr<ShimWatcher> watcher_;
};

}  // namespace ltd
