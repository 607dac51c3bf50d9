// Watches NCCL communicators from a thread of its own.
//
// A rank whose peer died sits in a collective until NCCL's own timeout, if
// any; ltd would only see a hang. The watcher turns that into a prompt,
// explained failure: every poll interval it asks each registered
// communicator for its asynchronous error, and on one it sends the error to
// ltd (the root cause message) and aborts the communicator, so the blocked
// collective returns and the rank exits.
//
// On SIGTERM (ltd's teardown) the same thread aborts every communicator, so
// a rank stuck in a collective can still exit within the grace period. The
// signal handler only calls NotifySigterm(), which is async-signal-safe; the
// NCCL calls, which are not, happen here.
#ifndef LTWORKER_SRC_NCCL_WATCHER_H_
#define LTWORKER_SRC_NCCL_WATCHER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "nccl_api.h"
#include "unique_fd.h"

namespace ltworker::internal {

class NcclWatcher {
 public:
  struct Options {
    std::chrono::milliseconds poll_interval{100};
    // Receives the failure text (without the "error " verb); the real one is
    // lt_report_error_n. Called on the watcher thread, before the abort, so
    // the explanation reaches ltd before the rank's exit does.
    std::function<void(std::string_view)> report_error;
    // Runs on the watcher thread after a SIGTERM's aborts; the real one
    // finishes the signal's default action (sigterm_hook.h).
    std::function<void()> after_sigterm_aborts;
  };

  // `api` must outlive the watcher.
  NcclWatcher(NcclApi* api, Options options);
  ~NcclWatcher();  // stops and joins the thread
  NcclWatcher(const NcclWatcher&) = delete;
  NcclWatcher& operator=(const NcclWatcher&) = delete;

  // Starts the thread. Returns 0, or an errno value (eventfd, thread start).
  int Start();

  // Returns 0, EINVAL for a null comm, EEXIST when already registered.
  int Register(CommHandle comm);
  // Returns 0 or ENOENT. Once it returns, the watcher never touches `comm`
  // again, so the caller may destroy it; it waits for a check or abort in
  // progress on another thread.
  int Unregister(CommHandle comm);

  // Takes effect at the next wait.
  void SetPollInterval(std::chrono::milliseconds interval);

  // Async-signal-safe: asks the thread to abort every communicator.
  void NotifySigterm();

  // One pass of the thread's work, callable directly so tests need no
  // timing: checks each communicator not yet aborted and reports and aborts
  // those with an error.
  void CheckOnce();
  // Aborts every communicator not yet aborted (what SIGTERM leads to).
  void AbortAll();

  // How many communicators are registered (aborted ones included).
  std::size_t size() const;

 private:
  struct Watched {
    CommHandle comm;
    bool aborted;  // by us; the handle is freed then, so never touched again
  };

  void Run();
  void Wake();

  NcclApi* const api_;
  const Options options_;
  std::atomic<std::int64_t> poll_interval_ms_;
  std::atomic<bool> sigterm_pending_{false};
  std::atomic<bool> stop_{false};
  UniqueFd wake_fd_;  // eventfd: NotifySigterm and the destructor write it

  // Held across NCCL calls: that is what makes Unregister's promise hold.
  mutable std::mutex mu_;
  std::vector<Watched> comms_;  // guarded by mu_

  std::thread thread_;
};

}  // namespace ltworker::internal

#endif  // LTWORKER_SRC_NCCL_WATCHER_H_
