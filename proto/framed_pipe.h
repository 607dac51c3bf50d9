// A connected Unix stream socket on the loop that carries frames (a
// 4-byte little-endian length, then the bytes: proto/shim_frames.h). Both
// ends of the supervisor protocol use one: ltd's link to a supervisor and
// the supervisor's server. Reads are bounded by the frame size the reader
// allows; writes are queued in the kernel and here, and the owner sees how
// many bytes wait (Queued) to bound them itself. Loop thread.
#pragma once

#include <uv.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "shim_frames.h"
#include "uv_handle.h"

namespace ltd {

class FramedPipe : public std::enable_shared_from_this<FramedPipe> {
 public:
  static constexpr std::string_view kPeerClosed = "closed by its peer";
  static constexpr std::string_view kOverBound = "a frame over the bound";

  struct Callbacks {
    // Each whole frame, in order. `frame` is valid during the call only.
    std::function<void(std::string_view frame)> frame;
    // The connection ended (the peer closed it and all it sent was read, a
    // read or write failed, or a frame was over the bound): `why` in a few
    // words. Not called after Close. A write that finds the peer gone
    // (EPIPE) ends the writing only: what the peer sent before it closed
    // is still read, to its end, and `closed` comes then (kPeerClosed).
    std::function<void(std::string why)> closed;
    // The write queue is empty again (optional).
    std::function<void()> drained;
  };

  // Takes `fd`, a connected stream socket, and reads from it at once.
  static absl::StatusOr<std::shared_ptr<FramedPipe>> Open(uv_loop_t* loop, int fd, size_t max_frame,
                                                          Callbacks callbacks);
  // Accepts the next connection of `server` (a listening uv_pipe_t).
  static absl::StatusOr<std::shared_ptr<FramedPipe>> Accept(uv_loop_t* loop, uv_stream_t* server,
                                                            size_t max_frame, Callbacks callbacks);
  ~FramedPipe() { Close(); }
  FramedPipe(const FramedPipe&) = delete;
  FramedPipe& operator=(const FramedPipe&) = delete;

  // Queues `bytes` (whole frames); false once closed, once a write found
  // the peer gone (peer_gone), or if this write closed it (no callback says
  // so).
  bool Write(std::string bytes);
  // A write found the peer closed; reading goes on to its end.
  bool peer_gone() const { return peer_gone_; }
  // Bytes written and not yet taken by the kernel.
  size_t queued() const { return queued_; }
  bool closed() const { return pipe_ == nullptr; }
  // Stops reading and closes the socket; queued writes are dropped. No
  // callback runs after it.
  void Close();

 private:
  FramedPipe(size_t max_frame, Callbacks callbacks)
      : reader_(max_frame), callbacks_(std::move(callbacks)) {}
  absl::Status Start();
  void OnRead(ssize_t n);
  void Fail(std::string why);
  void WriteFailed(int status);
  struct WriteRequest;

  FrameReader reader_;
  Callbacks callbacks_;
  UvPtr<uv_pipe_t> pipe_;
  size_t queued_ = 0;
  bool peer_gone_ = false;
};

}  // namespace ltd
