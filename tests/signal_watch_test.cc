// Signals taken on a real libuv loop through a signalfd (loop/signal_watch.h),
// and what a blocked signal does once no watch takes it. The signals are
// sent to the test's own thread (pthread_kill): other tests of this binary
// may leave threads that do not block them.
#include "signal_watch.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <chrono>
#include <vector>

#include "loop.h"
#include "run_loop.h"

namespace ltd::test {
namespace {

using namespace std::chrono_literals;

sigset_t Set(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : signals) sigaddset(&set, s);
  return set;
}

volatile sig_atomic_t g_handled = 0;

TEST(SignalWatch, EachSignalComesToTheLoopOnce) {
  const sigset_t set = Set({SIGUSR1, SIGUSR2});
  BlockedSignals blocked(set);
  Loop loop;
  std::vector<int> seen;
  auto watch = SignalWatch::Start(loop.get(), set, [&](int s) { seen.push_back(s); });
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_EQ(pthread_kill(pthread_self(), SIGUSR1), 0);
  ASSERT_EQ(pthread_kill(pthread_self(), SIGUSR2), 0);
  EXPECT_TRUE(RunLoopUntil(
      loop.get(), [&] { return seen.size() >= 2; }, 10s));
  EXPECT_EQ(seen, (std::vector<int>{SIGUSR1, SIGUSR2}));
  // Taken, not left pending for the unblock.
  sigset_t pending;
  sigpending(&pending);
  EXPECT_FALSE(sigismember(&pending, SIGUSR1));
  EXPECT_FALSE(sigismember(&pending, SIGUSR2));
  watch->reset();
  EXPECT_EQ(loop.Close(), 0);
}

TEST(SignalWatch, TheCallbackMayEndTheWatch) {
  const sigset_t set = Set({SIGUSR1});
  BlockedSignals blocked(set);
  Loop loop;
  int seen = 0;
  absl::StatusOr<std::unique_ptr<SignalWatch>> watch;
  watch = SignalWatch::Start(loop.get(), set, [&](int) {
    ++seen;
    watch->reset();
  });
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_EQ(pthread_kill(pthread_self(), SIGUSR1), 0);
  EXPECT_TRUE(RunLoopUntil(
      loop.get(), [&] { return seen == 1; }, 10s));
  EXPECT_EQ(*watch, nullptr);
  EXPECT_EQ(loop.Close(), 0);
}

// A signal that came while blocked and no watch took it is delivered as
// its block ends: a supervisor between jobs ends at a stop signal.
TEST(SignalWatch, ASignalNoWatchTookIsDeliveredAtTheUnblock) {
  struct sigaction handler {
  }, old{};
  handler.sa_handler = [](int) { g_handled = 1; };
  ASSERT_EQ(sigaction(SIGUSR1, &handler, &old), 0);
  g_handled = 0;
  {
    BlockedSignals blocked(Set({SIGUSR1}));
    ASSERT_EQ(pthread_kill(pthread_self(), SIGUSR1), 0);
    EXPECT_EQ(g_handled, 0);
  }
  EXPECT_EQ(g_handled, 1);
  sigaction(SIGUSR1, &old, nullptr);
}

}  // namespace
}  // namespace ltd::test
