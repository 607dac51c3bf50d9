#include "framed_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <utility>

#include "posix_error.h"

namespace ltd {
namespace {

constexpr size_t kReadChunk = 64 << 10;
// What a read fills: the bytes go to the pipe's FrameReader before the
// next read on this thread, so that one buffer serves every pipe (ltd
// holds one to each supervisor).
thread_local char read_buffer[kReadChunk];

}  // namespace

struct FramedPipe::WriteRequest {
  uv_write_t req{};
  std::string bytes;
  std::weak_ptr<FramedPipe> pipe;  // the pipe may be gone when it is called back
};

absl::StatusOr<std::shared_ptr<FramedPipe>> FramedPipe::Open(uv_loop_t* loop, int fd,
                                                             size_t max_frame,
                                                             Callbacks callbacks) {
  std::shared_ptr<FramedPipe> p(new FramedPipe(max_frame, std::move(callbacks)));
  // No program this process starts gets it (a supervisor's fd 3 came
  // without close-on-exec, through posix_spawn's dup2).
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  int rc = 0;
  p->pipe_ = UvInit<uv_pipe_t>([&](uv_pipe_t* h) { return rc = uv_pipe_init(loop, h, 0); });
  if (!p->pipe_) {
    close(fd);
    return PosixError("uv_pipe_init", "a supervisor's connection", -rc);
  }
  if ((rc = uv_pipe_open(p->pipe_.get(), fd)) != 0) {
    close(fd);
    return PosixError("uv_pipe_open", "a supervisor's connection", -rc);
  }
  if (absl::Status s = p->Start(); !s.ok()) return s;
  return p;
}

absl::StatusOr<std::shared_ptr<FramedPipe>> FramedPipe::Accept(uv_loop_t* loop, uv_stream_t* server,
                                                               size_t max_frame,
                                                               Callbacks callbacks) {
  std::shared_ptr<FramedPipe> p(new FramedPipe(max_frame, std::move(callbacks)));
  int rc = 0;
  p->pipe_ = UvInit<uv_pipe_t>([&](uv_pipe_t* h) { return rc = uv_pipe_init(loop, h, 0); });
  if (!p->pipe_) return PosixError("uv_pipe_init", "a connection", -rc);
  if ((rc = uv_accept(server, reinterpret_cast<uv_stream_t*>(p->pipe_.get()))) != 0) {
    return PosixError("accept", "a connection", -rc);
  }
  if (absl::Status s = p->Start(); !s.ok()) return s;
  return p;
}

absl::Status FramedPipe::Start() {
  pipe_->data = this;
  const int rc = uv_read_start(
      reinterpret_cast<uv_stream_t*>(pipe_.get()),
      [](uv_handle_t*, size_t, uv_buf_t* buf) { *buf = uv_buf_init(read_buffer, kReadChunk); },
      [](uv_stream_t* s, ssize_t n, const uv_buf_t*) {
        if (s->data != nullptr) static_cast<FramedPipe*>(s->data)->OnRead(n);
      });
  if (rc != 0) return PosixError("uv_read_start", "a connection", -rc);
  return absl::OkStatus();
}

void FramedPipe::OnRead(ssize_t n) {
  if (n == 0) return;
  // A reset: the peer closed with bytes of ours unread (a supervisor
  // that exited as a call came).
  if (n == UV_EOF || n == UV_ECONNRESET) return Fail(std::string(kPeerClosed));
  if (n < 0) return Fail(uv_strerror(static_cast<int>(n)));
  reader_.Feed(std::string_view(read_buffer, static_cast<size_t>(n)));
  // A frame's callback may close this pipe, or drop the last owner of it.
  std::shared_ptr<FramedPipe> self = shared_from_this();
  for (;;) {
    std::string_view frame;
    const FrameReader::Got got = reader_.Next(&frame);
    if (got == FrameReader::Got::kMore) break;
    if (got == FrameReader::Got::kTooLarge) return Fail(std::string(kOverBound));
    if (callbacks_.frame) callbacks_.frame(frame);
    if (closed()) return;
  }
}

void FramedPipe::Fail(std::string why) {
  if (closed()) return;
  auto closed_cb = std::move(callbacks_.closed);
  Close();
  if (closed_cb) closed_cb(std::move(why));
}

bool FramedPipe::Write(std::string bytes) {
  if (closed() || peer_gone_) return false;
  auto* w = new WriteRequest;
  w->bytes = std::move(bytes);
  w->pipe = weak_from_this();
  w->req.data = w;
  const size_t size = w->bytes.size();
  uv_buf_t buf = uv_buf_init(w->bytes.data(), static_cast<unsigned>(size));
  const int rc =
      uv_write(&w->req, reinterpret_cast<uv_stream_t*>(pipe_.get()), &buf, 1,
               [](uv_write_t* req, int status) {
                 std::unique_ptr<WriteRequest> done(static_cast<WriteRequest*>(req->data));
                 auto self = done->pipe.lock();
                 if (!self || self->closed()) return;
                 self->queued_ -= std::min(self->queued_, done->bytes.size());
                 if (status != 0) return self->WriteFailed(status);
                 if (self->queued_ == 0 && self->callbacks_.drained) {
                   self->callbacks_.drained();
                 }
               });
  if (rc != 0) {
    // Said by the return alone: the caller may be in the middle of
    // something a callback would change.
    delete w;
    Close();
    return false;
  }
  queued_ += size;
  return true;
}

void FramedPipe::WriteFailed(int status) {
  // The peer closed: nothing more goes out, but its last frames (a
  // supervisor's answers and final record, sent before it hung up) may
  // still be unread here; they are read, then the end of the stream ends
  // the pipe. Failing now lost them (a kill answered, then reported as
  // not answered).
  if (status == UV_EPIPE || status == UV_ECONNRESET) {
    peer_gone_ = true;
    queued_ = 0;
    return;
  }
  Fail(uv_strerror(status));
}

void FramedPipe::Close() {
  if (!pipe_) return;
  // Pending writes are called back cancelled, and find it closed. The
  // callbacks stay (one may be running now), never to be called.
  pipe_.reset();
  queued_ = 0;
}

}  // namespace ltd
