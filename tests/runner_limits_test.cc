// A job's limits as its runner sees them, with a fake launcher and a fake
// clock: an OOM kill as the root cause `oom`, and ranks that do not die of
// SIGKILL, which the attempt ends without (and never restarts after).
#include <signal.h>

#include "runner_fixture.h"

namespace ltd::test {
namespace {

class RunnerLimitsTest : public RunnerFixture {
 protected:
  JobSpec Limited(int devices) {
    JobSpec spec = Spec(devices);
    spec.limits.memory_bytes = 64u << 20;
    return spec;
  }
};

TEST_F(RunnerLimitsTest, AnOomKillIsTheRootCauseNamingTheLimit) {
  Run(Limited(2));
  EXPECT_EQ(launcher_.begun_limits, Get().spec.limits);
  launcher_.oom_kills[1] = 1;  // the kernel counts it before the SIGKILL lands
  launcher_.Exit(id_, 1, 0, SIGKILL);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  const Job& job = Get();
  EXPECT_EQ(job.state, JobState::kOutOfMemory);
  ASSERT_TRUE(job.root_cause);
  EXPECT_EQ(job.root_cause->reason, CauseReason::kOom);
  EXPECT_EQ(job.root_cause->rank, 1);
  EXPECT_EQ(job.root_cause->signal, SIGKILL);
  EXPECT_EQ(job.root_cause->message,
            "rank 1 was killed by the OOM killer: the job's memory limit is 64M");
  EXPECT_EQ(job.exit_code, 137);
}

TEST_F(RunnerLimitsTest, ASigkillTheOomCountDoesNotExplainIsASignal) {
  Run(Limited(2));
  launcher_.Exit(id_, 1, 0, SIGKILL);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  ASSERT_TRUE(Get().root_cause);
  EXPECT_EQ(Get().root_cause->reason, CauseReason::kSignaled);
  EXPECT_EQ(Get().exit_code, 137);
}

TEST_F(RunnerLimitsTest, ARankThatOutlivesItsSigkillIsListedAndTheJobEndsWithoutIt) {
  JobSpec spec = Spec(2);
  spec.max_restarts = 3;  // would restart, but for the rank that would not die
  Run(spec);
  launcher_.Exit(id_, 0, 3);
  clock_.Advance(Millis(1000));  // the grace: SIGKILL
  EXPECT_EQ(launcher_.killed_jobs, std::vector<std::string>{id_});
  EXPECT_FALSE(events_.ended);
  clock_.Advance(Millis(999));
  EXPECT_FALSE(events_.ended);
  clock_.Advance(Millis(1));  // as long again: rank 1 is still there
  ASSERT_TRUE(events_.ended);
  const Job& job = *events_.ended;
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.restart_count, 0);
  ASSERT_TRUE(job.root_cause);
  EXPECT_EQ(job.root_cause->reason, CauseReason::kExited);  // the real cause, not the stuck rank
  EXPECT_EQ(job.root_cause->rank, 0);
  ASSERT_EQ(job.unkillable.size(), 1u);
  EXPECT_EQ(job.unkillable[0].rank, 1);
  EXPECT_EQ(job.unkillable[0].pid, launcher_.Find(id_, 1).pid);
  EXPECT_FALSE(job.unkillable[0].gone_at);
  EXPECT_EQ(job.ranks[1].state, RankState::kKilled);
  // Nothing waited for the job to be empty, and no timer is left.
  EXPECT_TRUE(launcher_.ended_jobs.empty());
  EXPECT_EQ(clock_.pending_timers(), 0u);
  bool said = false;
  for (const std::string& line : events_.lines) {
    said = said || line.starts_with("-1E ltd: unkillable: rank 1 pid ");
  }
  EXPECT_TRUE(said);
}

// A rank's child in the kernel's uninterruptible sleep: the ranks are
// reaped but the job never empties. As long after the SIGKILL as a rank
// would get, it is listed as the rank's descendant and the job ends.
TEST_F(RunnerLimitsTest, ARanksChildThatOutlivesTheSigkillIsListedAndTheJobEnds) {
  JobSpec spec = Spec(2);
  spec.max_restarts = 3;  // would restart, but for the process that would not die
  Run(spec);
  StuckProcess child;
  child.pid = 4243;
  child.rank = 1;
  child.state = 'D';
  child.start_time = 77;
  child.wchan = "fuse_wait_answer";
  child.kernel_stack = "[<0>] request_wait_answer\n";
  launcher_.leftovers = {child};
  launcher_.Exit(id_, 0, 3);
  launcher_.ExitSignalled(id_);  // rank 1 dies of its SIGTERM; its child does not
  clock_.Advance(Millis(0));
  EXPECT_EQ(launcher_.ended_jobs, std::vector<std::string>{id_});
  clock_.Advance(Millis(999));
  EXPECT_FALSE(events_.ended);
  clock_.Advance(Millis(1));  // the grace after the SIGKILL of what was left
  ASSERT_TRUE(events_.ended);
  const Job& job = *events_.ended;
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.restart_count, 0);
  ASSERT_TRUE(job.root_cause);
  EXPECT_EQ(job.root_cause->reason, CauseReason::kExited);
  EXPECT_EQ(job.root_cause->rank, 0);
  ASSERT_EQ(job.unkillable.size(), 1u);
  const UnkillableProcess& u = job.unkillable[0];
  EXPECT_EQ(u.rank, 1);
  EXPECT_EQ(u.pid, 4243);
  EXPECT_TRUE(u.descendant);
  EXPECT_EQ(u.state, "D");
  EXPECT_EQ(u.start_time, 77u);
  EXPECT_EQ(u.wchan, "fuse_wait_answer");
  EXPECT_EQ(u.stack, "[<0>] request_wait_answer\n");
  EXPECT_EQ(Describe(u), "pid 4243 (of rank 1) in D state (wchan fuse_wait_answer)");
  EXPECT_EQ(launcher_.abandoned, std::vector<std::string>{id_});
  EXPECT_EQ(clock_.pending_timers(), 0u);
  bool said = false;
  for (const std::string& line : events_.lines) {
    said = said || line.starts_with("-1E ltd: unkillable: pid 4243 (of rank 1) in D state");
  }
  EXPECT_TRUE(said);
}

TEST_F(RunnerLimitsTest, ARankReapedAfterItsSigkillIsNoUnkillable) {
  Run(Spec(2));
  launcher_.Exit(id_, 0, 3);
  clock_.Advance(Millis(1000));
  launcher_.Exit(id_, 1, 0, SIGKILL);
  clock_.Advance(Millis(5000));
  ASSERT_TRUE(events_.ended);
  EXPECT_TRUE(events_.ended->unkillable.empty());
  EXPECT_EQ(launcher_.ended_jobs, std::vector<std::string>{id_});
}

}  // namespace
}  // namespace ltd::test
