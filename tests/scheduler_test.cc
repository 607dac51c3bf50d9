// Placement: FIFO within a user, fair between users, limits per user.
#include "scheduler.h"

#include <gtest/gtest.h>

namespace ltd::test {
namespace {

constexpr uid_t kAlice = 1001, kBob = 1002, kCarol = 1003;

SchedulerConfig Config(int slots, int max_running = 0, int max_pending = 1000,
                       std::vector<std::string> gpus = {}) {
  SchedulerConfig c;
  c.slots = slots;
  c.user_max_running_jobs = max_running;
  c.user_max_pending_jobs = max_pending;
  c.gpu_ids = std::move(gpus);
  return c;
}

std::vector<std::string> Ids(const std::vector<Scheduler::Placement>& placed) {
  std::vector<std::string> ids;
  for (const auto& p : placed) ids.push_back(p.id);
  return ids;
}

TEST(Scheduler, OneUsersBacklogNeverHoldsBackAnothersNextJob) {
  Scheduler s(Config(2));
  for (int i = 1; i <= 2000; ++i) s.Enqueue("a" + std::to_string(i), i, kAlice, 2);
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"a1"});
  s.Enqueue("b1", 2001, kBob, 1);
  EXPECT_TRUE(s.Place().empty());  // nothing free
  s.Release("a1");
  // Both hold nothing now; bob was never served: his job goes first.
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"b1"});
  s.Release("b1");
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"a2"});  // then alice, in her order
  EXPECT_EQ(s.pending(kAlice), 1998u);
}

TEST(Scheduler, AJobThatDoesNotFitHoldsBackOnlyItsOwnUser) {
  Scheduler s(Config(4));
  s.Enqueue("b1", 1, kBob, 2);
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"b1"});
  s.Enqueue("a1", 2, kAlice, 4);  // needs every slot
  s.Enqueue("a2", 3, kAlice, 1);  // behind it: alice's order holds
  s.Enqueue("c1", 4, kCarol, 1);
  s.Enqueue("c2", 5, kCarol, 1);
  EXPECT_EQ(Ids(s.Place()), (std::vector<std::string>{"c1", "c2"}));
  EXPECT_EQ(s.free_slots(), 0);
  s.Release("b1");
  s.Release("c1");
  s.Release("c2");
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"a1"});
  s.Release("a1");
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"a2"});
}

// A placement taken back before its job was recorded (the disk refused
// the record) leaves its user's turn as it was.
TEST(Scheduler, APlacementTakenBackLeavesTheUsersTurnAsItWas) {
  Scheduler s(Config(4));
  s.Enqueue("a1", 1, kAlice, 1);
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"a1"});
  s.Enqueue("b1", 2, kBob, 1);
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"b1"});
  s.Enqueue("a2", 3, kAlice, 1);
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"a2"});
  s.Unplace("a2");
  EXPECT_EQ(s.free_slots(), 2);
  EXPECT_EQ(s.pending(kAlice), 0u);
  s.Enqueue("c1", 4, kCarol, 1);
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"c1"});
  // One slot, alice and bob each holding one device: alice was served
  // before bob, and a2's placement taken back does not change that.
  s.Enqueue("b2", 5, kBob, 1);
  s.Enqueue("a3", 6, kAlice, 1);
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"a3"});
}

// What Submit asks before it records a job once, placed: each time it
// says yes, the next Place() places that job.
TEST(Scheduler, PlacesAtOnceSaysWhatTheNextPlaceDoes) {
  Scheduler s(Config(3, /*max_running=*/1));
  EXPECT_FALSE(s.PlacesAtOnce(kAlice, 4));  // more than there are
  ASSERT_TRUE(s.PlacesAtOnce(kAlice, 2));
  s.Enqueue("a1", 1, kAlice, 2);
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"a1"});
  EXPECT_FALSE(s.PlacesAtOnce(kAlice, 1));  // at her running limit
  EXPECT_FALSE(s.PlacesAtOnce(kBob, 2));    // one slot free
  ASSERT_TRUE(s.PlacesAtOnce(kBob, 1));
  s.Enqueue("a2", 2, kAlice, 1);  // waits for her limit
  EXPECT_TRUE(s.Place().empty());
  EXPECT_FALSE(s.PlacesAtOnce(kBob, 1)) << "a job waits: the queue decides, not the caller";
  s.Dequeue("a2");
  ASSERT_TRUE(s.PlacesAtOnce(kBob, 1));
  s.Enqueue("b1", 3, kBob, 1);
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"b1"});
  s.SetUnavailable(2, true);
  s.Release("a1");
  s.Release("b1");
  EXPECT_FALSE(s.PlacesAtOnce(kCarol, 3));  // a quarantined slot is not free
  EXPECT_TRUE(s.PlacesAtOnce(kCarol, 2));
}

TEST(Scheduler, SlotsAndGpus) {
  Scheduler s(Config(3, 0, 1000, {"0", "2", "5"}));
  s.Enqueue("x", 1, kAlice, 2);
  s.Enqueue("y", 2, kBob, 1);
  auto placed = s.Place();
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_EQ(placed[0].slots, (std::vector<int>{0, 1}));
  EXPECT_EQ(placed[0].cuda_visible_devices, "0,2");
  EXPECT_EQ(placed[1].cuda_visible_devices, "5");
}

TEST(Scheduler, PerUserLimits) {
  Scheduler s(Config(8, 2, 3));
  for (int i = 1; i <= 3; ++i) {
    EXPECT_TRUE(s.MayQueue(kAlice, "alice").ok());
    s.Enqueue("a" + std::to_string(i), i, kAlice, 1);
  }
  auto refused = s.MayQueue(kAlice, "alice");
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("user alice already has 3 pending jobs"), std::string::npos);
  EXPECT_TRUE(s.MayQueue(kBob, "bob").ok());  // one user's limit is one user's
  EXPECT_EQ(Ids(s.Place()), (std::vector<std::string>{"a1", "a2"}));  // at most 2 running
  EXPECT_EQ(s.pending(kAlice), 1u);
  s.Dequeue("a3");  // cancelled while pending
  EXPECT_EQ(s.pending(kAlice), 0u);
  s.Release("a1");
  EXPECT_TRUE(s.Place().empty());
  EXPECT_EQ(s.free_slots(), 7);
}

// An ended job whose processes would not die holds its slots (out of use)
// and counts as its user's running job until they are gone; another
// user is not held back by it.
TEST(Scheduler, AQuarantinedJobCountsAgainstItsUsersLimit) {
  Scheduler s(Config(3, 1));
  s.Enqueue("a1", 1, kAlice, 1);
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"a1"});
  s.Release("a1");  // ended; its rank's child is stuck in the kernel
  s.SetUnavailable(0, true);
  s.ChargeQuarantine("a1", kAlice, 1);
  s.Enqueue("a2", 2, kAlice, 1);
  s.Enqueue("b1", 3, kBob, 1);
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"b1"});
  EXPECT_EQ(s.WhyPending("a2"),
            "user limit: 1 running, 1 of them ended with processes that would not die (their "
            "devices are quarantined)");
  // Gone: the slot comes back and Alice's next job runs.
  s.SetUnavailable(0, false);
  s.EndQuarantine("a1");
  s.EndQuarantine("a1");  // once is all it counts
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"a2"});
  s.Release("a2");
  s.Release("b1");
  EXPECT_EQ(s.free_slots(), 3);
}

// An array's %N: at most N of its tasks placed at once; the rest wait
// with the throttle as their reason and hold back none of the user's
// other jobs.
TEST(Scheduler, ArrayThrottleHoldsTheRestOfTheArrayOnly) {
  Scheduler s(Config(8));
  for (int i = 0; i < 6; ++i) {
    s.Enqueue("t" + std::to_string(i), 10 + i, kAlice, 1, ArrayGate{"10", 2, 6});
  }
  s.Enqueue("other", 20, kAlice, 1);
  EXPECT_EQ(Ids(s.Place()), (std::vector<std::string>{"t0", "t1", "other"}));
  EXPECT_EQ(s.array_running("10"), 2);
  EXPECT_EQ(s.WhyPending("t2"), "array throttle: 2 of 6 tasks running");
  EXPECT_EQ(s.pending(kAlice), 4u);  // throttled tasks are pending jobs, for the limits
  s.Release("t0");
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"t2"});
  s.Release("t1");
  s.Release("t2");
  EXPECT_EQ(Ids(s.Place()), (std::vector<std::string>{"t3", "t4"}));
  // A pending task cancelled frees nothing of the throttle.
  s.Release("t5");
  EXPECT_TRUE(s.Place().empty());
  EXPECT_EQ(s.array_running("10"), 2);
}

// After a restart, the array's running tasks (Hold) count for its throttle.
TEST(Scheduler, HeldTasksCountForTheThrottle) {
  Scheduler s(Config(4));
  s.Hold("t0", kAlice, {0}, "10");
  s.Enqueue("t1", 11, kAlice, 1, ArrayGate{"10", 1, 2});
  EXPECT_TRUE(s.Place().empty());
  EXPECT_EQ(s.WhyPending("t1"), "array throttle: 1 of 2 tasks running");
  s.Release("t0");
  EXPECT_EQ(Ids(s.Place()), std::vector<std::string>{"t1"});
}

// An array counts against --user-max-pending-jobs as its tasks would.
TEST(Scheduler, AnArrayCountsEachTaskForThePendingLimit) {
  Scheduler s(Config(1, 0, /*max_pending=*/10));
  for (int i = 0; i < 4; ++i) s.Enqueue("p" + std::to_string(i), i, kAlice, 2);
  EXPECT_TRUE(s.MayQueue(kAlice, "alice", 0, 6).ok());
  const absl::Status refused = s.MayQueue(kAlice, "alice", 0, 7);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("the array would add 7"), std::string::npos)
      << refused.message();
}

}  // namespace
}  // namespace ltd::test
