// The C and C++ APIs against real fds: a socketpair and a pipe, as ltd may
// hand either to a rank.
#include "ltworker/ltworker.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "line_format.h"
#include "ltworker/ltworker.hpp"
#include "ltworker_internal.h"
#include "test_util.h"

namespace ltworker {
namespace {

using internal::kMaxLineBytes;
using testing::kDeadline;
using testing::NothingToRead;
using testing::ReadLines;
using testing::SplitLines;

enum class Channel { kSocket, kPipe };

std::string ChannelName(const ::testing::TestParamInfo<Channel>& info) {
  return info.param == Channel::kSocket ? "Socket" : "Pipe";
}

// Points LT_HEARTBEAT_FD at a fresh channel for each test and forgets it
// afterwards, so every test starts from a first use of the library.
class HeartbeatTest : public ::testing::TestWithParam<Channel> {
 protected:
  void SetUp() override {
    int fds[2];
    if (GetParam() == Channel::kSocket) {
      ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0) << strerror(errno);
      reader_ = fds[0];
      writer_ = fds[1];
    } else {
      ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0) << strerror(errno);
      reader_ = fds[0];
      writer_ = fds[1];
    }
    ASSERT_EQ(::setenv("LT_HEARTBEAT_FD", std::to_string(writer_).c_str(), 1), 0);
    internal::ResetHeartbeatForTesting();
  }

  void TearDown() override {
    ::unsetenv("LT_HEARTBEAT_FD");
    internal::ResetHeartbeatForTesting();
    CloseReader();
    if (writer_ >= 0) ::close(writer_);
  }

  void CloseReader() {
    if (reader_ >= 0) ::close(reader_);
    reader_ = -1;
  }

  std::string Read(std::size_t lines) { return ReadLines(reader_, lines); }

  int reader_ = -1;
  int writer_ = -1;
};

INSTANTIATE_TEST_SUITE_P(Channels, HeartbeatTest,
                         ::testing::Values(Channel::kSocket, Channel::kPipe), ChannelName);

TEST_P(HeartbeatTest, EnabledWithValidFd) { EXPECT_EQ(lt_enabled(), 1); }

TEST_P(HeartbeatTest, WritesExactLines) {
  EXPECT_EQ(lt_heartbeat(), 0);
  EXPECT_EQ(lt_heartbeat_step(0), 0);
  EXPECT_EQ(lt_heartbeat_step(42), 0);
  EXPECT_EQ(lt_set_timeout_ms(500), 0);
  EXPECT_EQ(lt_set_timeout_ms(120000), 0);
  EXPECT_EQ(lt_set_timeout_ms(0), 0);
  EXPECT_EQ(lt_report_error("CUDA error: an illegal memory access"), 0);
  EXPECT_EQ(Read(7),
            "hb\n"
            "hb 0\n"
            "hb 42\n"
            "timeout 500ms\n"
            "timeout 120s\n"
            "timeout 0\n"
            "error CUDA error: an illegal memory access\n");
}

TEST_P(HeartbeatTest, CppApiWritesTheSameLines) {
  EXPECT_TRUE(Enabled());
  EXPECT_TRUE(Heartbeat());
  EXPECT_TRUE(Heartbeat(9));
  EXPECT_TRUE(SetTimeout(std::chrono::minutes(5)));
  EXPECT_TRUE(SetTimeout(std::chrono::milliseconds(250)));
  const std::string text = "bad\nthing happened";
  EXPECT_TRUE(ReportError(std::string_view(text).substr(0, 9)));  // not NUL-terminated
  EXPECT_EQ(Read(5), "hb\nhb 9\ntimeout 300s\ntimeout 250ms\nerror bad thing\n");
}

// A positive timeout never becomes "timeout 0" (watchdog off): it rounds up
// to a whole millisecond, and one too long for ltd is sent as the longest.
TEST_P(HeartbeatTest, CppTimeoutRoundsUpToWholeMilliseconds) {
  using namespace std::chrono;
  EXPECT_TRUE(SetTimeout(microseconds(400)));
  EXPECT_TRUE(SetTimeout(nanoseconds(1)));
  EXPECT_TRUE(SetTimeout(microseconds(1500)));
  EXPECT_TRUE(SetTimeout(nanoseconds(1'000'000)));
  EXPECT_TRUE(SetTimeout(duration<double>(0.0004)));
  EXPECT_TRUE(SetTimeout(duration<double>(1.1)));  // 1100ms, not 1101 from 1.1's binary excess
  EXPECT_TRUE(SetTimeout(duration<double, std::milli>(1e-9)));
  EXPECT_TRUE(SetTimeout(duration<double, std::pico>(1e-300)));  // 0 in microseconds
  EXPECT_TRUE(SetTimeout(duration<float>(2.5f)));
  EXPECT_TRUE(SetTimeout(microseconds(0)));  // only an explicit zero is "off"
  EXPECT_TRUE(SetTimeout(duration<double>(0.0)));
  EXPECT_EQ(Read(11),
            "timeout 1ms\ntimeout 1ms\ntimeout 2ms\ntimeout 1ms\ntimeout 1ms\n"
            "timeout 1100ms\ntimeout 1ms\ntimeout 1ms\ntimeout 2500ms\ntimeout 0\ntimeout 0\n");
}

TEST_P(HeartbeatTest, CppHugeTimeoutIsTheLongestLtdAcceptsNeverNegativeOrZero) {
  using namespace std::chrono;
  EXPECT_TRUE(SetTimeout(hours::max()));  // overflows if converted to milliseconds
  EXPECT_TRUE(SetTimeout(milliseconds::max()));
  EXPECT_TRUE(SetTimeout(nanoseconds::max()));
  EXPECT_TRUE(SetTimeout(duration<std::int64_t, std::ratio<31'536'000>>(2)));  // two years
  EXPECT_TRUE(SetTimeout(duration<double>(1e300)));
  EXPECT_TRUE(SetTimeout(hours(24 * 365)));  // exactly the longest
  EXPECT_TRUE(SetTimeout(duration<unsigned, std::ratio<86400>>(400)));
  EXPECT_TRUE(SetTimeout(duration<double, std::ratio<3600>>(1e306)));  // inf in microseconds
  EXPECT_EQ(Read(8),
            "timeout 31536000s\ntimeout 31536000s\ntimeout 31536000s\ntimeout 31536000s\n"
            "timeout 31536000s\ntimeout 31536000s\ntimeout 31536000s\ntimeout 31536000s\n");
  EXPECT_EQ(lt_set_timeout_ms(std::numeric_limits<std::int64_t>::max()), 0);
  EXPECT_EQ(Read(1), "timeout 31536000s\n");
}

TEST_P(HeartbeatTest, CppNegativeOrNotANumberTimeoutFailsWithoutWriting) {
  using namespace std::chrono;
  for (bool ok :
       {SetTimeout(seconds(-1)), SetTimeout(microseconds(-400)), SetTimeout(nanoseconds(-1)),
        SetTimeout(hours::min()), SetTimeout(duration<double>(-0.0004)),
        SetTimeout(duration<double>(std::numeric_limits<double>::quiet_NaN())),
        SetTimeout(duration<double>(std::numeric_limits<double>::infinity()))}) {
    EXPECT_FALSE(ok);
  }
  errno = 0;
  EXPECT_FALSE(SetTimeout(microseconds(-1)));
  EXPECT_EQ(errno, EINVAL);
  EXPECT_TRUE(NothingToRead(reader_));
}

TEST_P(HeartbeatTest, InvalidArgumentsFailWithoutWriting) {
  errno = 0;
  EXPECT_EQ(lt_heartbeat_step(-1), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(lt_set_timeout_ms(-1000), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_FALSE(Heartbeat(-3));
  EXPECT_TRUE(NothingToRead(reader_));
}

TEST_P(HeartbeatTest, ErrorTextNewlinesBecomeSpaces) {
  EXPECT_EQ(lt_report_error("Traceback (most recent call last):\n  boom\r\n"), 0);
  EXPECT_EQ(lt_report_error(nullptr), 0);
  EXPECT_EQ(Read(2), "error Traceback (most recent call last):   boom  \nerror\n");
}

TEST_P(HeartbeatTest, LongErrorIsTruncatedToOneLineUnder4KiB) {
  const std::string text(20000, 'e');
  EXPECT_EQ(lt_report_error(text.c_str()), 0);
  EXPECT_EQ(lt_heartbeat_step(1), 0);
  const std::vector<std::string> lines = SplitLines(Read(2));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].size() + 1, kMaxLineBytes);
  EXPECT_LT(lines[0].size() + 1, 4096u);
  EXPECT_EQ(lines[0].substr(0, 7), "error e");
  EXPECT_EQ(lines[0].substr(lines[0].size() - 3), "...");
  EXPECT_EQ(lines[1], "hb 1");
}

TEST_P(HeartbeatTest, DoesNotChangeTheSharedFdFlags) {
  const int before = ::fcntl(writer_, F_GETFL);
  ASSERT_GE(before, 0);
  EXPECT_EQ(lt_heartbeat(), 0);
  EXPECT_EQ(::fcntl(writer_, F_GETFL), before);
  EXPECT_EQ(before & O_NONBLOCK, 0);
}

// Many threads, lines of very different lengths (up to the limit): every
// line that a call reported as written arrives whole, and nothing else does.
TEST_P(HeartbeatTest, ConcurrentWritersProduceOnlyWholeLines) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2000;
  std::atomic<int> written{0};
  std::string received;
  std::atomic<bool> writers_done{false};
  // The reader drains while the writers run; a line dropped for a full
  // buffer is fine, a torn one is not.
  std::thread reader([&] {
    char buf[65536];
    while (true) {
      pollfd pfd{reader_, POLLIN, 0};
      const int ready = ::poll(&pfd, 1, 100);
      if (ready == 0 && writers_done.load()) break;
      if (ready <= 0) continue;
      const ssize_t n = ::read(reader_, buf, sizeof buf);
      if (n <= 0) break;
      received.append(buf, static_cast<std::size_t>(n));
    }
  });
  const std::string long_text(kMaxLineBytes, 'L');  // cut to the limit
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        int rc;
        switch (i % 3) {
          case 0:
            rc = lt_heartbeat_step(t * 1000000 + i);
            break;
          case 1:
            rc = lt_report_error(long_text.c_str());
            break;
          default:
            rc = lt_report_error_n(long_text.data(), 100 + static_cast<std::size_t>(t));
            break;
        }
        if (rc == 0) written.fetch_add(1);
      }
    });
  }
  for (std::thread& w : writers) w.join();
  writers_done.store(true);
  reader.join();

  ASSERT_FALSE(received.empty());
  ASSERT_EQ(received.back(), '\n');
  const std::string long_line = "error " + std::string(kMaxLineBytes - 10, 'L') + "...";
  int good = 0;
  for (const std::string& line : SplitLines(received)) {
    const bool ok = (line.rfind("hb ", 0) == 0 && line.size() > 3 &&
                     line.find_first_not_of("0123456789", 3) == std::string::npos) ||
                    line == long_line ||
                    (line.size() >= 106 && line.size() <= 113 &&
                     line == "error " + std::string(line.size() - 6, 'L'));
    EXPECT_TRUE(ok) << "torn line of " << line.size() << " bytes: " << line.substr(0, 40);
    good += ok;
  }
  EXPECT_EQ(good, written.load());
  EXPECT_GT(written.load(), 0);
}

// Runs `fn` on its own thread and returns its result, or nullopt if it is
// still running at the deadline. The thread is detached so that a call that
// blocks for good fails the test instead of hanging it.
std::optional<int> RunWithDeadline(std::function<int()> fn) {
  auto result = std::make_shared<std::promise<int>>();
  std::future<int> future = result->get_future();
  std::thread([fn = std::move(fn), result] { result->set_value(fn()); }).detach();
  if (future.wait_for(kDeadline) != std::future_status::ready) return std::nullopt;
  return future.get();
}

// Nobody reads: the buffer fills, and then calls fail with EAGAIN instead of
// stalling the training loop.
TEST_P(HeartbeatTest, FullBufferDoesNotBlock) {
  const std::optional<int> filled = RunWithDeadline([] {
    const std::string text(3000, 'f');
    for (int i = 0; i < 1000000; ++i) {
      if (lt_report_error(text.c_str()) != 0) return errno;
    }
    return 0;
  });
  ASSERT_TRUE(filled.has_value()) << "a heartbeat call blocked";
  EXPECT_EQ(*filled, EAGAIN);
  // Still failing fast, for short lines too (a short line may still fit in
  // the last partly filled pipe page, so allow a few).
  const std::optional<int> again = RunWithDeadline([] {
    for (int i = 0; i < 10000; ++i) {
      if (lt_heartbeat_step(i) != 0) return errno;
    }
    return 0;
  });
  ASSERT_TRUE(again.has_value()) << "a heartbeat call blocked";
  EXPECT_EQ(*again, EAGAIN);
}

// ltd went away: SIGPIPE (default action: die) must never reach the rank,
// and the thread's signal state is as it was.
TEST_P(HeartbeatTest, ClosedReaderDoesNotKillTheProcess) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  struct sigaction old;
  ASSERT_EQ(::sigaction(SIGPIPE, &dfl, &old), 0);
  CloseReader();

  errno = 0;
  EXPECT_EQ(lt_heartbeat_step(5), -1);
  EXPECT_EQ(errno, EPIPE);
  EXPECT_EQ(lt_report_error("x"), -1);

  sigset_t mask;
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &mask), 0);
  EXPECT_FALSE(sigismember(&mask, SIGPIPE)) << "SIGPIPE left blocked";
  sigset_t pending;
  ASSERT_EQ(::sigpending(&pending), 0);
  EXPECT_FALSE(sigismember(&pending, SIGPIPE)) << "SIGPIPE left pending";
  ASSERT_EQ(::sigaction(SIGPIPE, &old, nullptr), 0);
}

// A caller that blocks SIGPIPE itself keeps its mask and its pending signal.
TEST_P(HeartbeatTest, ClosedReaderRespectsCallersBlockedSigpipe) {
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigset_t old;
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &pipe_only, &old), 0);
  CloseReader();
  EXPECT_EQ(lt_heartbeat(), -1);
  EXPECT_EQ(errno, EPIPE);
  sigset_t mask;
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &mask), 0);
  EXPECT_TRUE(sigismember(&mask, SIGPIPE));
  // Clean up the caller's pending SIGPIPE (pipes only; sockets raise none).
  const timespec zero{0, 0};
  while (::sigtimedwait(&pipe_only, nullptr, &zero) == SIGPIPE) {
  }
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, &old, nullptr), 0);
}

// Without LT_HEARTBEAT_FD every call is a no-op that succeeds.
TEST(HeartbeatDisabledTest, NoEnvironmentVariableMeansNoOp) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  ::unsetenv("LT_HEARTBEAT_FD");
  internal::ResetHeartbeatForTesting();
  EXPECT_EQ(lt_enabled(), 0);
  EXPECT_EQ(lt_heartbeat(), 0);
  EXPECT_EQ(lt_heartbeat_step(3), 0);
  EXPECT_EQ(lt_heartbeat_step(-3), 0);  // not even validated: nothing to do
  EXPECT_EQ(lt_set_timeout_ms(1000), 0);
  EXPECT_EQ(lt_report_error("boom"), 0);
  EXPECT_FALSE(Enabled());
  EXPECT_TRUE(Heartbeat(1));
  EXPECT_TRUE(NothingToRead(fds[0]));
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(HeartbeatDisabledTest, UnusableFdMeansNoOp) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  int closed[2];
  ASSERT_EQ(::pipe2(closed, O_CLOEXEC), 0);
  ::close(closed[0]);
  ::close(closed[1]);
  const std::string cases[] = {
      "",
      "abc",
      "3x",
      "-1",
      "99999999999",
      std::to_string(closed[1]),
      std::to_string(fds[0]),  // open, but read-only
  };
  for (const std::string& value : cases) {
    ASSERT_EQ(::setenv("LT_HEARTBEAT_FD", value.c_str(), 1), 0);
    internal::ResetHeartbeatForTesting();
    EXPECT_EQ(lt_enabled(), 0) << "LT_HEARTBEAT_FD=" << value;
    EXPECT_EQ(lt_heartbeat(), 0) << "LT_HEARTBEAT_FD=" << value;
  }
  ::unsetenv("LT_HEARTBEAT_FD");
  internal::ResetHeartbeatForTesting();
  ::close(fds[0]);
  ::close(fds[1]);
}

// The environment is read once: later changes do not move the heartbeat.
TEST(HeartbeatDisabledTest, EnvironmentIsReadOnce) {
  ::unsetenv("LT_HEARTBEAT_FD");
  internal::ResetHeartbeatForTesting();
  EXPECT_EQ(lt_enabled(), 0);
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  ASSERT_EQ(::setenv("LT_HEARTBEAT_FD", std::to_string(fds[1]).c_str(), 1), 0);
  EXPECT_EQ(lt_enabled(), 0);
  EXPECT_EQ(lt_heartbeat(), 0);
  EXPECT_TRUE(NothingToRead(fds[0]));
  ::unsetenv("LT_HEARTBEAT_FD");
  internal::ResetHeartbeatForTesting();
  ::close(fds[0]);
  ::close(fds[1]);
}

// Threads racing on the first call all see the same, fully initialized fd.
TEST(HeartbeatInitTest, ConcurrentFirstUse) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  ASSERT_EQ(::setenv("LT_HEARTBEAT_FD", std::to_string(fds[1]).c_str(), 1), 0);
  internal::ResetHeartbeatForTesting();
  constexpr int kThreads = 16;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&ok] { ok += lt_heartbeat() == 0; });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), kThreads);
  EXPECT_EQ(SplitLines(ReadLines(fds[0], kThreads)), std::vector<std::string>(kThreads, "hb"));
  ::unsetenv("LT_HEARTBEAT_FD");
  internal::ResetHeartbeatForTesting();
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace ltworker
