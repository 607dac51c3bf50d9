// The C API of nccl_watch.h: one process-wide watcher over libnccl.
#include "ltworker/nccl_watch.h"

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "ltworker/ltworker.h"
#include "nccl_api_real.h"
#include "nccl_watcher.h"
#include "sigterm_hook.h"

#define LT_EXPORT extern "C" __attribute__((visibility("default")))

namespace ltworker::internal {
namespace {

std::mutex g_mu;
// Created on first registration and deliberately never destroyed: the
// SIGTERM handler may point at it until the process ends, and joining a
// thread from a static destructor at exit could deadlock.
NcclWatcher* g_watcher = nullptr;  // guarded by g_mu
std::int64_t g_interval_ms = -1;   // guarded by g_mu; -1: not set by the program

std::chrono::milliseconds InitialInterval() {
  if (g_interval_ms > 0) return std::chrono::milliseconds(g_interval_ms);
  if (const char* env = std::getenv("LT_NCCL_POLL_MS")) {
    char* end = nullptr;
    const long long ms = std::strtoll(env, &end, 10);
    if (end != env && *end == '\0' && ms > 0) return std::chrono::milliseconds(ms);
  }
  return std::chrono::milliseconds(100);
}

// Returns the running watcher, starting it on first use; sets *error on
// failure.
NcclWatcher* Watcher(int* error) {
  if (g_watcher != nullptr) return g_watcher;
  NcclWatcher::Options options;
  options.poll_interval = InitialInterval();
  options.report_error = [](std::string_view text) {
    // Best effort: a dropped line only costs the explanation, not the abort.
    (void)lt_report_error_n(text.data(), text.size());
  };
  options.after_sigterm_aborts = FinishSigterm;
  auto* watcher = new NcclWatcher(RealNcclApi(), std::move(options));
  if ((*error = watcher->Start()) != 0) {
    delete watcher;
    return nullptr;
  }
  if ((*error = InstallSigtermHook(watcher)) != 0) {
    delete watcher;
    return nullptr;
  }
  g_watcher = watcher;
  return watcher;
}

int Fail(int error) {
  errno = error;
  return -1;
}

}  // namespace
}  // namespace ltworker::internal

namespace lti = ltworker::internal;

LT_EXPORT int lt_nccl_register(ncclComm_t comm) {
  if (comm == nullptr) return lti::Fail(EINVAL);
  std::lock_guard<std::mutex> lock(lti::g_mu);
  int error = 0;
  lti::NcclWatcher* watcher = lti::Watcher(&error);
  if (watcher == nullptr) return lti::Fail(error);
  error = watcher->Register(comm);
  return error == 0 ? 0 : lti::Fail(error);
}

LT_EXPORT int lt_nccl_unregister(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(lti::g_mu);
  if (lti::g_watcher == nullptr) return lti::Fail(ENOENT);
  const int error = lti::g_watcher->Unregister(comm);
  return error == 0 ? 0 : lti::Fail(error);
}

LT_EXPORT int lt_nccl_set_poll_interval_ms(int64_t milliseconds) {
  if (milliseconds < 1) return lti::Fail(EINVAL);
  std::lock_guard<std::mutex> lock(lti::g_mu);
  lti::g_interval_ms = milliseconds;
  if (lti::g_watcher != nullptr) {
    lti::g_watcher->SetPollInterval(std::chrono::milliseconds(milliseconds));
  }
  return 0;
}
