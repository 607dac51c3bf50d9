// A hang's investigation through the runner: stacks before the teardown,
// faulthandler for Python ranks, the budget, late answers of ended
// attempts, and a hold for a look (--hold-on-hang).
#include <signal.h>

#include "hang_report.h"
#include "runner_fixture.h"

namespace ltd::test {
namespace {

class HangInvestigationTest : public RunnerFixture {
 protected:
  HangInvestigationTest() { with_stacks_ = true; }
};

TEST_F(HangInvestigationTest, StacksComeBeforeTheTeardownAndNameTheCulprit) {
  HungJob();
  ASSERT_TRUE(Get().hang_report);  // recorded at once, before any signal
  EXPECT_TRUE(launcher_.signals.empty());
  ASSERT_TRUE(sampler_.pending);
  EXPECT_EQ(sampler_.requested.size(), 3u);
  sampler_.Deliver({"#0 c10d::Work::wait\n", "#0 injected_hang (rank, step) at train.cc:43\n",
                    "#0 gloo::transport::tcp::UnboundBuffer::waitRecv\n"});
  const Job& job = Get();
  EXPECT_EQ(job.root_cause->rank, 1);  // the others wait in the allreduce for it
  EXPECT_EQ(job.root_cause->message,
            "no heartbeat for 1s; the stacks show rank(s) 1 stalled outside a collective while the "
            "others wait in one");
  EXPECT_EQ(job.hang_report->stalled_ranks, std::vector<int>{1});
  EXPECT_NE(job.hang_report->ranks[1].stack.find("injected_hang"), std::string::npos);
  EXPECT_EQ(launcher_.Signalled(SIGTERM).size(), 3u);  // now the teardown
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().exit_code, 124);
}

TEST_F(HangInvestigationTest, PythonRanksDumpTheirStacksThroughFaulthandler) {
  JobSpec spec = Spec(2);
  spec.heartbeat_timeout = Millis(500);
  Run(spec);
  sampler_.python = {launcher_.Find(id_, 0).pid, launcher_.Find(id_, 1).pid};
  launcher_.Control(id_, 0, "hb 1\n");
  launcher_.Control(id_, 1, "hb 1\n");
  clock_.Advance(Millis(501));
  EXPECT_FALSE(sampler_.pending);  // no gdb for Python ranks
  ASSERT_EQ(launcher_.process_signals.size(), 2u);
  EXPECT_EQ(launcher_.process_signals[0].second, SIGABRT);
  launcher_.Output(id_, 1, Stream::kStderr,
                   "Fatal Python error: Aborted\n  File \"train.py\", line 9 in stuck_loader\n");
  launcher_.Output(id_, 1, Stream::kStdout, "not a stack\n");
  launcher_.Exit(id_, 1, 0, SIGABRT);
  EXPECT_TRUE(launcher_.signals.empty());  // rank 0 has not dumped yet
  launcher_.Output(id_, 0, Stream::kStderr,
                   "  File \"torch/distributed/distributed_c10d.py\", line 1 in all_reduce\n");
  launcher_.Exit(id_, 0, 0, SIGABRT);
  clock_.Advance(Millis(0));
  const Job& job = Get();
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.root_cause->rank, 1);
  EXPECT_NE(job.hang_report->ranks[1].stack.find("stuck_loader"), std::string::npos);
  EXPECT_EQ(job.hang_report->ranks[1].stack.find("not a stack"), std::string::npos);
  EXPECT_EQ(job.ranks[0].state, RankState::kKilled);
}

TEST_F(HangInvestigationTest, StacksThatNeverComeDoNotHoldTheTeardown) {
  HungJob();
  ASSERT_TRUE(sampler_.pending);
  clock_.Advance(Millis(3499));
  EXPECT_TRUE(launcher_.signals.empty());
  clock_.Advance(Millis(1));
  EXPECT_EQ(launcher_.Signalled(SIGTERM).size(), 3u);
  sampler_.Deliver({"late", "late", "late"});  // ignored: the job moved on
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  const Job& job = Get();
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.exit_code, 124);
  // Three ranks stopped beating at the same moment and no stack came: no
  // rank is blamed, and the verdict says what is missing.
  EXPECT_EQ(job.root_cause->rank, -1);
  EXPECT_EQ(job.root_cause->message,
            "ranks 0-2 stopped beating within 0ms of each other (no heartbeat for 1s); stacks of "
            "ranks 0-2 not taken in the 3s budget");
  for (const HangReportRank& r : job.hang_report->ranks) {
    EXPECT_EQ(r.stack_status, StackStatus::kTimedOut) << r.rank;
    EXPECT_TRUE(r.stack.empty());
  }
  for (const Rank& r : job.ranks) EXPECT_EQ(r.state, RankState::kKilled) << r.rank;
}

// A sampler that gives up on some ranks (the budget ran out on a loaded
// machine): the ranks whose stacks came wait in a collective, so nothing
// clears or blames the others; microseconds between deadlines decide nothing.
TEST_F(HangInvestigationTest, ASamplerThatTimesOutBlamesNoRankAndSaysWhatIsMissing) {
  JobSpec spec = Spec(4);
  spec.heartbeat_timeout = Millis(1000);
  Run(spec);
  // Rank 1 beat last (by 3ms); rank 2 first: the old verdict blamed rank 2.
  launcher_.Control(id_, 2, "hb 30\n");
  clock_.Advance(Millis(1));
  launcher_.Control(id_, 0, "hb 30\n");
  launcher_.Control(id_, 3, "hb 30\n");
  clock_.Advance(Millis(2));
  launcher_.Control(id_, 1, "hb 29\n");
  clock_.Advance(Millis(998));  // rank 2's deadline passed; the others' come within the noise
  EXPECT_FALSE(Get().root_cause) << "judged before the noise (500ms here) was waited out";
  clock_.Advance(Millis(500));
  ASSERT_TRUE(Get().root_cause);
  EXPECT_EQ(Get().root_cause->rank, -1) << "blamed before any stack came";
  ASSERT_TRUE(sampler_.pending);
  std::vector<SampledStack> stacks(4);
  stacks[0] = {SampledStack::Outcome::kTimedOut, "kernel: thread 1 (train) in futex_wait\n",
               "eu-stack was still running when the 3s budget ran out (3004ms): killed"};
  stacks[1] = {SampledStack::Outcome::kTimedOut, "", "not started within the 3s budget"};
  stacks[2] = {SampledStack::Outcome::kTaken, "Thread 1 (LWP 9):\n#0 c10d::Work::wait\n",
               "eu-stack"};
  stacks[3] = {SampledStack::Outcome::kTaken,
               "Thread 1 (LWP 9):\n#0 gloo::transport::tcp::UnboundBuffer::waitRecv\n", "eu-stack"};
  sampler_.DeliverSampled(std::move(stacks));
  const Job& job = Get();
  EXPECT_EQ(job.root_cause->rank, -1);
  EXPECT_EQ(job.root_cause->message,
            "ranks 0-3 stopped beating within 3ms of each other (no heartbeat for 1s); ranks 2, "
            "3 wait in a collective; stacks of ranks 0, 1 not taken in the 3s budget");
  EXPECT_EQ(job.hang_report->ranks[0].stack_status, StackStatus::kTimedOut);
  EXPECT_EQ(job.hang_report->ranks[2].stack_status, StackStatus::kTaken);
  EXPECT_EQ(job.hang_report->ranks[2].stack_note, "eu-stack");
  EXPECT_NE(job.hang_report->ranks[0].stack.find("futex_wait"), std::string::npos);
  EXPECT_EQ(launcher_.Signalled(SIGTERM).size(), 4u);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().exit_code, 124);
  for (const Rank& r : Get().ranks) EXPECT_EQ(r.state, RankState::kKilled) << r.rank;
  EXPECT_EQ(ExitCodeFor(*Get().root_cause), 124);
}

// Once every stack is in, the rank the others wait for is named even when
// the beats stopped together.
TEST_F(HangInvestigationTest, StacksNameTheCulpritWhenTheBeatsStoppedTogether) {
  HungJob();
  EXPECT_EQ(Get().root_cause->rank, -1);
  sampler_.Deliver({"#0 c10d::Work::wait\n", "", "#0 injected_hang (rank, step) at train.cc:43\n"});
  const Job& job = Get();
  EXPECT_EQ(job.root_cause->rank, 2);
  EXPECT_EQ(job.root_cause->message,
            "no heartbeat for 1s; the stacks show rank(s) 2 stalled outside a collective while the "
            "others wait in one (stack of rank 1 not taken (eu-stack gave no frames))");
  EXPECT_EQ(job.hang_report->ranks[1].stack_status, StackStatus::kFailed);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().ranks[2].state, RankState::kFailed);
  EXPECT_EQ(Get().ranks[0].state, RankState::kKilled);
}

TEST_F(HangInvestigationTest, AStoppedRankIsTheRootCauseAndGetsNoFaulthandler) {
  JobSpec spec = Spec(3);
  spec.heartbeat_timeout = Millis(1000);
  Run(spec);
  for (int r = 0; r < 3; ++r) {
    sampler_.python.insert(launcher_.Find(id_, r).pid);
    launcher_.Control(id_, r, "hb 4\n");
  }
  launcher_.Control(id_, 0, "hb 5\n");  // rank 0's deadline passes last
  launcher_.Find(id_, 1).stopped = SIGSTOP;
  clock_.Advance(Millis(1001));
  const Job& job = Get();
  ASSERT_TRUE(job.root_cause);
  EXPECT_EQ(job.root_cause->rank, 1);
  EXPECT_EQ(job.root_cause->message, "rank 1 is stopped (SIGSTOP)");
  EXPECT_EQ(job.hang_report->ranks[1].process_state, "stopped (SIGSTOP)");
  EXPECT_EQ(job.hang_report->stalled_ranks, std::vector<int>{1});
  // faulthandler runs inside the rank, which a stopped one cannot: only
  // ranks 0 and 2 are asked for their stacks.
  std::vector<pid_t> asked;
  for (auto [pid, sig] : launcher_.process_signals) {
    EXPECT_EQ(sig, SIGABRT);
    asked.push_back(pid);
  }
  EXPECT_EQ(asked, (std::vector<pid_t>{launcher_.Find(id_, 0).pid, launcher_.Find(id_, 2).pid}));
  // Rank 2's stack shows no collective; the stopped rank stays the cause.
  launcher_.Output(id_, 0, Stream::kStderr,
                   "Current thread 0x1 (most recent call first):\n"
                   "  File \"/torch/autograd/__init__.py\", line 197 in backward\n");
  launcher_.Exit(id_, 0, 0, SIGABRT);
  launcher_.Output(id_, 2, Stream::kStderr,
                   "Current thread 0x1 (most recent call first):\n"
                   "  File \"train.py\", line 9 in save_checkpoint\n");
  launcher_.Exit(id_, 2, 0, SIGABRT);
  EXPECT_EQ(Get().root_cause->rank, 1);
  // The teardown continues the stopped rank so that it handles SIGTERM.
  EXPECT_EQ(launcher_.signals,
            (std::vector<std::pair<pid_t, int>>{{launcher_.Find(id_, 1).pid, SIGTERM},
                                                {launcher_.Find(id_, 1).pid, SIGCONT}}));
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().exit_code, 124);
  EXPECT_EQ(Get().ranks[1].state, RankState::kFailed);
  EXPECT_EQ(Get().ranks[2].state, RankState::kKilled);
}

// The stacks of attempt 0's hang come after its investigation gave up on
// them, while attempt 1 investigates a hang of its own: they are attempt
// 0's, so they must not land in attempt 1's report, nor end its
// investigation before its own stacks come.
TEST_F(HangInvestigationTest, ALateStackSampleOfAnEndedAttemptIsDropped) {
  HungJob(/*max_restarts=*/1);
  ASSERT_TRUE(sampler_.pending);
  auto first = std::move(sampler_.pending);
  sampler_.pending = nullptr;
  clock_.Advance(Millis(3500));  // the budget runs out: teardown without stacks
  EXPECT_EQ(launcher_.Signalled(SIGTERM).size(), 3u);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));  // empty, restarted at once (no backoff here)
  ASSERT_EQ(Get().restart_count, 1);
  ASSERT_EQ(Get().state, JobState::kRunning);
  BeatAndStall();  // attempt 1 hangs too
  ASSERT_TRUE(Get().hang_report);
  ASSERT_TRUE(sampler_.pending) << "attempt 1's own stacks are asked for";
  std::vector<SampledStack> stale(3);
  for (SampledStack& s : stale) {
    s.outcome = SampledStack::Outcome::kTaken;
    s.text = "#0 stale_frame_of_attempt_0\n";
    s.note = "eu-stack";
  }
  first(std::move(stale));
  for (const HangReportRank& r : Get().hang_report->ranks) {
    EXPECT_EQ(r.stack.find("stale_frame"), std::string::npos) << "rank " << r.rank;
    EXPECT_NE(r.stack_status, StackStatus::kTaken) << "rank " << r.rank;
  }
  EXPECT_EQ(launcher_.Signalled(SIGTERM).size(), 3u) << "attempt 1's investigation ended early";
  sampler_.Deliver({"#0 c10d::Work::wait\n", "#0 injected_hang (rank, step) at train.cc:43\n",
                    "#0 c10d::Work::wait\n"});
  EXPECT_EQ(Get().root_cause->rank, 1);
  EXPECT_NE(Get().hang_report->ranks[1].stack.find("injected_hang"), std::string::npos);
  EXPECT_EQ(launcher_.Signalled(SIGTERM).size(), 6u);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().state, JobState::kFailed);
  EXPECT_EQ(Get().exit_code, 124);
}

TEST_F(HangInvestigationTest, AHoldOnHangLeavesTheRanksForALookThenTearsDown) {
  JobSpec spec = Spec(3);
  spec.heartbeat_timeout = Millis(1000);
  spec.hold_on_hang = Millis(60'000);
  Run(spec);
  BeatAndStall();
  sampler_.Deliver({"#0 c10d::Work::wait\n", "#0 injected_hang (rank, step) at train.cc:43\n",
                    "#0 c10d::Work::wait\n"});
  // The report is complete and on record; the ranks are left as they are.
  EXPECT_EQ(Get().root_cause->rank, 1);
  EXPECT_TRUE(launcher_.signals.empty());
  ASSERT_TRUE(Get().held_until);
  EXPECT_EQ(*Get().held_until, clock_.Now() + Millis(60'000));
  EXPECT_EQ(Get().state, JobState::kRunning);
  const std::string pid = std::to_string(launcher_.Find(id_, 0).pid);
  bool hint = false;
  for (const std::string& l : events_.lines)
    hint = hint || (l.find("eu-stack -p " + pid) != std::string::npos &&
                    l.find("gdb -p " + pid) != std::string::npos);
  EXPECT_TRUE(hint) << "no line with the pids and how to look";
  launcher_.Control(id_, 1, "hb 5\n");  // a look that moves it changes nothing
  clock_.Advance(Millis(59'999));
  EXPECT_TRUE(launcher_.signals.empty());
  clock_.Advance(Millis(1));
  EXPECT_EQ(launcher_.Signalled(SIGTERM).size(), 3u);
  EXPECT_FALSE(Get().held_until);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().state, JobState::kFailed);
  EXPECT_EQ(Get().exit_code, 124);
  EXPECT_EQ(Get().root_cause->reason, CauseReason::kHang);
}

TEST_F(HangInvestigationTest, AKillEndsTheHoldEarlyAndTheHangStaysTheCause) {
  JobSpec spec = Spec(2);
  spec.heartbeat_timeout = Millis(1000);
  spec.hold_on_hang = Millis(60'000);
  Run(spec);
  // Python ranks: faulthandler would end them, so a hold asks for no stack.
  sampler_.python = {launcher_.Find(id_, 0).pid, launcher_.Find(id_, 1).pid};
  for (int r = 0; r < 2; ++r) launcher_.Control(id_, r, "hb 4\n");
  clock_.Advance(Millis(1001));
  EXPECT_TRUE(launcher_.process_signals.empty());
  ASSERT_TRUE(Get().held_until);
  EXPECT_EQ(Get().hang_report->ranks[0].stack_status, StackStatus::kSkipped);
  clock_.Advance(Millis(5'000));
  EXPECT_TRUE(launcher_.signals.empty());
  ASSERT_TRUE(runner_->Kill(KillOrder::Teardown("alice")).ok());
  EXPECT_EQ(launcher_.Signalled(SIGTERM).size(), 2u);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().state, JobState::kFailed);
  EXPECT_EQ(Get().root_cause->reason, CauseReason::kHang);
  EXPECT_EQ(Get().exit_code, 124);
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

}  // namespace
}  // namespace ltd::test
