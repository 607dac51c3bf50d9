// The loop and its clock on a real libuv loop: closures posted from other
// threads, timers started and cancelled from timer callbacks, and a loop
// that closes clean (uv_loop_close() == 0) whatever was left pending.
#include "loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "run_loop.h"
#include "uv_clock.h"

namespace ltd::test {
namespace {

using namespace std::chrono_literals;

TEST(LoopTest, ClosuresPostedFromThreadsAllRunInTheirOrder) {
  Loop loop;
  constexpr int kThreads = 4, kEach = 2000;
  std::vector<std::vector<int>> seen(kThreads);  // loop thread only
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) loop.Post([&seen, t, i] { seen[t].push_back(i); });
    });
  }
  EXPECT_TRUE(RunLoopUntil(
      loop.get(),
      [&] {
        for (const auto& s : seen) {
          if (s.size() < kEach) return false;
        }
        return true;
      },
      30s));
  for (std::thread& t : threads) t.join();
  for (const auto& s : seen) {
    ASSERT_EQ(s.size(), static_cast<size_t>(kEach));
    for (int i = 0; i < kEach; ++i) ASSERT_EQ(s[i], i);
  }
  EXPECT_EQ(loop.Close(), 0);
}

// Other threads go on posting while the loop closes: their closures are
// dropped, and none of them touches the closed wakeup handle (ASan says
// so in the sanitizer build).
TEST(LoopTest, PostsRacingCloseAreDropped) {
  auto loop = std::make_unique<Loop>();
  std::atomic<bool> stop{false};
  std::atomic<int> posted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      while (!stop) {
        loop->Post([] {});
        ++posted;
      }
    });
  }
  // Close only once every thread is posting for sure.
  EXPECT_TRUE(RunLoopUntil(
      loop->get(), [&] { return posted > 3000; }, 30s));
  EXPECT_EQ(loop->Close(), 0);
  // The threads go on past the close (their posts are dropped), with a
  // deadline in case the machine starves them.
  const int at_close = posted;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (posted < at_close + 3000 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  loop.reset();
}

// What the loop's wake-up (libuv's eventfd) holds: 0 when nobody woke it.
uint64_t WakeUps(Loop& loop) {
  std::ifstream info("/proc/self/fdinfo/" + std::to_string(loop.get()->async_io_watcher.fd));
  std::string key;
  while (info >> key) {
    if (key == "eventfd-count:") {
      std::string hex;
      info >> hex;
      return std::stoull(hex, nullptr, 16);
    }
  }
  return ~0ull;
}

// Posted from the loop's own thread while it runs: each runs later, in
// order, and none wakes the loop through its eventfd. A chain of posts,
// each made by the one before, runs to its end.
TEST(LoopTest, PostsFromTheLoopThreadRunLaterInOrderWithoutAWakeUp) {
  Loop loop;
  std::vector<int> order;
  bool inside = false, ran_inside = false;
  uint64_t woken = ~0ull;
  int chain = 0;
  std::function<void()> next = [&] {
    if (++chain < 1000) return loop.Post(next);
    loop.Stop();
  };
  loop.Post([&] {  // from this thread, before Run: the eventfd's way
    for (int i = 0; i < 100; ++i) {
      inside = true;
      loop.Post([&, i] {
        ran_inside = ran_inside || inside;
        order.push_back(i);
      });
      inside = false;
    }
    woken = WakeUps(loop);
    loop.Post(next);
  });
  std::thread watchdog([&] {
    // A deadline: a loop that never drains its own posts fails, not hangs.
    for (int i = 0; i < 1000 && chain < 1000; ++i) std::this_thread::sleep_for(10ms);
    if (chain < 1000) loop.Post([&] { loop.Stop(); });
  });
  loop.Run();
  watchdog.join();
  EXPECT_EQ(woken, 0u) << "a post from the loop's thread woke it through the eventfd";
  EXPECT_FALSE(ran_inside);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(chain, 1000);
  EXPECT_EQ(loop.Close(), 0);
}

// One posted as the loop stops waits for the next Run; at Close it is
// dropped, and the loop closes clean.
TEST(LoopTest, APostFromTheLoopThreadLeftAtCloseIsDropped) {
  Loop loop;
  bool ran = false;
  loop.Post([&] {
    loop.Post([&] { ran = true; });
    loop.Stop();
  });
  loop.Run();
  EXPECT_FALSE(ran);
  EXPECT_EQ(loop.Close(), 0);
  EXPECT_FALSE(ran);
}

class UvClockTest : public ::testing::Test {
 protected:
  void TearDown() override {
    clock_.reset();
    EXPECT_EQ(loop_.Close(), 0) << "a timer's handle is left on the loop";
  }

  bool RunUntil(const std::function<bool()>& done) {
    return RunLoopUntil(loop_.get(), done, 10s, /*tick_ms=*/5);
  }

  Loop loop_;
  std::unique_ptr<UvClock> clock_ = std::make_unique<UvClock>(loop_.get());
};

TEST_F(UvClockTest, TimersFireOnceAndLeaveNoHandle) {
  const size_t handles = LoopHandles(loop_.get());
  int fired = 0;
  for (int i = 0; i < 50; ++i) clock_->StartTimer(Millis(i % 5), [&] { ++fired; });
  ASSERT_TRUE(RunUntil([&] { return fired == 50; }));
  EXPECT_EQ(clock_->pending_timers(), 0u);
  EXPECT_EQ(LoopHandles(loop_.get()), handles);
}

// Timers due in the same loop iteration, each cancelling the next one
// from its callback: the cancelled ones never run, though libuv had them
// due already, and cancelling the running timer itself is harmless.
TEST_F(UvClockTest, TimersCancelledFromTimerCallbacksNeverRun) {
  constexpr int kTimers = 200;
  std::vector<Clock::TimerId> ids(kTimers);
  std::vector<int> ran;
  for (int i = 0; i < kTimers; ++i) {
    ids[i] = clock_->StartTimer(Millis(0), [&, i] {
      ran.push_back(i);
      clock_->CancelTimer(ids[i]);
      if (i + 1 < kTimers) clock_->CancelTimer(ids[i + 1]);
    });
  }
  ASSERT_TRUE(RunUntil([&] { return clock_->pending_timers() == 0; }));
  std::vector<int> evens;
  for (int i = 0; i < kTimers; i += 2) evens.push_back(i);
  EXPECT_EQ(ran, evens);
}

// A callback that starts a timer and cancels another, still pending one,
// and a timer whose callback's captures cancel a timer when destroyed.
TEST_F(UvClockTest, TimersStartedAndCancelledFromCallbacks) {
  struct CancelOnDestroy {
    UvClock* clock;
    Clock::TimerId id;
    ~CancelOnDestroy() {
      if (clock) clock->CancelTimer(id);
    }
  };
  bool later_ran = false, chained_ran = false, victim_ran = false;
  const Clock::TimerId victim = clock_->StartTimer(Millis(3600'000), [&] { victim_ran = true; });
  const Clock::TimerId later = clock_->StartTimer(Millis(3600'000), [&] { later_ran = true; });
  auto guard = std::make_shared<CancelOnDestroy>(clock_.get(), victim);
  const Clock::TimerId holder = clock_->StartTimer(Millis(3600'000), [guard] {});
  guard.reset();
  clock_->StartTimer(Millis(0), [&] {
    clock_->CancelTimer(later);
    clock_->CancelTimer(holder);  // its captures cancel `victim`
    clock_->StartTimer(Millis(0), [&] { chained_ran = true; });
  });
  ASSERT_TRUE(RunUntil([&] { return chained_ran; }));
  EXPECT_EQ(clock_->pending_timers(), 0u);
  EXPECT_FALSE(later_ran);
  EXPECT_FALSE(victim_ran);
}

// Pending timers die with the clock, handles and all; the fixture's
// TearDown proves the loop closes clean.
TEST_F(UvClockTest, DestroyingTheClockCancelsPendingTimers) {
  bool ran = false;
  for (int i = 0; i < 100; ++i) clock_->StartTimer(Millis(3600'000), [&] { ran = true; });
  clock_->StartTimer(Millis(0), [&] { clock_.reset(); });  // from inside a callback
  ASSERT_TRUE(RunUntil([&] { return clock_ == nullptr; }));
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace ltd::test
