#include "live_bytes.h"

#include <gtest/gtest.h>

namespace ltd {
namespace {

using std::chrono::milliseconds;

TEST(LiveBytes, WaitingJobsAreCountedOnceAndLeaveWhenPlacedOrEnded) {
  LiveBytes live;
  int measured = 0;
  auto placed = [&] {
    ++measured;
    return FinishedJobs::Usage{};
  };
  live.Waiting("1", 1000, 100);
  live.Waiting("2", 1000, 50);
  live.Waiting("3", 1001, 7);
  EXPECT_EQ(live.Total(milliseconds(0), placed), (FinishedJobs::Usage{{1000, 150}, {1001, 7}}));
  live.NotWaiting("1");
  live.NotWaiting("1");         // twice (placed, then ended): counted off once
  live.NotWaiting("9");         // never waited
  live.Waiting("2", 1000, 60);  // measured anew: replaces, not adds
  EXPECT_EQ(live.Total(milliseconds(1), placed), (FinishedJobs::Usage{{1000, 60}, {1001, 7}}));
  live.NotWaiting("3");
  // A user with nothing waiting is not a user of the state dir here.
  EXPECT_EQ(live.Total(milliseconds(2), placed), (FinishedJobs::Usage{{1000, 60}}));
  EXPECT_EQ(live.waiting(), 1u);
  EXPECT_EQ(measured, 1);
}

TEST(LiveBytes, PlacedJobsAreMeasuredAgainAtMostOnceASecond) {
  LiveBytes live;
  int measured = 0;
  uint64_t log = 10;
  auto placed = [&] {
    ++measured;
    return FinishedJobs::Usage{{1000, log}};
  };
  live.Waiting("5", 1000, 1);
  EXPECT_EQ(live.Total(milliseconds(100), placed), (FinishedJobs::Usage{{1000, 11}}));
  log = 500;
  // Within the second: the last measure, however many submits ask.
  for (int i = 0; i < 100; ++i) live.Total(milliseconds(100 + i), placed);
  EXPECT_EQ(live.Total(milliseconds(1099), placed), (FinishedJobs::Usage{{1000, 11}}));
  EXPECT_EQ(measured, 1);
  EXPECT_EQ(live.Total(milliseconds(1100), placed), (FinishedJobs::Usage{{1000, 501}}));
  EXPECT_EQ(measured, 2);
  // A clock that went back (a fake one, or a bug): measured again, not trusted.
  EXPECT_EQ(live.Total(milliseconds(5), placed), (FinishedJobs::Usage{{1000, 501}}));
  EXPECT_EQ(measured, 3);
}

TEST(LiveBytes, APlacementOrAnEndMeasuresThePlacedJobsAgain) {
  LiveBytes live;
  int measured = 0;
  auto placed = [&] {
    ++measured;
    return FinishedJobs::Usage{};
  };
  live.Total(milliseconds(0), placed);
  live.PlacedChanged();  // a job ended: its bytes must not count twice
  live.Total(milliseconds(1), placed);
  live.Total(milliseconds(2), placed);
  EXPECT_EQ(measured, 2);
}

}  // namespace
}  // namespace ltd
