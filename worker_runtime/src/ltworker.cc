// The C API of ltworker.h: process-wide heartbeat fd state and the calls.
#include "ltworker/ltworker.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

#include "line_format.h"
#include "line_writer.h"
#include "ltworker_internal.h"

// The library is built with hidden visibility; only the C API is exported.
#define LT_EXPORT extern "C" __attribute__((visibility("default")))

namespace ltworker::internal {
namespace {

constexpr int kUninitialized = -2;
constexpr int kDisabled = -1;

// The heartbeat fd, kDisabled, or kUninitialized before the first call. It is
// published with release order after g_kind, so a reader that sees an fd
// also sees its kind; the hot path is one acquire load.
std::atomic<int> g_fd{kUninitialized};
std::atomic<FdKind> g_kind{FdKind::kOther};
std::mutex g_init_mu;  // serializes the first read of the environment

// Parses LT_HEARTBEAT_FD: a plain non-negative decimal, nothing else.
int FdFromEnvironment() {
  const char* value = std::getenv("LT_HEARTBEAT_FD");
  if (value == nullptr || *value == '\0') return kDisabled;
  int fd = 0;
  for (const char* p = value; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9' || fd > 1'000'000) return kDisabled;
    fd = fd * 10 + (*p - '0');
  }
  return fd;
}

int InitSlow() {
  std::lock_guard<std::mutex> lock(g_init_mu);
  int fd = g_fd.load(std::memory_order_relaxed);
  if (fd != kUninitialized) return fd;
  const int saved_errno = errno;  // a failed probe must not leak into errno
  fd = FdFromEnvironment();
  FdKind kind = FdKind::kOther;
  // An fd that is closed or read-only means the variable was inherited from
  // somewhere it no longer holds (a shell that closed 3, say): stay quiet.
  if (fd != kDisabled && !ClassifyFd(fd, &kind)) fd = kDisabled;
  errno = saved_errno;
  g_kind.store(kind, std::memory_order_relaxed);
  g_fd.store(fd, std::memory_order_release);
  return fd;
}

inline int HeartbeatFd() {
  const int fd = g_fd.load(std::memory_order_acquire);
  return fd != kUninitialized ? fd : InitSlow();
}

int Send(int fd, std::size_t length, const char* buffer) {
  if (length == 0) {
    errno = EINVAL;
    return -1;
  }
  return WriteLine(fd, g_kind.load(std::memory_order_relaxed), std::string_view(buffer, length));
}

}  // namespace

void ResetHeartbeatForTesting() {
  std::lock_guard<std::mutex> lock(g_init_mu);
  g_fd.store(kUninitialized, std::memory_order_release);
}

}  // namespace ltworker::internal

namespace lti = ltworker::internal;

LT_EXPORT int lt_enabled(void) { return lti::HeartbeatFd() >= 0 ? 1 : 0; }

LT_EXPORT int lt_heartbeat(void) {
  const int fd = lti::HeartbeatFd();
  if (fd < 0) return 0;
  char buffer[lti::kShortLineBytes];
  return lti::Send(fd, lti::FormatHeartbeat(buffer), buffer);
}

LT_EXPORT int lt_heartbeat_step(int64_t step) {
  const int fd = lti::HeartbeatFd();
  if (fd < 0) return 0;
  char buffer[lti::kShortLineBytes];
  return lti::Send(fd, lti::FormatHeartbeatStep(step, buffer), buffer);
}

LT_EXPORT int lt_set_timeout_ms(int64_t milliseconds) {
  const int fd = lti::HeartbeatFd();
  if (fd < 0) return 0;
  char buffer[lti::kShortLineBytes];
  return lti::Send(fd, lti::FormatTimeout(milliseconds, buffer), buffer);
}

LT_EXPORT int lt_report_error_n(const char* text, size_t length) {
  const int fd = lti::HeartbeatFd();
  if (fd < 0) return 0;
  if (text == nullptr) length = 0;
  char buffer[lti::kMaxLineBytes];
  return lti::Send(fd, lti::FormatError(std::string_view(text, length), buffer), buffer);
}

LT_EXPORT int lt_report_error(const char* text) {
  return lt_report_error_n(text, text == nullptr ? 0 : std::strlen(text));
}
