// Helpers shared by the worker_runtime tests: reading what a rank wrote, and
// waiting for conditions with a deadline instead of sleeping.
#ifndef LTWORKER_TESTS_TEST_UTIL_H_
#define LTWORKER_TESTS_TEST_UTIL_H_

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace ltworker::testing {

inline constexpr std::chrono::seconds kDeadline{10};

// Polls `done` until it holds or `deadline` passes; returns its last value.
inline bool WaitFor(const std::function<bool()>& done,
                    std::chrono::milliseconds deadline = kDeadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Reads from `fd` until `bytes` holds `lines` complete lines, EOF, or the
// deadline. Returns the bytes read.
inline std::string ReadLines(int fd, std::size_t lines,
                             std::chrono::milliseconds deadline = kDeadline) {
  std::string bytes;
  std::size_t seen = 0;
  const auto end = std::chrono::steady_clock::now() + deadline;
  char buf[65536];
  while (seen < lines) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) seen += buf[i] == '\n';
    bytes.append(buf, static_cast<std::size_t>(n));
  }
  return bytes;
}

// True when nothing is ready to read on `fd` right now.
inline bool NothingToRead(int fd) {
  pollfd pfd{fd, POLLIN, 0};
  return ::poll(&pfd, 1, 0) == 0;
}

inline std::vector<std::string> SplitLines(const std::string& bytes) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t nl; (nl = bytes.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(bytes.substr(start, nl - start));
  }
  if (start < bytes.size()) lines.push_back(bytes.substr(start));  // a torn tail
  return lines;
}

}  // namespace ltworker::testing

#endif  // LTWORKER_TESTS_TEST_UTIL_H_
