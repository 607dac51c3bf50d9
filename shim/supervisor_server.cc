#include "supervisor_server.h"

#include <unistd.h>

#include <utility>

#include "posix_error.h"
#include "shim_frames.h"
#include "spdlog/spdlog.h"

namespace ltd {

namespace pb = shim::v1;

namespace {

// What ltd shows of a stack request refused: a rank that is not the job's,
// too many requests, or the runner's reason; a supervisor still starting
// is one that did not answer.
absl::Status StackRefusal(const absl::Status& s) {
  if (absl::IsInvalidArgument(s) || absl::IsResourceExhausted(s) || absl::IsUnavailable(s)) {
    return s;
  }
  return absl::FailedPreconditionError(s.message());
}

}  // namespace

class SupervisorServer::Connection final : public WatchSink,
                                           public std::enable_shared_from_this<Connection> {
 public:
  Connection(SupervisorServer& server) : server_(server) {}
  ~Connection() override {
    if (pipe_) pipe_->Close();
  }

  void Serve(std::shared_ptr<FramedPipe> pipe) { pipe_ = std::move(pipe); }

  FramedPipe::Callbacks Callbacks() {
    std::weak_ptr<Connection> weak = weak_from_this();
    FramedPipe::Callbacks c;
    c.frame = [weak](std::string_view frame) {
      if (auto self = weak.lock()) self->OnFrame(frame);
    };
    c.closed = [weak](std::string) {
      if (auto self = weak.lock()) self->Hangup();
    };
    c.drained = [weak] {
      if (auto self = weak.lock(); self && self->finishing_) self->Hangup();
    };
    return c;
  }

  // WatchSink.
  void Push(const pb::Event& event) override {
    if (!pipe_ || pipe_->closed() || finishing_) return;
    if (Droppable(event) && pipe_->queued() + event.ByteSizeLong() > kMaxQueuedBytes) {
      ++dropped_;  // ltd reads slower than the ranks write
      return;
    }
    if (pipe_->queued() > kMaxUnreadBytes) {
      spdlog::warn("job={} ltd left {} bytes unread; hanging up on it", server_.service_.job_id(),
                   pipe_->queued());
      return Later();
    }
    if (dropped_ > 0) {
      Send(DroppedNotice(dropped_));
      dropped_ = 0;
    }
    Send(event);
  }
  void Finish() override {
    if (finishing_) return;
    finishing_ = true;
    pb::Answer answer;
    answer.set_id(watch_id_);
    answer.mutable_watch_end();
    Write(answer);
    if (!pipe_ || pipe_->closed() || pipe_->queued() == 0) Later();
  }

  // The connection is done with: unwatched (on a later turn, as the
  // service asks of a sink) and dropped.
  void Later() {
    server_.loop_.Post([weak = weak_from_this()] {
      if (auto self = weak.lock()) self->Hangup();
    });
  }

  void Hangup() {
    if (watching_) {
      watching_ = false;
      server_.service_.Unwatch(this);
    }
    if (pipe_) pipe_->Close();
    server_.Gone(this);
  }

 private:
  void Send(const pb::Event& event) {
    pb::Answer answer;
    answer.set_id(watch_id_);
    *answer.mutable_event() = event;
    Write(answer);
  }

  void Write(const pb::Answer& answer) {
    std::string bytes;
    if (!AppendFrame(answer, &bytes)) {
      spdlog::error("job={} an answer to ltd did not serialize", server_.service_.job_id());
      return;
    }
    if (pipe_ && !pipe_->Write(std::move(bytes))) Later();
  }

  void Fail(uint64_t id, const absl::Status& status) {
    pb::Answer answer;
    answer.set_id(id);
    answer.mutable_failure()->set_code(static_cast<int>(status.code()));
    answer.mutable_failure()->set_message(std::string(status.message()));
    Write(answer);
  }

  void OnFrame(std::string_view frame) {
    pb::Call call;
    if (!call.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) {
      spdlog::warn("job={} a call that is no Call; hanging up", server_.service_.job_id());
      return Hangup();
    }
    pb::Answer answer;
    answer.set_id(call.id());
    ShimService& service = server_.service_;
    switch (call.call_case()) {
      case pb::Call::kHello:
        *answer.mutable_hello() = service.Hello();
        return Write(answer);
      case pb::Call::kWatch:
        if (watching_ || finishing_) {
          return Fail(call.id(), absl::FailedPreconditionError("one watch per connection"));
        }
        watching_ = true;
        watch_id_ = call.id();
        return service.Watch(this, call.watch());
      case pb::Call::kKill:
        // A refusal is the runner's words ("the job has ended").
        if (absl::Status s = service.Kill(call.kill()); !s.ok()) {
          return Fail(call.id(), absl::FailedPreconditionError(s.message()));
        }
        answer.mutable_kill();
        return Write(answer);
      case pb::Call::kSetOutput:
        service.SetOutput(call.set_output().on());
        answer.mutable_set_output();
        return Write(answer);
      case pb::Call::kStack:
        return service.Stack(call.stack(), [weak = weak_from_this(),
                                            id = call.id()](absl::StatusOr<pb::StackReply> got) {
          auto self = weak.lock();
          if (!self) return;
          if (!got.ok()) return self->Fail(id, StackRefusal(got.status()));
          pb::Answer a;
          a.set_id(id);
          *a.mutable_stack() = std::move(*got);
          self->Write(a);
        });
      case pb::Call::CALL_NOT_SET:
        // A call of a later release.
        return Fail(call.id(), absl::UnimplementedError("a call this supervisor does not know"));
    }
  }

  SupervisorServer& server_;
  std::shared_ptr<FramedPipe> pipe_;
  bool watching_ = false;
  bool finishing_ = false;
  uint64_t watch_id_ = 0;
  uint64_t dropped_ = 0;
};

SupervisorServer::~SupervisorServer() { Close(); }

absl::Status SupervisorServer::Listen(const std::string& path) {
  unlink(path.c_str());
  int rc = 0;
  listener_ = UvInit<uv_pipe_t>([&](uv_pipe_t* h) { return rc = uv_pipe_init(loop_.get(), h, 0); });
  if (!listener_) return PosixError("uv_pipe_init", path, -rc);
  if ((rc = uv_pipe_bind(listener_.get(), path.c_str())) != 0) {
    listener_.reset();
    return PosixError("bind", path, -rc);
  }
  path_ = path;
  listener_->data = this;
  rc = uv_listen(reinterpret_cast<uv_stream_t*>(listener_.get()), 16, [](uv_stream_t* s, int st) {
    if (st == 0 && s->data != nullptr) static_cast<SupervisorServer*>(s->data)->OnConnection();
  });
  if (rc != 0) {
    Close();
    return PosixError("listen", path, -rc);
  }
  return absl::OkStatus();
}

absl::Status SupervisorServer::Adopt(int fd) {
  auto connection = std::make_shared<Connection>(*this);
  auto pipe = FramedPipe::Open(loop_.get(), fd, kMaxCallFrame, connection->Callbacks());
  if (!pipe.ok()) return pipe.status();
  connection->Serve(std::move(*pipe));
  connections_.emplace(connection.get(), connection);
  return absl::OkStatus();
}

void SupervisorServer::OnConnection() {
  auto connection = std::make_shared<Connection>(*this);
  auto pipe = FramedPipe::Accept(loop_.get(), reinterpret_cast<uv_stream_t*>(listener_.get()),
                                 kMaxCallFrame, connection->Callbacks());
  if (!pipe.ok()) {
    spdlog::warn("job={} {}", service_.job_id(), std::string(pipe.status().message()));
    return;
  }
  if (connections_.size() >= kMaxConnections) {
    spdlog::warn("job={} {} connections already; one more refused", service_.job_id(),
                 connections_.size());
    return;  // the pipe closes as it goes
  }
  connection->Serve(std::move(*pipe));
  connections_.emplace(connection.get(), connection);
}

void SupervisorServer::Gone(Connection* connection) {
  // Not now: the connection may be in one of its own callbacks.
  loop_.Post([this, alive = alive_, connection] {
    if (*alive) connections_.erase(connection);
  });
}

void SupervisorServer::Close() {
  listener_.reset();
  if (!path_.empty()) unlink(path_.c_str());
  path_.clear();
  *alive_ = false;
  connections_.clear();
}

}  // namespace ltd
