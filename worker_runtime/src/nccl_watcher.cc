#include "nccl_watcher.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <system_error>

namespace ltworker::internal {
namespace {

bool Failed(int result) { return result != kNcclSuccess && result != kNcclInProgress; }

}  // namespace

NcclWatcher::NcclWatcher(NcclApi* api, Options options)
    : api_(api), options_(std::move(options)), poll_interval_ms_(options_.poll_interval.count()) {}

NcclWatcher::~NcclWatcher() {
  if (thread_.joinable()) {
    stop_.store(true);
    Wake();
    thread_.join();
  }
}

int NcclWatcher::Start() {
  if (thread_.joinable()) return EALREADY;
  // Non-blocking so neither a signal handler nor the thread can stall on it.
  wake_fd_.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd_.valid()) return errno;

  // The thread starts with every signal blocked: SIGTERM must run its
  // handler on an application thread, never on ours, which may be inside an
  // NCCL call when it arrives.
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  int rc = ::pthread_sigmask(SIG_SETMASK, &all, &old);
  if (rc != 0) return rc;
  try {
    thread_ = std::thread([this] { Run(); });
  } catch (const std::system_error& e) {
    rc = e.code().value();
  }
  const int restore_rc = ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return rc != 0 ? rc : restore_rc;
}

int NcclWatcher::Register(CommHandle comm) {
  if (comm == nullptr) return EINVAL;
  std::lock_guard<std::mutex> lock(mu_);
  const bool known = std::any_of(comms_.begin(), comms_.end(),
                                 [comm](const Watched& w) { return w.comm == comm; });
  if (known) return EEXIST;
  comms_.push_back({comm, false});
  return 0;
}

int NcclWatcher::Unregister(CommHandle comm) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(comms_.begin(), comms_.end(),
                         [comm](const Watched& w) { return w.comm == comm; });
  if (it == comms_.end()) return ENOENT;
  comms_.erase(it);
  return 0;
}

void NcclWatcher::SetPollInterval(std::chrono::milliseconds interval) {
  poll_interval_ms_.store(std::max<std::int64_t>(1, interval.count()));
  Wake();
}

void NcclWatcher::NotifySigterm() {
  static_assert(std::atomic<bool>::is_always_lock_free, "must be usable from a signal handler");
  sigterm_pending_.store(true);
  Wake();
}

void NcclWatcher::Wake() {
  if (!wake_fd_.valid()) return;
  const std::uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: the thread will wake
  // anyway. Nothing else can fail on a valid eventfd, and a signal handler
  // has no way to report it.
  (void)!::write(wake_fd_.get(), &one, sizeof one);
}

void NcclWatcher::CheckOnce() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Watched& w : comms_) {
    if (w.aborted) continue;
    int async_error = kNcclSuccess;
    const int rc = api_->GetAsyncError(w.comm, &async_error);
    // A failing query means the communicator is unusable too.
    const int error = Failed(rc) ? rc : async_error;
    if (!Failed(error)) continue;
    if (options_.report_error) {
      std::string text = "NCCL async error on communicator: ";
      text += api_->ErrorString(error);
      options_.report_error(text);
    }
    api_->Abort(w.comm);  // its result changes nothing: the handle is gone either way
    w.aborted = true;
  }
}

void NcclWatcher::AbortAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Watched& w : comms_) {
    if (w.aborted) continue;
    api_->Abort(w.comm);
    w.aborted = true;
  }
}

std::size_t NcclWatcher::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return comms_.size();
}

void NcclWatcher::Run() {
  while (!stop_.load()) {
    pollfd pfd{wake_fd_.get(), POLLIN, 0};
    const int timeout_ms = static_cast<int>(std::min<std::int64_t>(
        poll_interval_ms_.load(std::memory_order_relaxed), 24 * 3600 * 1000));
    const int ready = ::poll(&pfd, 1, timeout_ms);
    if (ready < 0 && errno != EINTR) {
      // poll on one valid eventfd cannot fail short of ENOMEM; do not spin.
      std::perror("ltworker: NCCL watcher poll");
      ::usleep(static_cast<useconds_t>(timeout_ms) * 1000);
    }
    if (ready > 0) {
      std::uint64_t count;
      // EAGAIN only if another read raced us; the wake-up is consumed either way.
      (void)!::read(wake_fd_.get(), &count, sizeof count);
    }
    if (stop_.load()) break;
    if (sigterm_pending_.exchange(false)) {
      AbortAll();
      if (options_.after_sigterm_aborts) options_.after_sigterm_aborts();
      continue;
    }
    CheckOnce();
  }
}

}  // namespace ltworker::internal
