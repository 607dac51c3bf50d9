// One job's life through its runner, driven directly with a fake launcher
// and a fake clock: exits and root causes, the grace, the watchdog,
// restarts and the time limit. No process is started, nothing sleeps.
#include <signal.h>

#include <fstream>

#include "error_file.h"
#include "hang_report.h"
#include "runner_fixture.h"

namespace ltd::test {
namespace {

class JobRunnerTest : public RunnerFixture {};

TEST_F(JobRunnerTest, FirstNonZeroExitIsTheRootCauseAndTearsDownTheRest) {
  Run(Spec(4));
  launcher_.Exit(id_, 2, 3);
  // SIGTERM, then SIGCONT so that a stopped rank handles it; only live ranks.
  ASSERT_EQ(launcher_.signals.size(), 6u);
  for (size_t i = 0; i < 6; i += 2) {
    EXPECT_EQ(launcher_.signals[i].second, SIGTERM);
    EXPECT_EQ(launcher_.signals[i + 1], std::make_pair(launcher_.signals[i].first, SIGCONT));
  }
  EXPECT_EQ(launcher_.Signalled(SIGTERM),
            (std::vector<pid_t>{launcher_.Find(id_, 0).pid, launcher_.Find(id_, 1).pid,
                                launcher_.Find(id_, 3).pid}));
  launcher_.Exit(id_, 0, 1);  // a consequence, not a cause
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  const Job& job = Get();
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.exit_code, 3);
  ASSERT_TRUE(job.root_cause);
  EXPECT_EQ(job.root_cause->rank, 2);
  EXPECT_EQ(job.root_cause->reason, CauseReason::kExited);
  EXPECT_EQ(job.ranks[2].state, RankState::kFailed);
  EXPECT_EQ(job.ranks[0].state, RankState::kKilled);
  EXPECT_EQ(job.ranks[1].state, RankState::kKilled);
  EXPECT_EQ(clock_.pending_timers(), 0u);  // the grace timer went with the ranks
}

// A rank that failed because its peer went away (gloo's words in its
// error line) is not the cause when the peer it lost fails after it: the
// peer's exception came first, its exit later (its traceback, its
// interpreter's end). Nothing is torn down while the runner waits.
TEST_F(JobRunnerTest, AFailureAfterAPeerWentAwayWaitsForThePeersOwn) {
  Run(Spec(3));
  launcher_.Control(id_, 0, "error RuntimeError: Connection closed by peer [127.0.0.1]:5848\n");
  launcher_.Exit(id_, 0, 1);
  EXPECT_FALSE(Get().root_cause);
  EXPECT_TRUE(launcher_.signals.empty());
  clock_.Advance(JobRunner::kConsequenceWait - Millis(1));
  EXPECT_FALSE(Get().root_cause);
  launcher_.Control(id_, 1, "error RuntimeError: kit crash on rank 1\n");
  launcher_.Exit(id_, 1, 1);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  const Job& job = Get();
  ASSERT_TRUE(job.root_cause);
  EXPECT_EQ(job.root_cause->rank, 1);
  EXPECT_EQ(job.root_cause->reason, CauseReason::kExited);
  EXPECT_EQ(job.root_cause->message, "RuntimeError: kit crash on rank 1");
  EXPECT_EQ(job.ranks[1].state, RankState::kFailed);
  EXPECT_EQ(job.ranks[0].state, RankState::kKilled);
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

// No other rank fails within the wait: the one that lost its peer is the
// cause after all, and the rest are torn down then; so too at once when
// the others all end well (below).
TEST_F(JobRunnerTest, AFailureAfterAPeerWentAwayIsTheCauseWhenNoneComesFirst) {
  Run(Spec(2));
  launcher_.Control(id_, 1, "error RuntimeError: Connection reset by peer\n");
  launcher_.Exit(id_, 1, 1);
  EXPECT_TRUE(launcher_.signals.empty());
  clock_.Advance(JobRunner::kConsequenceWait);
  ASSERT_TRUE(Get().root_cause);
  EXPECT_EQ(Get().root_cause->rank, 1);
  EXPECT_EQ(launcher_.Signalled(SIGTERM), (std::vector<pid_t>{launcher_.Find(id_, 0).pid}));
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().state, JobState::kFailed);
}

TEST_F(JobRunnerTest, AFailureAfterAPeerWentAwayIsTheCauseOnceTheOthersEndedWell) {
  Run(Spec(2));
  launcher_.Control(id_, 0, "error RuntimeError: Connection reset by peer\n");
  launcher_.Exit(id_, 0, 1);
  launcher_.Exit(id_, 1, 0);
  clock_.Advance(Millis(0));
  ASSERT_TRUE(Get().root_cause);
  EXPECT_EQ(Get().root_cause->rank, 0);
  EXPECT_EQ(Get().state, JobState::kFailed);
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

TEST_F(JobRunnerTest, SignalDeathMapsTo128PlusN) {
  Run(Spec(2));
  launcher_.Exit(id_, 1, 0, SIGSEGV);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().exit_code, 139);
  EXPECT_EQ(Get().root_cause->reason, CauseReason::kSignaled);
  EXPECT_EQ(Get().root_cause->signal, SIGSEGV);
}

// PyTorch's NCCL watchdog ends a rank by throwing in its own thread: the
// rank dies of SIGABRT, and its stderr said which exception.
TEST_F(JobRunnerTest, AnAbortAfterAnUncaughtExceptionSaysWhichOne) {
  Run(Spec(2));
  launcher_.Output(id_, 1, Stream::kStderr,
                   "terminate called after throwing an instance of 'c10::DistBackendError'\n"
                   "  what():  [Rank 1] Watchdog caught collective operation timeout\n"
                   "Exception raised from checkTimeout at ProcessGroupNCCL.cpp:692\n");
  launcher_.Output(id_, 0, Stream::kStderr,
                   "terminate called after throwing an instance of 'std::bad_alloc'\n");
  launcher_.Exit(id_, 1, 0, SIGABRT);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  ASSERT_TRUE(Get().root_cause);
  EXPECT_EQ(Get().root_cause->reason, CauseReason::kSignaled);
  EXPECT_EQ(Get().root_cause->message,
            "rank 1 died of signal 6 (ABRT): terminate called after throwing "
            "c10::DistBackendError: [Rank 1] Watchdog caught collective operation timeout");
}

// Only an abort is std::terminate's: another signal after such a line is
// said as it is.
TEST_F(JobRunnerTest, AnotherSignalAfterATerminateLineIsJustTheSignal) {
  Run(Spec(1));
  launcher_.Output(id_, 0, Stream::kStderr,
                   "terminate called after throwing an instance of 'std::runtime_error'\n"
                   "  what():  not this\n");
  launcher_.Exit(id_, 0, 0, SIGSEGV);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().root_cause->message, "rank 0 died of signal 11 (SEGV)");
}

TEST_F(JobRunnerTest, GraceExpiryKillsWhatIsLeft) {
  Run(Spec(2));
  launcher_.Exit(id_, 0, 7);
  clock_.Advance(Millis(999));
  EXPECT_TRUE(launcher_.killed_jobs.empty());
  clock_.Advance(Millis(1));
  EXPECT_EQ(launcher_.killed_jobs, std::vector<std::string>{id_});
  launcher_.Exit(id_, 1, 0, SIGKILL);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().state, JobState::kFailed);
  EXPECT_EQ(Get().exit_code, 7);
  EXPECT_EQ(Get().ranks[1].signal, SIGKILL);
}

TEST_F(JobRunnerTest, ErrorLineBecomesTheRootCauseMessage) {
  Run(Spec(2));
  launcher_.Control(id_, 1, "error CUDA out of memory\n");
  launcher_.Exit(id_, 1, 1);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().root_cause->message, "CUDA out of memory");
}

TEST_F(JobRunnerTest, TorchElasticErrorFileIsRead) {
  Run(Spec(1));
  const std::string path = launcher_.Env(id_, 0, "TORCHELASTIC_ERROR_FILE");
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs(R"({"message": {"message": "ValueError: bad batch", "extraInfo": {}}})", f);
  fclose(f);
  launcher_.Exit(id_, 0, 1);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().root_cause->message, "ValueError: bad batch");
}

TEST_F(JobRunnerTest, AnErrorFileThatIsNoValidJsonIsKeptAsText) {
  Run(Spec(1));
  // Python writes an undecodable byte as a lone surrogate, which no JSON
  // parser takes; the rank's words are still what happened.
  const std::string text = R"({"message": {"message": "OSError: caf\udce9"}})";
  std::ofstream(launcher_.Env(id_, 0, "TORCHELASTIC_ERROR_FILE")) << text;
  launcher_.Exit(id_, 0, 1);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().root_cause->message, text);
}

// What a rank writes in its error file is bounded in its root cause, as
// an `error` line is: a record holds one cause an attempt, and ltd holds
// every kept job's.
TEST_F(JobRunnerTest, ALongErrorFileMessageIsCutInTheRootCause) {
  Run(Spec(1));
  const std::string said(60 * 1024, 'x');
  std::ofstream(launcher_.Env(id_, 0, "TORCHELASTIC_ERROR_FILE"))
      << R"({"message": {"message": ")" << said << R"(", "extraInfo": {}}})";
  launcher_.Exit(id_, 0, 1);
  clock_.Advance(Millis(0));
  const std::string& message = Get().root_cause->message;
  EXPECT_LE(message.size(), kMaxErrorFileMessage);
  EXPECT_EQ(message.substr(0, 1000), said.substr(0, 1000));
  EXPECT_TRUE(message.ends_with(" bytes]")) << message.substr(message.size() - 40);
}

TEST_F(JobRunnerTest, AProgramThatCannotRunIsSpawnFailedWithTheShellsCode) {
  // The exec shim looks the program up as the user and says why it could
  // not run on the heartbeat fd, then exits as a shell would.
  Run(Spec(2, {"no-such-train", "--lr", "3e-4"}));
  ASSERT_EQ(launcher_.procs.size(), 2u);
  EXPECT_EQ(launcher_.procs[0].request.argv,
            (std::vector<std::string>{"no-such-train", "--lr", "3e-4"}));  // as typed
  launcher_.Control(id_, 1,
                    "exec_failed cannot execute no-such-train: No such file or directory\n");
  launcher_.Exit(id_, 1, 127);
  launcher_.Control(id_, 0,
                    "exec_failed cannot execute no-such-train: No such file or directory\n");
  launcher_.Exit(id_, 0, 127);
  clock_.Advance(Millis(0));
  const Job& job = Get();
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.exit_code, 127);
  EXPECT_EQ(job.root_cause->reason, CauseReason::kSpawnFailed);
  EXPECT_EQ(job.root_cause->rank, 1);
  EXPECT_EQ(job.root_cause->message, "cannot execute no-such-train: No such file or directory");
}

TEST_F(JobRunnerTest, SpawnFailureMidwayTearsDownStartedRanks) {
  launcher_.fail_rank = 2;
  Run(Spec(4));
  EXPECT_EQ(launcher_.procs.size(), 2u);  // ranks 0 and 1 ran, 3 never did
  EXPECT_EQ(launcher_.Signalled(SIGTERM).size(), 2u);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  const Job& job = Get();
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.root_cause->reason, CauseReason::kSpawnFailed);
  EXPECT_EQ(job.root_cause->rank, 2);
  EXPECT_EQ(job.ranks[3].pid, 0);
}

TEST_F(JobRunnerTest, HeartbeatTimeoutIsAHangWithAReport) {
  JobSpec spec = Spec(3);
  spec.heartbeat_timeout = Millis(500);
  Run(spec);
  for (int step = 0; step < 5; ++step) {
    for (int r = 0; r < 3; ++r) {
      if (r == 1 && step > 2) continue;  // rank 1 stalls after step 2
      launcher_.Control(id_, r, "hb " + std::to_string(step) + "\n");
    }
    clock_.Advance(Millis(100));
  }
  // Ranks 0 and 2 keep beating; rank 1's deadline passes first.
  for (int i = 0; i < 4; ++i) {
    launcher_.Control(id_, 0, "hb 5\n");
    launcher_.Control(id_, 2, "hb 5\n");
    clock_.Advance(Millis(100));
  }
  const Job& job = Get();
  ASSERT_TRUE(job.root_cause);
  EXPECT_EQ(job.root_cause->reason, CauseReason::kHang);
  EXPECT_EQ(job.root_cause->rank, 1);
  ASSERT_TRUE(job.hang_report);
  EXPECT_EQ(job.hang_report->stalled_ranks, std::vector<int>{1});
  EXPECT_EQ(job.hang_report->straggler_ranks, std::vector<int>{1});
  EXPECT_EQ(job.hang_report->ranks[1].last_step, 2);
  EXPECT_EQ(job.hang_report->ranks[0].last_step, 5);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().exit_code, 124);
  EXPECT_EQ(Get().state, JobState::kFailed);
}

// The launcher reads beats in batches, late: a beat that arrived before
// the deadline but waits in its socket still counts.
TEST_F(JobRunnerTest, TheWatchdogReadsPendingBeatsBeforeItCallsARankHung) {
  JobSpec spec = Spec(2);
  spec.heartbeat_timeout = Millis(500);
  Run(spec);
  launcher_.Control(id_, 0, "hb 1\n");
  launcher_.Control(id_, 1, "hb 1\n");
  clock_.Advance(Millis(400));
  launcher_.Pending(id_, 0, "hb 2\n");
  launcher_.Pending(id_, 1, "hb 2\n");
  clock_.Advance(Millis(101));  // past the first deadline
  EXPECT_GE(launcher_.heartbeat_reads, 1);
  EXPECT_FALSE(Get().root_cause);
  EXPECT_EQ(Get().ranks[0].last_step, 2);
  // Without beats, pending or not, the next deadline is a hang.
  clock_.Advance(Millis(501));
  ASSERT_TRUE(Get().root_cause);
  EXPECT_EQ(Get().root_cause->reason, CauseReason::kHang);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().exit_code, 124);
}

TEST_F(JobRunnerTest, NoHeartbeatBeforeTheFirstMeansNoHang) {
  JobSpec spec = Spec(1);
  spec.heartbeat_timeout = Millis(200);
  Run(spec);
  clock_.Advance(Millis(10'000));
  EXPECT_EQ(Get().state, JobState::kRunning);
  EXPECT_EQ(clock_.pending_timers(), 0u);  // nothing to watch: no timer at all
}

TEST_F(JobRunnerTest, StartupTimeout) {
  JobSpec spec = Spec(2);
  spec.startup_timeout = Millis(300);
  spec.heartbeat_timeout = Millis(1000);
  Run(spec);
  launcher_.Control(id_, 0, "hb\n");
  clock_.Advance(Millis(300));  // a deadline passes one tick after it
  EXPECT_FALSE(Get().root_cause);
  clock_.Advance(Millis(1));
  ASSERT_TRUE(Get().root_cause);
  EXPECT_EQ(Get().root_cause->reason, CauseReason::kStartupTimeout);
  EXPECT_EQ(Get().root_cause->rank, 1);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().exit_code, 124);
}

TEST_F(JobRunnerTest, TimeoutZeroTurnsTheWatchdogOffAndTimeoutDurWidensIt) {
  JobSpec spec = Spec(2);
  spec.heartbeat_timeout = Millis(100);
  Run(spec);
  launcher_.Control(id_, 0, "hb 1\ntimeout 0\n");
  launcher_.Control(id_, 1, "hb 1\ntimeout 5s\n");
  clock_.Advance(Millis(4'900));
  EXPECT_FALSE(Get().root_cause);
  clock_.Advance(Millis(101));
  ASSERT_TRUE(Get().root_cause);
  EXPECT_EQ(Get().root_cause->rank, 1);
  EXPECT_EQ(Get().hang_report->stalled_ranks, std::vector<int>{1});
}

// `ltworker.set_timeout()` or the Lightning callback in a job submitted
// without --heartbeat-timeout: the rank's own timeout line arms its watchdog,
// before its first beat too; ranks that sent none stay unwatched.
TEST_F(JobRunnerTest, TimeoutLineArmsTheWatchdogWithoutAJobTimeout) {
  Run(Spec(2));  // no heartbeat or startup timeout
  launcher_.Control(id_, 0, "timeout 500ms\n");
  launcher_.Control(id_, 1, "hb 1\n");
  clock_.Advance(Millis(400));
  launcher_.Control(id_, 0, "hb 1\n");  // a beat moves the armed deadline
  clock_.Advance(Millis(500));
  EXPECT_FALSE(Get().root_cause);
  clock_.Advance(Millis(1));
  ASSERT_TRUE(Get().root_cause);
  EXPECT_EQ(Get().root_cause->reason, CauseReason::kHang);
  EXPECT_EQ(Get().root_cause->rank, 0);
  EXPECT_EQ(Get().root_cause->message, "no heartbeat for 500ms from rank(s) 0");
  EXPECT_EQ(Get().hang_report->stalled_ranks, std::vector<int>{0});
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().exit_code, 124);
}

TEST_F(JobRunnerTest, OneMillisecondTimeoutIsArmedNotOff) {
  Run(Spec(1));
  launcher_.Control(id_, 0, "timeout 1ms\n");
  clock_.Advance(Millis(2));
  ASSERT_TRUE(Get().root_cause);
  EXPECT_EQ(Get().root_cause->reason, CauseReason::kHang);
}

TEST_F(JobRunnerTest, TimeoutCanShrinkTheDeadline) {
  JobSpec spec = Spec(1);
  spec.heartbeat_timeout = Millis(10'000);
  Run(spec);
  launcher_.Control(id_, 0, "hb\n");
  launcher_.Control(id_, 0, "timeout 200ms\n");
  clock_.Advance(Millis(201));
  ASSERT_TRUE(Get().root_cause);
  EXPECT_EQ(Get().root_cause->reason, CauseReason::kHang);
}

TEST_F(JobRunnerTest, StepRateIsMeasured) {
  Run(Spec(1));
  for (int step = 0; step <= 30; ++step) {
    launcher_.Control(id_, 0, "hb " + std::to_string(step) + "\n");
    clock_.Advance(Millis(100));
  }
  EXPECT_NEAR(Get().ranks[0].steps_per_second, 10.0, 0.5);
  EXPECT_EQ(Get().ranks[0].last_step, 30);
}

TEST_F(JobRunnerTest, MalformedHeartbeatsAreIgnored) {
  JobSpec spec = Spec(1);
  spec.heartbeat_timeout = Millis(100);
  Run(spec);
  launcher_.Control(id_, 0, "hb -1\nhb x\nbogus\n" + std::string(10'000, 'a') + "\nhb 4\n");
  EXPECT_EQ(Get().ranks[0].last_step, 4);
  EXPECT_FALSE(Get().root_cause);
}

TEST_F(JobRunnerTest, RestartsRunOut) {
  JobSpec spec = Spec(1);
  spec.max_restarts = 1;
  Run(spec);
  launcher_.Exit(id_, 0, 9);
  clock_.Advance(Millis(0));
  launcher_.Exit(id_, 0, 9);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get().state, JobState::kFailed);
  EXPECT_EQ(Get().exit_code, 9);
  EXPECT_EQ(Get().attempts.size(), 2u);
}

TEST_F(JobRunnerTest, TheTimeLimitTearsTheJobDownWith124) {
  JobSpec spec = Spec(2);
  spec.time_limit = Millis(10'000);
  Run(spec);
  clock_.Advance(Millis(9'999));
  EXPECT_TRUE(launcher_.signals.empty());
  clock_.Advance(Millis(1));
  EXPECT_EQ(launcher_.Signalled(SIGTERM).size(), 2u);
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  ASSERT_TRUE(events_.ended);
  EXPECT_EQ(Get().state, JobState::kTimeout) << "sbatch's TIMEOUT";
  EXPECT_EQ(Get().exit_code, 124);
  ASSERT_TRUE(Get().root_cause);
  EXPECT_EQ(Get().root_cause->reason, CauseReason::kTimeLimit);
  EXPECT_EQ(Get().root_cause->rank, -1);
  EXPECT_EQ(Get().root_cause->message, "the job ran for its time limit of 10s (--time)");
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

// A node of a multi-node run holds its devices from its rendezvous on: it
// is STARTING there, and its time counts from there. One whose run never
// completes ends at its time, its ranks never started.
TEST_F(JobRunnerTest, TheTimeLimitCountsFromTheRendezvous) {
  Job job;
  job.id = id_;
  job.spec = Spec(2);
  job.spec.time_limit = Millis(4'000);
  job.spec.nodes.nnodes = 2;
  job.spec.nodes.rdzv = "etcd://127.0.0.1:2379";
  ASSERT_TRUE(store_->CreateJobDir(job.id).ok());
  runner_ = std::make_unique<JobRunner>(clock_, launcher_, *store_, nullptr, Config(),
                                        std::move(job), events_);
  runner_->BeginRendezvous();
  EXPECT_EQ(Get().state, JobState::kStarting);
  EXPECT_TRUE(Get().started_at.has_value());
  clock_.Advance(Millis(3'999));
  EXPECT_FALSE(events_.ended);
  clock_.Advance(Millis(1));
  ASSERT_TRUE(events_.ended);
  EXPECT_EQ(Get().state, JobState::kTimeout);
  EXPECT_EQ(Get().exit_code, 124);
  ASSERT_TRUE(Get().root_cause);
  EXPECT_EQ(Get().root_cause->reason, CauseReason::kTimeLimit);
  EXPECT_EQ(Get().root_cause->message,
            "the job reached its time limit of 4s (--time) waiting in the rendezvous for its "
            "run's other nodes");
  EXPECT_TRUE(launcher_.procs.empty());
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

// The limit counts from the first start, restarts included: a job waiting
// out its backoff when the time is up ends then, and does not restart.
TEST_F(JobRunnerTest, TheTimeLimitCountsAcrossRestarts) {
  JobSpec spec = Spec(1);
  spec.time_limit = Millis(10'000);
  spec.max_restarts = 5;
  RunnerConfig config = Config();
  config.restart_backoff = Millis(4'000);
  Run(spec, config);
  clock_.Advance(Millis(1'000));
  launcher_.Exit(id_, 0, 1);  // fails: restarts at 5s
  clock_.Advance(Millis(4'000));
  ASSERT_EQ(Get().restart_count, 1);
  ASSERT_EQ(launcher_.procs.size(), 2u);
  clock_.Advance(Millis(1'000));
  launcher_.Exit(id_, 0, 1);  // fails again at 6s: the backoff (8s) outlasts the limit
  clock_.Advance(Millis(4'000));
  ASSERT_TRUE(events_.ended);
  EXPECT_EQ(launcher_.procs.size(), 2u);
  EXPECT_EQ(Get().root_cause->reason, CauseReason::kTimeLimit);
  EXPECT_EQ(Get().exit_code, 124);
}

// A crash found first stays the root cause; the limit only stops restarts.
TEST_F(JobRunnerTest, TheTimeLimitDuringATeardownKeepsItsCause) {
  JobSpec spec = Spec(2);
  spec.time_limit = Millis(10'000);
  spec.max_restarts = 5;
  Run(spec);
  clock_.Advance(Millis(9'000));
  launcher_.Exit(id_, 0, 3);
  clock_.Advance(Millis(1'000));  // rank 1 ignores its SIGTERM past the limit
  launcher_.ExitSignalled(id_);
  clock_.Advance(Millis(0));
  ASSERT_TRUE(events_.ended);
  EXPECT_EQ(Get().root_cause->reason, CauseReason::kExited);
  EXPECT_EQ(Get().exit_code, 3);
  EXPECT_EQ(Get().restart_count, 0);
}

}  // namespace
}  // namespace ltd::test
