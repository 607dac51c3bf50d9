// The watch of ranks that would not die, with a fake clock and a fake
// /proc: a job's slots come back once its last such process is gone.
#include "unkillable_watch.h"

#include <gtest/gtest.h>

#include <set>

#include "fakes.h"

namespace ltd {
namespace {

Job JobWith(const std::string& id, std::vector<int> slots, std::vector<pid_t> pids) {
  Job job;
  job.id = id;
  job.device_slots = std::move(slots);
  int rank = 0;
  for (pid_t pid : pids) {
    UnkillableProcess p;
    p.rank = rank++;
    p.pid = pid;
    p.start_time = 1000 + static_cast<uint64_t>(pid);
    job.unkillable.push_back(p);
  }
  return job;
}

struct Fixture {
  test::FakeClock clock;
  std::set<pid_t> alive;
  size_t checks = 0;
  std::set<pid_t> looked;
  std::vector<std::pair<std::string, std::vector<int>>> gone;
  UnkillableWatch watch{clock,
                        [this](const UnkillableProcess& p) {
                          ++checks;
                          looked.insert(p.pid);
                          return alive.count(p.pid) != 0;
                        },
                        [this](const std::string& id, const std::vector<int>& slots) {
                          gone.emplace_back(id, slots);
                        }};
};

TEST(UnkillableWatch, TheSlotsComeBackOnceTheLastProcessIsGone) {
  Fixture f;
  f.alive = {4242, 4243};
  ASSERT_TRUE(f.watch.Add(JobWith("7", {0, 1}, {4242, 4243})));
  EXPECT_EQ(f.watch.Holding(1), "7");
  EXPECT_EQ(f.watch.Holding(2), "");
  f.clock.Advance(UnkillableWatch::kRecheck * 3);
  EXPECT_TRUE(f.gone.empty());
  f.alive.erase(4242);
  f.clock.Advance(UnkillableWatch::kRecheck);
  EXPECT_TRUE(f.gone.empty());  // one is left
  f.alive.erase(4243);
  f.clock.Advance(UnkillableWatch::kRecheck);
  ASSERT_EQ(f.gone.size(), 1u);
  EXPECT_EQ(f.gone[0].first, "7");
  EXPECT_EQ(f.gone[0].second, (std::vector<int>{0, 1}));
  EXPECT_EQ(f.watch.jobs(), 0u);
  EXPECT_EQ(f.clock.pending_timers(), 0u);  // nothing left to look at: no timer
}

TEST(UnkillableWatch, AJobWhoseProcessesAreAllGoneAlreadyHoldsNothing) {
  Fixture f;
  Job job = JobWith("3", {0}, {99});
  job.unkillable[0].gone_at = f.clock.Now();
  EXPECT_FALSE(f.watch.Add(job));
  EXPECT_EQ(f.watch.Holding(0), "");
}

TEST(UnkillableWatch, EachTurnLooksAtABoundedNumber) {
  Fixture f;
  std::vector<pid_t> pids;
  for (pid_t p = 1; p <= 600; ++p) {
    pids.push_back(p);
    f.alive.insert(p);
  }
  ASSERT_TRUE(f.watch.Add(JobWith("1", {0}, pids)));
  f.clock.Advance(UnkillableWatch::kRecheck);
  EXPECT_EQ(f.checks, UnkillableWatch::kMaxChecksPerTurn);
  f.clock.Advance(UnkillableWatch::kRecheck * 2);
  EXPECT_EQ(f.looked.size(), 600u);  // every one looked at within three turns
  f.alive.clear();
  // Every process is looked at within a few turns, and the slot comes back.
  f.clock.Advance(UnkillableWatch::kRecheck * 4);
  ASSERT_EQ(f.gone.size(), 1u);
}

}  // namespace
}  // namespace ltd
