// The real process layer with real children (lt_test_child): spawning,
// pipes, exits, signals, and no leaks (launcher_fixture.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "harness.h"
#include "launcher_fixture.h"
#include "loop.h"
#include "process_group_containment.h"
#include "process_scan.h"
#include "run_loop.h"
#include "uv_launcher.h"

namespace ltd::test {
namespace {

// Each test twice: ranks started in a child of the launcher, and through
// lt-exec.
class LauncherTest : public LauncherFixture, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    launcher_ = std::make_unique<UvLauncher>(
        loop_->get(), std::make_unique<ProcessGroupContainment>(loop_->get()), LT_EXEC_SHIM,
        *ControlReader::Create(loop_->get()));
    if (!GetParam()) launcher_->StartRanksThroughExecShim();
  }

  pid_t Spawn(Rank& rank, const std::vector<std::string>& args,
              const std::vector<std::string>& env = {}, int rank_number = 0) {
    SpawnRequest req = Request(args);
    req.rank = rank_number;
    req.env.insert(req.env.begin(), env.begin(), env.end());
    return LauncherFixture::Spawn(rank, req);
  }
};

TEST_P(LauncherTest, ExitCodeAndOutputArriveBeforeTheExit) {
  Rank r;
  Spawn(r, {"print:3,stderr:warn,line:hb 5,exit:7"});
  ASSERT_TRUE(RunUntil([&] { return r.exit.has_value(); }));
  EXPECT_EQ(r.exit->exit_code, 7);
  EXPECT_EQ(r.exit->term_signal, 0);
  EXPECT_EQ(r.out, "line 0 of 3\nline 1 of 3\nline 2 of 3\n");
  EXPECT_EQ(r.err, "warn\n");
  EXPECT_EQ(r.control, "hb 5\n");
  EXPECT_EQ(launcher_->live_children(), 0u);
}

// lt_test_child stands in for a user's program, which ltd never builds
// with sanitizers: it runs no leak check at its exit, where a teardown's
// SIGKILL could cut the check short and leave a report of its own
// ("Unable to get registers from thread"). In a sanitized build, a leak
// report here (and exit code 23) is that check having run.
TEST_P(LauncherTest, TheTestChildRunsNoLeakCheckAtItsExit) {
  Rank r;
  Spawn(r, {"leak:4096,exit:3"});
  ASSERT_TRUE(RunUntil([&] { return r.exit.has_value(); }));
  EXPECT_EQ(r.exit->exit_code, 3) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST_P(LauncherTest, SignalDeathIsReported) {
  Rank r;
  Spawn(r, {"signal:11"});
  ASSERT_TRUE(RunUntil([&] { return r.exit.has_value(); }));
  EXPECT_EQ(r.exit->term_signal, SIGSEGV);
}

TEST_P(LauncherTest, SignalRankReachesTheWholeGroup) {
  Rank r;
  const pid_t pid = Spawn(r, {"fork:3,hang"});
  ASSERT_TRUE(RunUntil([&] { return r.exit.has_value() || ProcessAlive(pid); }));
  launcher_->SignalRank("t", 0, SIGTERM);
  ASSERT_TRUE(RunUntil([&] { return r.exit.has_value(); }));
  EXPECT_EQ(r.exit->term_signal, SIGTERM);
}

TEST_P(LauncherTest, IgnoredSigtermNeedsKillJob) {
  Rank r;
  Spawn(r, {"ignore-term,line:ready,hang"});
  ASSERT_TRUE(RunUntil([&] { return r.control == "ready\n"; }));
  launcher_->SignalRank("t", 0, SIGTERM);
  EXPECT_FALSE(RunUntil([&] { return r.exit.has_value(); }, 200ms));
  launcher_->KillJob("t");
  ASSERT_TRUE(RunUntil([&] { return r.exit.has_value(); }));
  EXPECT_EQ(r.exit->term_signal, SIGKILL);
}

TEST_P(LauncherTest, StoppedRankIsStillKilled) {
  Rank r;
  const pid_t pid = Spawn(r, {"stop"});
  ASSERT_TRUE(RunUntil([&] {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string s((std::istreambuf_iterator<char>(stat)), {});
    return s.find(") T ") != std::string::npos;
  }));
  launcher_->KillJob("t");
  ASSERT_TRUE(RunUntil([&] { return r.exit.has_value(); }));
  EXPECT_EQ(r.exit->term_signal, SIGKILL);
}

TEST_P(LauncherTest, StopSignalTellsAStoppedRankAndWhatStoppedIt) {
  Rank r;
  const pid_t pid = Spawn(r, {"line:ready,stop,line:continued,hang"});
  ASSERT_TRUE(RunUntil([&] { return r.control == "ready\n"; }));
  ASSERT_TRUE(RunUntil([&] { return ReadProcEntry(pid).value_or(ProcEntry{}).state == 'T'; }));
  EXPECT_EQ(launcher_->StopSignal("t", 0), SIGSTOP);
  EXPECT_EQ(launcher_->StopSignal("t", 0), SIGSTOP);  // asking does not consume it
  EXPECT_EQ(launcher_->StopSignal("t", 1), std::nullopt);
  EXPECT_EQ(launcher_->StopSignal("other", 0), std::nullopt);
  launcher_->SignalRank("t", 0, SIGCONT);
  ASSERT_TRUE(RunUntil([&] { return r.control == "ready\ncontinued\n"; }));
  EXPECT_EQ(launcher_->StopSignal("t", 0), std::nullopt);
  launcher_->SignalRank("t", 0, SIGTERM);
  ASSERT_TRUE(RunUntil([&] { return r.exit.has_value(); }));
  EXPECT_EQ(r.exit->term_signal, SIGTERM);
  EXPECT_EQ(launcher_->StopSignal("t", 0), std::nullopt);  // reaped: nothing to ask
}

TEST_P(LauncherTest, MainThreadCpuIsTheKernelsAccountOfTheRanksMainThread) {
  const std::string go = "/tmp/lt-launcher-spin-" + std::to_string(getpid());
  std::filesystem::remove(go);
  Rank r;
  Spawn(r, {"line:ready,waitfile:" + go + ",spin:300,line:spun,hang"});
  ASSERT_TRUE(RunUntil([&] { return r.control == "ready\n"; }));
  const std::optional<uint64_t> idle = launcher_->MainThreadCpu("t", 0);
  ASSERT_TRUE(idle.has_value());
  EXPECT_EQ(launcher_->MainThreadCpu("t", 1), std::nullopt);
  std::ofstream(go).put('\n');
  ASSERT_TRUE(RunUntil([&] { return r.control == "ready\nspun\n"; }, 30s));
  std::filesystem::remove(go);
  const std::optional<uint64_t> spun = launcher_->MainThreadCpu("t", 0);
  ASSERT_TRUE(spun.has_value());
  // 300ms of CPU is 30 ticks of 10ms; the kernel rounds down.
  EXPECT_GE(*spun, *idle + 25) << *idle << " -> " << *spun;
  launcher_->SignalRank("t", 0, SIGTERM);
  ASSERT_TRUE(RunUntil([&] { return r.exit.has_value(); }));
  EXPECT_EQ(launcher_->MainThreadCpu("t", 0), std::nullopt) << "reaped: nothing to read";
}

TEST_P(LauncherTest, ManyLinesAreAllDelivered) {
  Rank r;
  Spawn(r, {"print:50000,exit:0"});
  ASSERT_TRUE(RunUntil([&] { return r.exit.has_value(); }));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 50000);
}

TEST_P(LauncherTest, ClosingStdoutEarlyDoesNotEndTheRank) {
  Rank r;
  Spawn(r, {"print:1,close-stdout,line:still here,exit:0"});
  ASSERT_TRUE(RunUntil([&] { return r.exit.has_value(); }));
  EXPECT_EQ(r.out, "line 0 of 1\n");
  EXPECT_EQ(r.control, "still here\n");
  EXPECT_EQ(r.exit->exit_code, 0);
}

TEST_P(LauncherTest, ExecFailureIsReportedOnTheHeartbeatFd) {
  Rank r;
  SpawnRequest req;
  req.job_id = "t";
  req.argv = {"/nonexistent/program"};
  req.cwd = "/";
  req.uid = geteuid();
  req.gid = getegid();
  RankCallbacks cb;
  cb.on_output = [&](Stream, std::string_view) {};
  cb.on_control = [&](std::string_view d) { r.control.append(d); };
  cb.on_exit = [&](ExitStatus s) { r.exit = s; };
  ASSERT_TRUE(launcher_->Spawn(req, std::move(cb)).ok());
  ASSERT_TRUE(RunUntil([&] { return r.exit.has_value(); }));
  EXPECT_EQ(r.exit->exit_code, 127);
  EXPECT_NE(r.control.find("exec_failed cannot execute /nonexistent/program"), std::string::npos)
      << r.control;
}

// Stdio, the heartbeat fd and the stack pipe (fd 5; fd 4, what lt-exec
// ran, is closed).
TEST_P(LauncherTest, OnlyStdioTheHeartbeatFdAndTheStackPipeAreInherited) {
  const int leaky = open("/dev/null", O_RDONLY);  // no O_CLOEXEC, on purpose
  Rank r;
  Spawn(r, {"fds,exit:0"});
  ASSERT_TRUE(RunUntil([&] { return r.exit.has_value(); }));
  close(leaky);
  EXPECT_EQ(r.out, "fds=0,1,2,3,5\n");
}

// The descriptors open in this process.
size_t OpenFds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

// A rank that writes faster than it is read gets a buffer (64 KiB) a loop
// turn, not the 32 that libuv would read in one go: the supervisor's other
// work has its turn between.
TEST_P(LauncherTest, ALoudRankIsReadABufferATurn) {
  size_t got = 0, seen = 0, most = 0, turns = 0;
  std::optional<ExitStatus> exit;
  RankCallbacks cb;
  cb.on_output = [&got](Stream, std::string_view d) {
    got += d.size();
    std::this_thread::sleep_for(2ms);  // slower than the rank writes
  };
  cb.on_exit = [&exit](ExitStatus s) { exit = s; };
  ASSERT_TRUE(launcher_->Spawn(Request({"print:400000,exit:0"}), std::move(cb)).ok());
  ASSERT_TRUE(RunUntil([&] {
    // What the turn just ended read; the turn of the exit reads what the
    // pipe still holds, as it must.
    if (!exit) most = std::max(most, got - seen);
    seen = got;
    ++turns;
    return exit.has_value();
  }));
  EXPECT_GT(got, 4u << 20) << "not the whole output";
  EXPECT_LE(most, 64u << 10) << "read in one turn, of " << got << " in " << turns << " turns";
}

// A job's output, all its ranks' together, is read at most the launcher's
// rate over time: here 1 MiB a second, of two ranks that write 1.5 MiB
// each at once. Every line arrives.
TEST_P(LauncherTest, AJobsRanksAreReadNoFasterThanTheRateTogether) {
  constexpr double kRate = 1 << 20;
  launcher_->set_output_bytes_per_second(kRate);
  Rank r[2];
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 2; ++i) Spawn(r[i], {"print:75000,exit:0"}, {}, i);
  double most_ahead = -kRate;  // bytes read past what the rate allowed so far
  ASSERT_TRUE(RunUntil(
      [&] {
        const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - start;
        // A second's worth at once, then the rate; the turn of an exit
        // reads what that rank's pipe holds.
        if (!r[0].exit && !r[1].exit) {
          const double read = static_cast<double>(r[0].out.size() + r[1].out.size());
          most_ahead = std::max(most_ahead, read - kRate * (1 + spent.count()));
        }
        return r[0].exit && r[1].exit;
      },
      30s));
  for (const Rank& rank : r) EXPECT_EQ(std::count(rank.out.begin(), rank.out.end(), '\n'), 75000);
  EXPECT_LE(most_ahead, 2 * (64 << 10)) << "read faster than " << kRate << " bytes a second";
}

// An escapee holds the rank's stdout and writes on, faster than it is
// read: the rank's exit is told once what the pipe held is read, not once
// the escapee stops (it writes 64 MiB here; it could write for ever).
TEST_P(LauncherTest, AnEscapeeWritingOnDoesNotHoldTheRanksExit) {
  const PublicDir dir;
  const std::string pidfile = dir.path() + "/pids";
  size_t got = 0, at_exit = 0;
  std::optional<ExitStatus> exit;
  RankCallbacks cb;
  cb.on_output = [&got](Stream, std::string_view d) {
    got += d.size();
    std::this_thread::sleep_for(2ms);
  };
  cb.on_exit = [&](ExitStatus s) {
    exit = s;
    at_exit = got;
  };
  ASSERT_TRUE(
      launcher_->Spawn(Request({"pidfile:" + pidfile + ",escape-spew:64,exit:0"}), std::move(cb))
          .ok());
  const bool ended = RunUntil([&] { return exit.has_value(); }, 60s);
  std::ifstream pids(pidfile);
  for (pid_t pid; pids >> pid;) kill(pid, SIGKILL);  // the escapee, if it writes on
  ASSERT_TRUE(ended);
  EXPECT_EQ(exit->exit_code, 0);
  EXPECT_LT(at_exit, 16u << 20) << "the escapee's output held the rank's exit";
}

// Hundreds of short ranks, a third exiting, a third SIGKILLed at once (as
// lt-exec starts), a third SIGKILLed while they run: each takes its
// handles and fds with it, so the loop and the fd table end as they began.
TEST_P(LauncherTest, HundredsOfRanksLeaveNoFdAndNoHandle) {
  // A first rank, for the fd libuv keeps per loop from its first stream on
  // (a reserve for EMFILE).
  Rank first_rank;
  Spawn(first_rank, {"exit:0"});
  ASSERT_TRUE(RunUntil([&] { return first_rank.exit.has_value(); }));
  const size_t handles = LoopHandles(loop_->get());
  const size_t fds = OpenFds();
  constexpr int kRanks = 300, kBatch = 25;
  for (int first = 0; first < kRanks; first += kBatch) {
    std::vector<Rank> ranks(kBatch);  // the callbacks keep pointers into it
    for (int i = 0; i < kBatch; ++i) {
      const int rank = first + i;
      if (rank % 3 == 0) {
        Spawn(ranks[i], {"print:2,exit:3"}, {}, rank);
      } else {
        Spawn(ranks[i], {"line:ready,hang"}, {}, rank);
        if (rank % 3 == 1) launcher_->SignalRank("t", rank, SIGKILL);
      }
    }
    ASSERT_TRUE(RunUntil([&] {
      for (int i = 0; i < kBatch; ++i) {
        if ((first + i) % 3 == 2 && !ranks[i].exit && ranks[i].control != "ready\n") return false;
      }
      return true;
    }));
    for (int i = 0; i < kBatch; ++i) {
      if ((first + i) % 3 == 2) launcher_->SignalRank("t", first + i, SIGKILL);
    }
    ASSERT_TRUE(RunUntil([&] {
      return std::all_of(ranks.begin(), ranks.end(),
                         [](const Rank& r) { return r.exit.has_value(); });
    }));
    for (int i = 0; i < kBatch; ++i) {
      SCOPED_TRACE(first + i);
      if ((first + i) % 3 == 0) {
        EXPECT_EQ(ranks[i].exit->exit_code, 3);
        EXPECT_EQ(ranks[i].out, "line 0 of 2\nline 1 of 2\n");
      } else {
        EXPECT_EQ(ranks[i].exit->term_signal, SIGKILL);
      }
    }
  }
  EXPECT_EQ(launcher_->live_children(), 0u);
  EXPECT_EQ(LoopHandles(loop_->get()), handles);
  EXPECT_EQ(OpenFds(), fds);
}

INSTANTIATE_TEST_SUITE_P(Starts, LauncherTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "child" : "lt_exec";
                         });

}  // namespace
}  // namespace ltd::test
