// SystemdNotifier's logic with a fake clock: what it would tell systemd,
// and when. The real sd_notify path is tested end to end
// (systemd_e2e_test.cc).
#include "systemd_notify.h"

#include <gtest/gtest.h>

#include "fakes.h"

namespace ltd::test {
namespace {

struct NotifierTest : ::testing::Test {
  FakeClock clock;
  SystemdNotifier::Counts counts;
  std::vector<std::string> sent;
  SystemdNotifier notifier{clock, [this] { return counts; },
                           [this](const std::string& s) { sent.push_back(s); }};
  Job job;
};

TEST_F(NotifierTest, ReadyCarriesStatusAndNothingIsSentBeforeIt) {
  notifier.OnSubmitted(job);
  clock.Advance(Millis(5000));
  EXPECT_TRUE(sent.empty());
  counts = {2, 3};
  notifier.Ready();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].rfind("READY=1\nSTATUS=ready: 2 running, 3 pending\nMAINPID=", 0), 0u)
      << sent[0];
}

TEST_F(NotifierTest, StatusFollowsChangesAtMostOncePerInterval) {
  notifier.Ready();
  sent.clear();
  counts = {0, 1};
  notifier.OnSubmitted(job);
  clock.Advance(Millis(999));
  EXPECT_TRUE(sent.empty()) << "sent within the interval after READY";
  clock.Advance(Millis(1));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0], "STATUS=0 running, 1 pending");
  // A burst of changes: one STATUS= with the latest counts, an interval on.
  for (int i = 0; i < 50; ++i) {
    counts = {static_cast<size_t>(i), 0};
    notifier.OnStateChanged(job, JobState::kPending);
  }
  clock.Advance(Millis(999));
  EXPECT_EQ(sent.size(), 1u);
  clock.Advance(Millis(1));
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1], "STATUS=49 running, 0 pending");
  // A change that changes nothing shown sends nothing.
  notifier.OnStateChanged(job, JobState::kPending);
  clock.Advance(Millis(5000));
  EXPECT_EQ(sent.size(), 2u);
}

// `systemctl status` says a drain (its reason escaped to one line), and its end.
TEST_F(NotifierTest, StatusSaysDraining) {
  notifier.OnDrainChanged(std::string("swap GPU 3\n"));
  counts = {1, 2};
  notifier.Ready();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(
      sent[0].rfind("READY=1\nSTATUS=ready: draining (swap GPU 3\\n): 1 running, 2 pending", 0), 0u)
      << sent[0];
  clock.Advance(Millis(5000));
  notifier.OnDrainChanged(std::nullopt);
  clock.Advance(Millis(1));
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1], "STATUS=1 running, 2 pending");
  notifier.OnDrainChanged(std::string());
  clock.Advance(Millis(1000));
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[2], "STATUS=draining: 1 running, 2 pending");
}

TEST_F(NotifierTest, StoppingIsSentAtOnceAndStatusSaysSo) {
  notifier.Ready();
  sent.clear();
  counts = {1, 0};
  notifier.Stopping();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].rfind("STOPPING=1\n", 0), 0u);
  counts = {0, 0};
  notifier.OnStateChanged(job, JobState::kRunning);
  clock.Advance(Millis(1000));
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1], "STATUS=stopping: 0 running, 0 pending");
}

TEST_F(NotifierTest, WatchdogPingsAtHalfThePeriodFromTimers) {
  notifier.StartWatchdog(Millis(1000));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0], "WATCHDOG=1");
  clock.Advance(Millis(499));
  EXPECT_EQ(sent.size(), 1u);
  clock.Advance(Millis(1));
  EXPECT_EQ(sent.size(), 2u);
  clock.Advance(Millis(5000));
  EXPECT_EQ(sent.size(), 12u);
  for (const auto& s : sent) EXPECT_EQ(s, "WATCHDOG=1");
}

TEST_F(NotifierTest, DestructionCancelsItsTimers) {
  {
    SystemdNotifier n(
        clock, [] { return SystemdNotifier::Counts{}; }, [](const std::string&) {});
    n.Ready();
    n.StartWatchdog(Millis(100));
    n.OnSubmitted(job);
  }
  EXPECT_EQ(clock.pending_timers(), 0u);
}

}  // namespace
}  // namespace ltd::test
