#include "signal_watch.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

#include "posix_error.h"

namespace ltd {

BlockedSignals::BlockedSignals(const sigset_t& signals) : signals_(signals) {
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
}

BlockedSignals::~BlockedSignals() { pthread_sigmask(SIG_UNBLOCK, &signals_, nullptr); }

absl::StatusOr<std::unique_ptr<SignalWatch>> SignalWatch::Start(
    uv_loop_t* loop, const sigset_t& signals, std::function<void(int)> on_signal) {
  std::unique_ptr<SignalWatch> w(new SignalWatch());
  w->fd_.reset(signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!w->fd_.valid()) return PosixError("signalfd", "the signals to watch", errno);
  w->on_signal_ = std::move(on_signal);
  int rc = 0;
  w->poll_ =
      UvInit<uv_poll_t>([&](uv_poll_t* p) { return rc = uv_poll_init(loop, p, w->fd_.get()); });
  if (!w->poll_) return PosixError("uv_poll_init", "a signalfd", -rc);
  w->poll_->data = w.get();
  rc = uv_poll_start(w->poll_.get(), UV_READABLE,
                     [](uv_poll_t* p, int, int) { static_cast<SignalWatch*>(p->data)->Read(); });
  if (rc != 0) return PosixError("uv_poll_start", "a signalfd", -rc);
  return w;
}

void SignalWatch::Read() {
  // Each read takes one signal; the callback may end the watch, so the
  // next read is the next wake's.
  signalfd_siginfo info{};
  ssize_t n;
  do {
    n = read(fd_.get(), &info, sizeof info);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof info)) return;
  on_signal_(static_cast<int>(info.ssi_signo));
}

}  // namespace ltd
