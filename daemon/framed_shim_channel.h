// ltd's side of the supervisor protocol's frames (proto/shim.proto, api
// version 2): calls numbered and answered over one socket, each with a
// deadline, and the watch's events read as they come, a frame at most
// kMaxAnswerFrame long. Loop thread.
#pragma once

#include <uv.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "fd.h"
#include "framed_pipe.h"
#include "loop.h"
#include "shim_channel.h"
#include "uv_handle.h"

namespace ltd {

class FramedShimChannel final : public ShimChannel {
 public:
  // A supervisor on this machine answers in microseconds; one that does
  // not answer in this long is wedged, and ltd does not wait on it.
  static constexpr auto kCallTimeout = std::chrono::seconds(5);

  // Over `connection` (a connected socket, taken); `socket_path` is where
  // the supervisor listens, for Reopen.
  static std::unique_ptr<ShimChannel> Open(Loop& loop, Fd connection, std::string socket_path);
  // Connects to `socket_path` without waiting: a supervisor that does not
  // take the connection now gets a channel whose calls fail.
  static std::unique_ptr<ShimChannel> Connect(Loop& loop, std::string socket_path);
  // A connection to the socket `socket_path` made at once, or why not.
  static absl::StatusOr<Fd> ConnectNow(const std::string& socket_path);
  ~FramedShimChannel() override;

  void Watch(Sink sink, End end) override;
  void Cancel() override;
  void Kill(const shim::v1::KillRequest& request, Done<shim::v1::KillReply> done) override;
  void SetOutput(bool on, Done<shim::v1::SetOutputReply> done) override;
  void Stack(const shim::v1::StackRequest& request, Done<shim::v1::StackReply> done) override;
  std::unique_ptr<ShimChannel> Reopen() override { return Connect(loop_, socket_path_); }

 private:
  FramedShimChannel(Loop& loop, std::string socket_path)
      : loop_(loop), socket_path_(std::move(socket_path)) {}
  void Start(Fd connection);
  using Answered = std::function<void(absl::StatusOr<shim::v1::Answer>)>;
  // Sends `call` (numbered here); `answered` gets its answer, a failure, or
  // DEADLINE_EXCEEDED after `timeout`.
  void Call(shim::v1::Call call, std::chrono::milliseconds timeout, Answered answered);
  void OnFrame(std::string_view frame);
  // The connection is over: every call and the watch end with `why`.
  void Broken(const std::string& why);
  // Why a frame could not be sent; the channel is broken unless the
  // supervisor hung up and what it sent before is still being read.
  std::string Unsent();
  void Later(std::function<void()> fn) { loop_.Post(std::move(fn)); }

  struct Pending {
    FramedShimChannel* channel = nullptr;
    uint64_t id = 0;
    Answered answered;
    UvPtr<uv_timer_t> timer;
  };
  Loop& loop_;
  const std::string socket_path_;
  std::shared_ptr<FramedPipe> pipe_;
  std::string broken_;  // why the connection is over; empty while it is not
  uint64_t next_id_ = 1;
  std::map<uint64_t, Pending> pending_;
  uint64_t watch_id_ = 0;  // 0: no watch
  bool closing_ = false;   // cancelled: closes once no call is in flight
  std::shared_ptr<Sink> sink_;
  End end_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ltd
