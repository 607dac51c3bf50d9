// The runner's side of a multi-node run with a fake fence, a fake launcher
// and a fake clock: its own root cause goes out with its node, another
// node's tears it down at once (remote_failure), a consequence here waits
// for the run's verdict, which the record names; restarts wait for every
// node. No etcd, no process, no sleep.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "fakes.h"
#include "job_runner.h"
#include "run_hang.h"

namespace ltd::test {
namespace {

class FakeFence final : public RunFence {
 public:
  void SetEvents(RunFenceEvents* e) override { events = e; }
  void Publish(int attempt, const NodeReport& report) override {
    published.emplace_back(attempt, report.cause);
    kinds.push_back(report.kind);
    reports.push_back(report);
  }
  Millis verdict_window() const override { return Millis(6000); }
  void SetState(JobState state, const std::optional<RootCause>&) override {
    states.push_back(state);
  }
  void BeginAttempt(int attempt, std::function<void(absl::Status)> ready) override {
    barriers.push_back(attempt);
    this->ready = std::move(ready);
  }
  RunFenceEvents* events = nullptr;
  std::vector<std::pair<int, RootCause>> published;
  std::vector<Evidence> kinds;
  std::vector<NodeReport> reports;
  std::vector<JobState> states;
  std::vector<int> barriers;
  std::function<void(absl::Status)> ready;
};

class Events final : public SupervisionEvents {
 public:
  void OnChanged(const Job&, Change) override {}
  void OnOutput(int, Stream, std::string_view line) override { lines.emplace_back(line); }
  void OnEnded(const Job& job) override { ended = job; }
  void OnLost(std::string) override {}
  std::vector<std::string> lines;
  std::optional<Job> ended;
};

class FenceRunnerTest : public ::testing::Test {
 protected:
  FenceRunnerTest() {
    char tmpl[] = "/tmp/ltd-fence.XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = std::make_unique<JobStore>(*JobStore::Open(dir_));
  }
  ~FenceRunnerTest() override {
    runner_.reset();
    std::filesystem::remove_all(dir_);
  }
  // Node `node` of 2, 2 ranks each.
  void Start(int node, int max_restarts = 0) {
    Job job;
    job.id = "1";
    job.spec.devices = 2;
    job.spec.argv = {"/bin/true"};
    job.spec.cwd = "/";
    job.spec.uid = getuid();
    job.spec.gid = getgid();
    job.spec.grace = Millis(1000);
    job.spec.max_restarts = max_restarts;
    job.spec.nodes.nnodes = 2;
    job.spec.nodes.node_rank = node;
    job.spec.nodes.rdzv = "etcd://127.0.0.1:2379";
    job.master_port = 29500;
    ASSERT_TRUE(store_->CreateJobDir(job.id).ok());
    RunnerConfig config;
    config.restart_backoff = Millis(0);
    runner_ =
        std::make_unique<JobRunner>(clock_, launcher_, *store_, nullptr, config, job, events_);
    runner_->SetFence(&fence_);
    runner_->Start();
  }
  RootCause Remote(int node, int rank, CauseReason reason = CauseReason::kExited, int code = 3) {
    RootCause c;
    c.node = node;
    c.rank = rank;
    c.reason = reason;
    c.exit_code = code;
    c.message = "rank " + std::to_string(rank) + " exited with code " + std::to_string(code);
    return c;
  }

  std::string dir_;
  std::unique_ptr<JobStore> store_;
  FakeClock clock_;
  FakeLauncher launcher_{clock_};
  FakeFence fence_;
  Events events_;
  std::unique_ptr<JobRunner> runner_;

  NodeReport Verdict(int node, int rank, Evidence kind = Evidence::kPrimary,
                     CauseReason reason = CauseReason::kExited, int code = 3) {
    NodeReport r;
    r.node = node;
    r.kind = kind;
    r.cause = Remote(node, rank, reason, code);
    return r;
  }
};

TEST_F(FenceRunnerTest, OwnRootCauseGoesToTheRunWithItsNode) {
  Start(1);
  ASSERT_EQ(fence_.events, runner_.get());
  EXPECT_EQ(fence_.states, std::vector<JobState>{JobState::kRunning});
  launcher_.Exit("1", 1, 3);
  ASSERT_EQ(fence_.published.size(), 1u);
  EXPECT_EQ(fence_.published[0].first, 0);
  EXPECT_EQ(fence_.published[0].second.node, 1);
  EXPECT_EQ(fence_.published[0].second.rank, 1);
  EXPECT_EQ(fence_.kinds[0], Evidence::kPrimary);
  launcher_.ExitSignalled("1");
  clock_.Advance(Millis(1));
  // The ranks are gone; the record waits for the run's verdict.
  EXPECT_FALSE(events_.ended);
  // The run's cause comes back: it is this node's own, nothing changes.
  NodeReport own;
  own.node = 1;
  own.cause = fence_.published[0].second;
  runner_->OnRunVerdict(0, own, "", {});
  ASSERT_TRUE(events_.ended);
  EXPECT_EQ(events_.ended->root_cause->reason, CauseReason::kExited);
  EXPECT_EQ(events_.ended->root_cause->message, "rank 1 exited with code 3");
  EXPECT_EQ(events_.ended->exit_code, 3);
  EXPECT_EQ(fence_.states.back(), JobState::kFailed);
}

TEST_F(FenceRunnerTest, AnotherNodesCauseTearsThisOneDownAtOnce) {
  Start(0);
  runner_->OnRunCause(0, Remote(1, 1));
  // The teardown does not wait for the verdict.
  EXPECT_EQ(launcher_.Signalled(15).size(), 2u);
  ASSERT_EQ(fence_.kinds.size(), 1u);
  EXPECT_EQ(fence_.kinds[0], Evidence::kTornDown);  // counted, never chosen over a cause
  launcher_.ExitSignalled("1");
  clock_.Advance(Millis(1));
  EXPECT_FALSE(events_.ended);
  runner_->OnRunVerdict(0, Verdict(1, 1), "", {});
  ASSERT_TRUE(events_.ended);
  const RootCause& c = *events_.ended->root_cause;
  EXPECT_EQ(c.reason, CauseReason::kRemoteFailure);
  EXPECT_EQ(c.node, 1);
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.message, "node 1 rank 3: rank 1 exited with code 3");
  EXPECT_EQ(events_.ended->exit_code, 3);
  EXPECT_EQ(events_.ended->state, JobState::kFailed);
}

TEST_F(FenceRunnerTest, ACauseOfAnotherAttemptIsIgnored) {
  Start(0);
  runner_->OnRunCause(1, Remote(1, 0));
  runner_->OnRunVerdict(1, Verdict(1, 0), "", {});
  EXPECT_TRUE(launcher_.Signalled(15).empty());
  EXPECT_FALSE(events_.ended);
}

TEST_F(FenceRunnerTest, APeerLossHereIsAConsequenceAndTheVerdictNamesTheCulprit) {
  Start(0);
  // gloo noticed the dead peer first: a rank here fails as a consequence,
  // before the other node's cause arrives.
  launcher_.Output("1", 0, Stream::kStderr,
                   "RuntimeError: [gloo/transport/tcp/pair.cc:598] Connection closed by peer "
                   "[10.213.0.4]:4711\n");
  launcher_.Exit("1", 0, 1);
  ASSERT_EQ(fence_.kinds.size(), 1u);
  EXPECT_EQ(fence_.kinds[0], Evidence::kConsequence);
  runner_->OnRunCause(0, Remote(1, 1));  // the first word changes nothing here
  launcher_.ExitSignalled("1");
  clock_.Advance(Millis(1));
  EXPECT_FALSE(events_.ended);
  EXPECT_EQ(runner_->job().root_cause->reason, CauseReason::kExited);
  NodeReport gone = Verdict(1, -1, Evidence::kNodeGone, CauseReason::kSupervisorLost, 1);
  gone.cause.message = "node 1 is gone: its supervisor and ranks vanished (its etcd lease expired)";
  runner_->OnRunVerdict(0, gone, "", {});
  ASSERT_TRUE(events_.ended);
  EXPECT_EQ(events_.ended->root_cause->reason, CauseReason::kRemoteFailure);
  EXPECT_EQ(events_.ended->root_cause->node, 1);
  EXPECT_EQ(events_.ended->root_cause->message, gone.cause.message);
}

TEST_F(FenceRunnerTest, ALoneConsequenceStandsSayingSo) {
  Start(1);
  launcher_.Output("1", 1, Stream::kStderr, "RuntimeError: Connection reset by peer\n");
  launcher_.Exit("1", 1, 1);
  launcher_.ExitSignalled("1");
  clock_.Advance(Millis(1));
  EXPECT_FALSE(events_.ended);
  NodeReport own;
  own.node = 1;
  own.kind = Evidence::kConsequence;
  own.what = "lost its peer";
  own.cause = fence_.published[0].second;
  runner_->OnRunVerdict(0, own, "no node reported a cause within 6s", {});
  ASSERT_TRUE(events_.ended);
  EXPECT_EQ(events_.ended->root_cause->reason, CauseReason::kExited);
  EXPECT_EQ(events_.ended->root_cause->message,
            "node 1 rank 3 lost its peer; no node reported a cause within 6s (rank 1 exited with "
            "code 1)");
}

TEST_F(FenceRunnerTest, AHangFoundElsewhereIsInvestigatedHereFirst) {
  Start(0);
  runner_->OnRunCause(0, Remote(1, -1, CauseReason::kHang, 124));
  // This node's own hang report, with its stacks (none to be had here),
  // says what kind of evidence it is: a pending report, then its kind.
  ASSERT_EQ(fence_.kinds.size(), 2u);
  EXPECT_EQ(fence_.kinds[0], Evidence::kPending);
  EXPECT_EQ(fence_.kinds[1], Evidence::kUndetermined);
  EXPECT_EQ(fence_.published[1].second.reason, CauseReason::kHang);
  EXPECT_NE(fence_.published[1].second.message.find("the run is hung (node 1 found no progress)"),
            std::string::npos)
      << fence_.published[1].second.message;
  ASSERT_TRUE(runner_->job().hang_report);
  EXPECT_EQ(launcher_.Signalled(15).size(), 2u);  // then the teardown, at once
}

TEST_F(FenceRunnerTest, AHangsRecordHoldsEveryNodesRanksAndTheCulpritsStack) {
  Start(0);
  runner_->OnRunCause(0, Remote(1, -1, CauseReason::kHang, 124));
  // This node's evidence goes out once its stacks are in (none here).
  ASSERT_EQ(fence_.reports.size(), 2u);
  EXPECT_FALSE(fence_.reports[0].hang);  // pending: no stacks yet
  ASSERT_TRUE(fence_.reports[1].hang);
  ASSERT_EQ(fence_.reports[1].hang->size(), 2u);
  EXPECT_EQ((*fence_.reports[1].hang)[1].node, 0);
  EXPECT_EQ((*fence_.reports[1].hang)[1].rank, 1);
  launcher_.ExitSignalled("1");
  clock_.Advance(Millis(1));
  EXPECT_FALSE(events_.ended);
  // Node 1's rank 0 slept outside any collective; its rank 1 waited in one.
  NodeReport culprit = Verdict(1, 0, Evidence::kPrimary, CauseReason::kHang, 124);
  culprit.cause.message = "no heartbeat for 3s from rank(s) 0";
  HangReport theirs;
  HangReportRank r;
  r.rank = 0;
  r.last_step = 3;
  r.stalled = true;
  r.stack =
      "Current thread 0x1 (most recent call first):\n  File \"/srv/t.py\", line 9 in <module>\n";
  r.stack_status = StackStatus::kTaken;
  theirs.ranks.push_back(r);
  r.rank = 1;
  r.stalled = false;
  r.in_collective = true;
  theirs.ranks.push_back(r);
  culprit.hang = CompactHang(theirs, 1, 0);
  runner_->OnRunVerdict(0, culprit, "", {fence_.reports[1], culprit});
  ASSERT_TRUE(events_.ended);
  EXPECT_EQ(events_.ended->root_cause->reason, CauseReason::kRemoteFailure);
  ASSERT_TRUE(events_.ended->hang_report);
  const HangReport& h = *events_.ended->hang_report;
  ASSERT_EQ(h.ranks.size(), 4u);
  EXPECT_EQ(h.ranks[0].node, 0);
  EXPECT_EQ(h.ranks[0].stack_status, StackStatus::kSkipped);  // this node's own, whole
  EXPECT_EQ(h.ranks[2].node, 1);
  EXPECT_EQ(h.ranks[2].rank, 0);
  EXPECT_TRUE(h.ranks[2].stalled);
  EXPECT_FALSE(h.ranks[2].in_collective);
  EXPECT_EQ(h.ranks[2].stack, theirs.ranks[0].stack);
  EXPECT_TRUE(h.ranks[3].in_collective);
  EXPECT_EQ(h.stalled_ranks, std::vector<int>{2});
  EXPECT_TRUE(h.missing_nodes.empty());
  // The record on disk says the same.
  auto saved = store_->Load("1");
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_TRUE(saved->hang_report);
  EXPECT_EQ(saved->hang_report->ranks.size(), 4u);
}

TEST_F(FenceRunnerTest, TheRecordWaitsNoLongerThanTheWindow) {
  Start(0);
  launcher_.Exit("1", 0, 2);
  launcher_.ExitSignalled("1");
  clock_.Advance(Millis(1));
  EXPECT_FALSE(events_.ended);
  clock_.Advance(Millis(6000 + 1000));
  EXPECT_FALSE(events_.ended);
  clock_.Advance(Millis(1000));  // the window and the slack
  ASSERT_TRUE(events_.ended);
  EXPECT_EQ(events_.ended->root_cause->message, "rank 0 exited with code 2");
  EXPECT_NE(events_.lines.back().find("the run chose no root cause within 8s"), std::string::npos)
      << events_.lines.back();
}

TEST_F(FenceRunnerTest, RestartsWaitForEveryNode) {
  Start(0, /*max_restarts=*/1);
  runner_->OnRunCause(0, Remote(1, 1));
  launcher_.ExitSignalled("1");
  clock_.Advance(Millis(1));
  ASSERT_EQ(fence_.barriers, std::vector<int>{1});
  EXPECT_EQ(launcher_.procs.size(), 2u);  // nothing started before every node is ready
  EXPECT_EQ(runner_->job().attempts[0].root_cause->node, 1);
  fence_.ready(absl::OkStatus());
  EXPECT_EQ(launcher_.procs.size(), 4u);
  EXPECT_EQ(runner_->job().restart_count, 1);
}

TEST_F(FenceRunnerTest, ARestartTheOtherNodesRefuseEndsTheJob) {
  Start(0, 1);
  launcher_.Exit("1", 0, 2);
  launcher_.ExitSignalled("1");
  clock_.Advance(Millis(1));
  ASSERT_TRUE(fence_.ready);
  fence_.ready(absl::AbortedError("node 1 of run r ended (CANCELLED)"));
  ASSERT_TRUE(events_.ended);
  EXPECT_EQ(events_.ended->exit_code, 2);
  EXPECT_NE(events_.lines.back().find("does not restart: node 1 of run r ended"),
            std::string::npos);
}

TEST_F(FenceRunnerTest, ACancelOnAnotherNodeIsNoRestart) {
  Start(0, 1);
  runner_->OnRunCause(0, Remote(1, -1, CauseReason::kCancelled, 0));
  launcher_.ExitSignalled("1");
  clock_.Advance(Millis(1));
  EXPECT_TRUE(fence_.barriers.empty());
  runner_->OnRunVerdict(0, Verdict(1, -1, Evidence::kPrimary, CauseReason::kCancelled, 0), "", {});
  ASSERT_TRUE(events_.ended);
  EXPECT_EQ(events_.ended->exit_code, 130);
}

TEST_F(FenceRunnerTest, KillWhileWaitingForTheOtherNodes) {
  Start(0, 1);
  launcher_.Exit("1", 0, 2);
  launcher_.ExitSignalled("1");
  clock_.Advance(Millis(1));
  ASSERT_TRUE(fence_.ready);
  ASSERT_TRUE(runner_->Kill(KillOrder::Teardown("", "stop")).ok());
  ASSERT_TRUE(events_.ended);
  EXPECT_EQ(events_.ended->state, JobState::kCancelled);
  fence_.ready(absl::OkStatus());  // too late: nothing starts
  EXPECT_EQ(launcher_.procs.size(), 2u);
}

}  // namespace
}  // namespace ltd::test
