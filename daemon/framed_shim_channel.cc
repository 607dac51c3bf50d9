#include "framed_shim_channel.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "shim_frames.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

namespace pb = shim::v1;

absl::Status StatusOf(const pb::Failure& failure) {
  const int code = failure.code();
  // A code this release does not know (or 0, which is no failure) is not
  // passed on as if it meant something.
  const absl::StatusCode c =
      code > 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated)
          ? static_cast<absl::StatusCode>(code)
          : absl::StatusCode::kUnknown;
  return absl::Status(c, failure.message());
}

absl::Status WrongAnswer() { return absl::InternalError("it answered something else"); }

}  // namespace

std::unique_ptr<ShimChannel> FramedShimChannel::Open(Loop& loop, Fd connection,
                                                     std::string socket_path) {
  std::unique_ptr<FramedShimChannel> c(new FramedShimChannel(loop, std::move(socket_path)));
  c->Start(std::move(connection));
  return c;
}

absl::StatusOr<Fd> FramedShimChannel::ConnectNow(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError("its socket's path is too long");
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return absl::UnavailableError(Cat("socket: ", std::strerror(errno)));
  // A Unix socket connects at once or not at all (EAGAIN: its backlog is
  // full, the supervisor wedged); ltd does not wait for it.
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(Cat("it does not take connections (", std::strerror(errno), ")"));
  }
  return fd;
}

std::unique_ptr<ShimChannel> FramedShimChannel::Connect(Loop& loop, std::string socket_path) {
  std::unique_ptr<FramedShimChannel> c(new FramedShimChannel(loop, std::move(socket_path)));
  absl::StatusOr<Fd> fd = ConnectNow(c->socket_path_);
  if (!fd.ok()) {
    c->broken_ = std::string(fd.status().message());
    return c;
  }
  c->Start(std::move(*fd));
  return c;
}

void FramedShimChannel::Start(Fd connection) {
  std::weak_ptr<bool> alive = alive_;
  FramedPipe::Callbacks callbacks;
  callbacks.frame = [this, alive](std::string_view frame) {
    if (!alive.expired()) OnFrame(frame);
  };
  callbacks.closed = [this, alive](std::string why) {
    if (alive.expired()) return;
    Broken(why == FramedPipe::kPeerClosed  ? "its connection closed"
           : why == FramedPipe::kOverBound ? "it sent a frame over the bound"
                                           : "its connection failed");
  };
  auto pipe =
      FramedPipe::Open(loop_.get(), connection.release(), kMaxAnswerFrame, std::move(callbacks));
  if (!pipe.ok()) {
    broken_ = std::string(pipe.status().message());
    return;
  }
  pipe_ = std::move(*pipe);
}

FramedShimChannel::~FramedShimChannel() {
  *alive_ = false;
  Broken("ltd let go of it");
}

void FramedShimChannel::Broken(const std::string& why) {
  if (broken_.empty()) broken_ = why;
  if (pipe_) pipe_->Close();
  pipe_.reset();
  for (auto& [id, pending] : pending_) {
    Later([answered = std::move(pending.answered), why] { answered(absl::UnavailableError(why)); });
  }
  pending_.clear();
  if (watch_id_ != 0) {
    watch_id_ = 0;
    sink_.reset();
    Later([end = std::move(end_), why] { end(why); });
    end_ = nullptr;
  }
}

std::string FramedShimChannel::Unsent() {
  // Gone: what it sent before it closed still answers earlier calls, and
  // the end of its stream then ends the channel.
  if (pipe_->peer_gone() && !pipe_->closed()) return "its connection closed";
  Broken("its connection failed");
  return "its connection failed";
}

void FramedShimChannel::OnFrame(std::string_view frame) {
  pb::Answer answer;
  if (!answer.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) {
    return Broken("its connection carried something that is no answer");
  }
  if (answer.id() != 0 && answer.id() == watch_id_) {
    switch (answer.answer_case()) {
      case pb::Answer::kEvent: {
        // Held here: the sink may let go of this channel.
        std::shared_ptr<Sink> sink = sink_;
        (*sink)(answer.event());
        return;
      }
      case pb::Answer::kWatchEnd:
      case pb::Answer::kFailure: {
        watch_id_ = 0;
        sink_.reset();
        std::string why = answer.has_failure() ? std::string(StatusOf(answer.failure()).message())
                                               : std::string();
        Later([end = std::move(end_), why = std::move(why)] { end(why); });
        end_ = nullptr;
        return;
      }
      default:
        return;  // an answer of a later release's
    }
  }
  auto it = pending_.find(answer.id());
  if (it == pending_.end()) return;  // past its deadline
  Answered answered = std::move(it->second.answered);
  pending_.erase(it);
  if (closing_ && pending_.empty()) Broken("cancelled");  // the last call was answered
  if (answer.has_failure()) return answered(StatusOf(answer.failure()));
  answered(std::move(answer));
}

void FramedShimChannel::Call(pb::Call call, std::chrono::milliseconds timeout, Answered answered) {
  if (!broken_.empty() || closing_) {
    std::string why = closing_ ? "cancelled" : broken_;
    return Later([answered = std::move(answered), why = std::move(why)] {
      answered(absl::UnavailableError(why));
    });
  }
  const uint64_t id = next_id_++;
  call.set_id(id);
  std::string bytes;
  if (!AppendFrame(call, &bytes) || !pipe_->Write(std::move(bytes))) {
    return Later([answered = std::move(answered), why = Unsent()] {
      answered(absl::UnavailableError(why));
    });
  }
  Pending& p = pending_[id];
  p.channel = this;
  p.id = id;
  p.answered = std::move(answered);
  p.timer = UvInit<uv_timer_t>([&](uv_timer_t* t) { return uv_timer_init(loop_.get(), t); });
  if (!p.timer) return;  // the connection's end still answers it
  // The timer is the call's, and goes with it (a map's node stays put).
  p.timer->data = &p;
  uv_timer_start(
      p.timer.get(),
      [](uv_timer_t* t) {
        auto* call = static_cast<Pending*>(t->data);
        FramedShimChannel* self = call->channel;
        Answered answered = std::move(call->answered);
        self->pending_.erase(call->id);  // closes this timer
        if (self->closing_ && self->pending_.empty()) self->Broken("cancelled");
        answered(absl::DeadlineExceededError("it did not answer in time"));
      },
      static_cast<uint64_t>(timeout.count()), 0);
}

void FramedShimChannel::Watch(Sink sink, End end) {
  if (!broken_.empty()) {
    return Later([end = std::move(end), why = broken_] { end(why); });
  }
  pb::Call call;
  const uint64_t id = next_id_++;
  call.set_id(id);
  pb::WatchRequest* w = call.mutable_watch();
  w->set_beats(true);
  w->set_slim_records(true);
  w->set_typed_records(true);
  std::string bytes;
  if (!AppendFrame(call, &bytes) || !pipe_->Write(std::move(bytes))) {
    return Later([end = std::move(end), why = Unsent()] { end(why); });
  }
  watch_id_ = id;
  sink_ = std::make_shared<Sink>(std::move(sink));
  end_ = std::move(end);
}

void FramedShimChannel::Cancel() {
  // The watch ends now; calls in flight are still answered (a kill whose
  // answer follows the final record it caused), then the connection closes.
  if (watch_id_ != 0) {
    watch_id_ = 0;
    sink_.reset();
    Later([end = std::move(end_)] { end("cancelled"); });
    end_ = nullptr;
  }
  closing_ = true;
  if (pending_.empty()) Broken("cancelled");
}

void FramedShimChannel::Kill(const pb::KillRequest& request, Done<pb::KillReply> done) {
  pb::Call call;
  *call.mutable_kill() = request;
  Call(std::move(call), kCallTimeout, [done = std::move(done)](absl::StatusOr<pb::Answer> got) {
    if (!got.ok()) return done(got.status());
    if (!got->has_kill()) return done(WrongAnswer());
    done(got->kill());
  });
}

void FramedShimChannel::SetOutput(bool on, Done<pb::SetOutputReply> done) {
  pb::Call call;
  call.mutable_set_output()->set_on(on);
  Call(std::move(call), kCallTimeout, [done = std::move(done)](absl::StatusOr<pb::Answer> got) {
    if (!got.ok()) return done(got.status());
    if (!got->has_set_output()) return done(WrongAnswer());
    done(got->set_output());
  });
}

void FramedShimChannel::Stack(const pb::StackRequest& request, Done<pb::StackReply> done) {
  pb::Call call;
  *call.mutable_stack() = request;
  // The supervisor answers within the budget; two seconds more for the wire.
  const auto timeout = std::chrono::milliseconds(request.budget_ms()) + std::chrono::seconds(2);
  Call(std::move(call), timeout, [done = std::move(done)](absl::StatusOr<pb::Answer> got) {
    if (!got.ok()) return done(got.status());
    if (!got->has_stack()) return done(WrongAnswer());
    done(std::move(*got->mutable_stack()));
  });
}

}  // namespace ltd
