#include "sigterm_hook.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>

#include "nccl_watcher.h"

namespace ltworker::internal {
namespace {

std::mutex g_mu;  // serializes install and uninstall

// Read by the handler. g_previous is written before the handler is installed
// and only changed after it is uninstalled, so the handler sees it whole.
std::atomic<NcclWatcher*> g_watcher{nullptr};
struct sigaction g_previous;
std::atomic<bool> g_previous_is_default{false};
std::atomic<int> g_sigterms{0};  // SIGTERMs seen since install

// Async-signal-safe: sigaction and raise are, atomics are lock-free.
void RestoreDefaultAndRaise() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  if (::sigaction(SIGTERM, &dfl, nullptr) != 0) return;  // cannot fail for SIGTERM
  // Inside the handler SIGTERM is blocked: it stays pending and ends the
  // process as soon as the handler returns.
  ::raise(SIGTERM);
}

void Handler(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const bool again = g_sigterms.fetch_add(1) > 0;
  if (NcclWatcher* watcher = g_watcher.load()) watcher->NotifySigterm();
  if (g_previous_is_default.load()) {
    // The watcher raises the default action when done; a repeated SIGTERM
    // means whoever sends them will not wait, so stop waiting for NCCL.
    if (again) RestoreDefaultAndRaise();
  } else if ((g_previous.sa_flags & SA_SIGINFO) != 0) {
    if (g_previous.sa_sigaction != nullptr) g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != SIG_DFL) {
    g_previous.sa_handler(sig);
  }
  errno = saved_errno;
}

}  // namespace

int InstallSigtermHook(NcclWatcher* watcher) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_watcher.load() != nullptr) return EALREADY;
  struct sigaction current;
  if (::sigaction(SIGTERM, nullptr, &current) != 0) return errno;
  const bool has_function = (current.sa_flags & SA_SIGINFO) != 0;
  if (!has_function && current.sa_handler == SIG_IGN) return 0;
  g_previous = current;
  g_previous_is_default.store(!has_function && current.sa_handler == SIG_DFL);
  g_sigterms.store(0);
  g_watcher.store(watcher);

  struct sigaction ours {};
  ours.sa_sigaction = Handler;
  // SA_RESTART: the program's syscalls should not see EINTR because of us.
  // Other signals stay deliverable while the handler runs, as before us.
  ours.sa_flags = SA_SIGINFO | SA_RESTART | (current.sa_flags & SA_ONSTACK);
  sigemptyset(&ours.sa_mask);
  if (::sigaction(SIGTERM, &ours, nullptr) != 0) {
    const int error = errno;
    g_watcher.store(nullptr);
    return error;
  }
  return 0;
}

int UninstallSigtermHook() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_watcher.load() == nullptr) return 0;
  if (::sigaction(SIGTERM, &g_previous, nullptr) != 0) return errno;
  g_watcher.store(nullptr);
  return 0;
}

void FinishSigterm() {
  if (!g_previous_is_default.load()) return;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  if (::sigaction(SIGTERM, &dfl, nullptr) != 0) {
    std::perror("ltworker: restoring SIGTERM");
    return;
  }
  // The watcher thread blocks every signal; let this one through so raise()
  // delivers it here. With SIG_DFL it ends the whole process.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  const int rc = ::pthread_sigmask(SIG_UNBLOCK, &term, nullptr);
  if (rc != 0 || ::raise(SIGTERM) != 0) {
    // Fall back to a process-directed signal: another thread takes it.
    if (::kill(::getpid(), SIGTERM) != 0) std::perror("ltworker: re-raising SIGTERM");
  }
}

}  // namespace ltworker::internal
