// Automatic heartbeats without processes: which programs get ltd's module,
// the environment lt-exec execs with, the protocol's `auto` lines, and the
// job-level verdict through the job manager with fakes and a fake clock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "auto_instrument.h"
#include "fakes.h"
#include "hang_report.h"
#include "heartbeat.h"
#include "job_manager.h"
#include "local_host.h"
#include "manager_fixture.h"
#include "rank_start.h"

namespace ltd::test {
namespace {

TEST(AutoInstrument, PythonShellsAndWrappersMayRunPythonOthersDoNot) {
  EXPECT_TRUE(MayRunPython("/usr/bin/python3", ""));
  EXPECT_TRUE(MayRunPython("/home/u/venv/bin/python", ""));
  EXPECT_TRUE(MayRunPython("/usr/bin/python3.11", ""));
  EXPECT_TRUE(MayRunPython("/bin/bash", "\177ELF"));
  EXPECT_TRUE(MayRunPython("/usr/bin/env", ""));
  EXPECT_TRUE(MayRunPython("./train.py", "#!/usr/bin/env python3\nimport torch\n"));
  EXPECT_TRUE(MayRunPython("./train.py", "#!/usr/bin/env -S python3 -u\n"));
  EXPECT_TRUE(MayRunPython("./train", "#! /opt/conda/bin/python3.10 -O\n"));
  EXPECT_TRUE(MayRunPython("./run.sh", "#!/bin/sh\npython3 train.py\n"));

  EXPECT_FALSE(MayRunPython("/usr/bin/printenv", "\177ELF"));
  EXPECT_FALSE(MayRunPython("./train", "\177ELF\002\001"));
  EXPECT_FALSE(MayRunPython("./pythonic-tool", ""));
  EXPECT_FALSE(MayRunPython("./run.pl", "#!/usr/bin/perl\n"));
  EXPECT_FALSE(MayRunPython("./run", "#!/usr/bin/env perl\n"));
  EXPECT_FALSE(MayRunPython("./empty", ""));
}

TEST(AutoInstrument, LtdAsksAndLtExecGrantsOrDrops) {
  std::vector<std::string> env = {"PATH=/bin", "LT_AUTO_HEARTBEAT=used",
                                  "LT_AUTO_HEARTBEAT_DIR=/home/mallory/evil"};
  RequestAutoHeartbeat(env, "", Millis(3000));
  EXPECT_EQ(env, std::vector<std::string>{"PATH=/bin"}) << "a client's own values never pass";
  RequestAutoHeartbeat(env, "/usr/share/ltd/python/autoload", Millis(3000));
  EXPECT_TRUE(HasAutoHeartbeatRequest(env));

  env.push_back("PYTHONPATH=/mine");
  const std::vector<std::string> python = ApplyAutoHeartbeat(env, true);
  EXPECT_EQ(python, (std::vector<std::string>{"PATH=/bin", "LT_AUTO_HEARTBEAT=300",
                                              "PYTHONPATH=/usr/share/ltd/python/autoload:/mine"}));
  const std::vector<std::string> other = ApplyAutoHeartbeat(env, false);
  EXPECT_EQ(other, (std::vector<std::string>{"PATH=/bin", "PYTHONPATH=/mine"}));

  env.pop_back();
  env.push_back("PYTHONPATH=");  // empty: must not become "dir:", the cwd
  EXPECT_EQ(ApplyAutoHeartbeat(env, true).back(), "PYTHONPATH=/usr/share/ltd/python/autoload");
}

TEST(AutoInstrument, CheckIntervalIsATenthOfTheTimeoutWithinBounds) {
  EXPECT_EQ(AutoCheckInterval(Millis(3000)), Millis(300));
  EXPECT_EQ(AutoCheckInterval(Millis(5 * 60 * 1000)), Millis(1000));
  EXPECT_EQ(AutoCheckInterval(Millis(50)), Millis(20));
}

TEST(AutoInstrument, TheModuleDirectoryMustHoldTheModule) {
  EXPECT_NE(AutoHeartbeatDirProblem("relative/dir"), "");
  EXPECT_NE(AutoHeartbeatDirProblem("/nonexistent-ltd-dir"), "");
}

TEST(AutoHeartbeatLines, ParseAndRejectGarbage) {
  auto on = ParseHeartbeatLine("auto on");
  ASSERT_TRUE(on);
  EXPECT_EQ(on->kind, HeartbeatMessage::Kind::kAutoOn);
  auto step = ParseHeartbeatLine("auto step 42\r");
  ASSERT_TRUE(step);
  EXPECT_EQ(step->kind, HeartbeatMessage::Kind::kAutoStep);
  EXPECT_EQ(step->step, 42);
  EXPECT_EQ(ParseHeartbeatLine("auto live")->kind, HeartbeatMessage::Kind::kAutoLive);
  auto stack = ParseHeartbeatLine(
      "auto stack File \"a.py\", line 3 in f\tFile \"b.py\", line 9 in <module>");
  ASSERT_TRUE(stack);
  EXPECT_EQ(stack->kind, HeartbeatMessage::Kind::kAutoStack);
  for (const char* bad : {"auto", "auto on now", "auto step", "auto step -1", "auto step 1x",
                          "auto live 3", "auto late 1", "auto stack a\x01", "auto what"}) {
    EXPECT_FALSE(ParseHeartbeatLine(bad)) << bad;
  }
}

constexpr char kInSleep[] =
    "File \"train.py\", line 30 in stall\tFile \"train.py\", line 80 in <module>";
constexpr char kInAllreduce[] =
    "File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1536 in "
    "all_reduce\tFile \"train.py\", line 70 in <module>";
constexpr char kInBarrier[] =
    "File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 3145 in "
    "barrier\tFile \"train.py\", line 72 in <module>";

TEST(AutoHeartbeatStacks, ReadLikeFaulthandlerAndTellMismatchFromDeadlock) {
  HangReport report;
  for (int r = 0; r < 3; ++r) {
    HangReportRank hr;
    hr.rank = r;
    hr.stalled = true;
    hr.stack = AutoStackText(r == 0 ? kInAllreduce : kInBarrier);
    report.ranks.push_back(hr);
  }
  EXPECT_EQ(AttributeHang(report), -1);  // nobody stopped outside a collective
  EXPECT_EQ(DescribeCollectiveWaits(report),
            "every rank waits in a collective and they disagree (a mismatch): rank 0 in "
            "all_reduce (distributed_c10d.py:1536), rank 1 in barrier (distributed_c10d.py:3145), "
            "rank 2 in barrier (distributed_c10d.py:3145)");
  report.ranks[0].stack = AutoStackText(kInBarrier);
  AttributeHang(report);
  EXPECT_EQ(DescribeCollectiveWaits(report),
            "every rank waits in the same collective, barrier (distributed_c10d.py:3145), for a "
            "peer that never joins it (a deadlock)");
  report.ranks[1].stack = AutoStackText(kInSleep);
  EXPECT_EQ(AttributeHang(report), 1);
  EXPECT_EQ(DescribeCollectiveWaits(report), "");
}

class AutoHeartbeatManager : public ManagerFixture {
 protected:
  AutoHeartbeatManager() : ManagerFixture("auto") {
    ManagerConfig config;
    config.placement.slots = 8;
    RunnerConfig runner;
    runner.stack_budget = Millis(3000);
    runner.auto_heartbeat_dir = "/usr/share/ltd/python/autoload";
    runner.auto_heartbeat_timeout = Millis(60'000);
    Make(config, runner, &sampler_);
  }
  // The manager goes before the sampler it was given.
  ~AutoHeartbeatManager() override { manager_.reset(); }

  std::string Submit(int devices, Millis timeout, bool auto_heartbeat = true) {
    JobSpec s;
    s.devices = devices;
    s.argv = {"python3", "train.py"};
    s.cwd = "/";
    s.uid = getuid();
    s.gid = getgid();
    s.heartbeat_timeout = timeout;
    s.auto_heartbeat = auto_heartbeat;
    auto id = manager_->Submit(std::move(s), "alice");
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : "";
  }

  FakeSampler sampler_;
};

TEST_F(AutoHeartbeatManager, RanksAreAskedForItUnlessTheJobOptsOut) {
  const std::string on = Submit(1, Millis(0));
  EXPECT_EQ(launcher_.Env(on, 0, "LT_AUTO_HEARTBEAT"), "1000");  // 60s -> 1s checks
  EXPECT_EQ(launcher_.Env(on, 0, "LT_AUTO_HEARTBEAT_DIR"), "/usr/share/ltd/python/autoload");
  const std::string off = Submit(1, Millis(0), false);
  EXPECT_EQ(launcher_.Env(off, 0, "LT_AUTO_HEARTBEAT"), "<unset>");
  EXPECT_EQ(launcher_.Env(off, 0, "LT_AUTO_HEARTBEAT_DIR"), "<unset>");
}

TEST_F(AutoHeartbeatManager, NoVerdictWhileAnyRankProgressesThenTheStalledRankIsBlamed) {
  const std::string id = Submit(3, Millis(1000));
  for (int r = 0; r < 3; ++r) launcher_.Control(id, r, "auto on\n");
  EXPECT_EQ(Get(id).heartbeat_mode, HeartbeatMode::kAutomatic);
  EXPECT_EQ(Get(id).hang_timeout, Millis(1000));
  // Rank 0 works for three timeouts (a slow checkpoint); 1 and 2 wait.
  for (int i = 0; i < 30; ++i) {
    launcher_.Control(id, 0, "auto live\n");
    clock_.Advance(Millis(100));
  }
  launcher_.Control(id, 0, "auto step 7\n");
  EXPECT_FALSE(Get(id).root_cause);
  EXPECT_EQ(Get(id).ranks[0].last_step, 7);
  // Now nobody moves: rank 1 sleeps, the others wait for it in collectives.
  launcher_.Control(id, 0, std::string("auto stack ") + kInAllreduce + "\n");
  launcher_.Control(id, 1, std::string("auto stack ") + kInSleep + "\n");
  launcher_.Control(id, 2, std::string("auto stack ") + kInAllreduce + "\n");
  clock_.Advance(Millis(1000));
  EXPECT_FALSE(Get(id).root_cause) << "a deadline passes one tick after it";
  clock_.Advance(Millis(1));
  const Job& job = Get(id);
  ASSERT_TRUE(job.root_cause);
  EXPECT_EQ(job.root_cause->reason, CauseReason::kHang);
  EXPECT_EQ(job.root_cause->rank, 1);
  EXPECT_EQ(job.root_cause->message,
            "no rank made progress for 1s (automatic heartbeats); the stacks show rank(s) 1 "
            "stalled outside a collective while the others wait in one");
  ASSERT_TRUE(job.hang_report);
  EXPECT_NE(job.hang_report->ranks[1].stack.find("line 30 in stall"), std::string::npos);
  EXPECT_TRUE(launcher_.process_signals.empty()) << "the module's stacks need no SIGABRT";
  EXPECT_TRUE(sampler_.requested.empty()) << "nor gdb";
  launcher_.ExitSignalled(id);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get(id).exit_code, 124);
}

TEST_F(AutoHeartbeatManager, ARanksOwnHeartbeatsTakePrecedence) {
  const std::string id = Submit(2, Millis(0));
  launcher_.Control(id, 0, "auto on\n");
  launcher_.Control(id, 1, "auto on\nhb 3\n");
  EXPECT_EQ(Get(id).heartbeat_mode, HeartbeatMode::kExplicit);
  launcher_.Control(id, 1, "auto step 99\n");
  EXPECT_EQ(Get(id).ranks[1].last_step, 3) << "auto lines of an explicit rank are ignored";
  // Rank 0 is still watched automatically (ltd's 60s here); rank 1's
  // beats are progress for it.
  for (int i = 0; i < 10; ++i) {
    launcher_.Control(id, 1, "hb 4\n");
    clock_.Advance(Millis(60'000));
  }
  EXPECT_FALSE(Get(id).root_cause);
  clock_.Advance(Millis(60'001));
  ASSERT_TRUE(Get(id).root_cause);
  EXPECT_EQ(Get(id).root_cause->rank, 0);
}

// The slow-rank case on a busy machine: rank 0 still imports torch (no
// `auto on` yet) while the others, watched already, wait in the rendezvous
// or a barrier for it. A rank not watched yet is no evidence: no verdict
// until it is watched and nobody progresses for the timeout.
TEST_F(AutoHeartbeatManager, ARankNotWatchedYetIsNoEvidence) {
  const std::string id = Submit(4, Millis(3000));
  for (int r = 1; r < 4; ++r) {
    launcher_.Control(id, r, "auto on\n");
    launcher_.Control(id, r, std::string("auto stack ") + kInBarrier + "\n");
  }
  clock_.Advance(Millis(10'000));  // three timeouts: rank 0 is still importing torch
  EXPECT_FALSE(Get(id).root_cause) << Get(id).root_cause->message;
  // Rank 0 is watched, but waits in the rendezvous: its module reports
  // nothing until it is through.
  launcher_.Control(id, 0, "auto on\n");
  clock_.Advance(Millis(10'000));
  EXPECT_FALSE(Get(id).root_cause) << Get(id).root_cause->message;
  for (int i = 0; i < 90; ++i) {  // rank 0 busy 9s in Python; the others wait
    launcher_.Control(id, 0, "auto live\n");
    clock_.Advance(Millis(100));
  }
  EXPECT_FALSE(Get(id).root_cause);
  clock_.Advance(Millis(3001));  // now nobody moves for the timeout
  ASSERT_TRUE(Get(id).root_cause);
  EXPECT_EQ(Get(id).root_cause->reason, CauseReason::kHang);
  EXPECT_EQ(Get(id).root_cause->rank, -1) << "four ranks stopped together: no rank singled out";
}

// A starved machine: the module of rank 0 sees its frame stand still (its
// samples come late, or catch the loop at the same instruction), but the
// kernel says its main thread runs: busy, not hung. CPU that ranks spend
// waiting in a collective (a spinning wait) is no progress; once rank 0
// sleeps, the verdict comes within the timeout plus one probe period.
TEST_F(AutoHeartbeatManager, ARankWhoseMainThreadRunsIsBusyNotHung) {
  const std::string id = Submit(3, Millis(1000));
  for (int r = 0; r < 3; ++r) {
    launcher_.Find(id, r).cpu_ticks = 100;
    launcher_.Control(id, r, "auto on\nauto live\n");
  }
  constexpr char kInLoop[] =
      "File \"train.py\", line 40 in slow_checkpoint\tFile \"train.py\", line 90 in <module>";
  launcher_.Control(id, 0, std::string("auto stack ") + kInLoop + "\n");
  launcher_.Control(id, 1, std::string("auto stack ") + kInBarrier + "\n");
  launcher_.Control(id, 2, std::string("auto stack ") + kInBarrier + "\n");
  auto spin = [&](int rank) { *launcher_.Find(id, rank).cpu_ticks += 1; };
  for (int i = 0; i < 50; ++i) {  // 5 timeouts: rank 0 computes, 1 and 2 spin in the barrier
    for (int r = 0; r < 3; ++r) spin(r);
    clock_.Advance(Millis(100));
  }
  ASSERT_FALSE(Get(id).root_cause) << Get(id).root_cause->message;
  // Rank 0 now sleeps outside any collective; the others still spin.
  launcher_.Control(id, 0, std::string("auto stack ") + kInSleep + "\n");
  const Millis stopped = clock_.Monotonic();
  while (!Get(id).root_cause && clock_.Monotonic() - stopped < Millis(5000)) {
    spin(1);
    spin(2);
    clock_.Advance(Millis(10));
  }
  ASSERT_TRUE(Get(id).root_cause);
  const Millis took = clock_.Monotonic() - stopped;
  EXPECT_GE(took, Millis(1000)) << "a verdict before the timeout";
  EXPECT_LE(took, Millis(1000 + 250 + 20)) << "the timeout plus a probe period (a quarter of it)";
  EXPECT_EQ(Get(id).root_cause->rank, 0) << Get(id).root_cause->message;
}

// A rank that never gets watched is judged by its own start-up deadline.
TEST_F(AutoHeartbeatManager, StartUpHasItsOwnDeadline) {
  JobSpec s;
  s.devices = 2;
  s.argv = {"python3", "train.py"};
  s.cwd = "/";
  s.uid = getuid();
  s.gid = getgid();
  s.heartbeat_timeout = Millis(3000);
  s.startup_timeout = Millis(20'000);
  const std::string id = *manager_->Submit(std::move(s), "alice");
  launcher_.Control(id, 1, "auto on\nauto live\n");
  clock_.Advance(Millis(19'999));
  EXPECT_FALSE(Get(id).root_cause)
      << "the watched rank passed its start-up: no deadline of its own";
  clock_.Advance(Millis(2));
  ASSERT_TRUE(Get(id).root_cause);
  EXPECT_EQ(Get(id).root_cause->reason, CauseReason::kStartupTimeout);
  EXPECT_EQ(Get(id).root_cause->rank, 0);
}

// The module's own checks ran late (it was not scheduled): that interval
// is no evidence, so the clock of "no progress" starts again.
TEST_F(AutoHeartbeatManager, ALateCheckIsNoEvidence) {
  const std::string id = Submit(2, Millis(3000));
  launcher_.Control(id, 0, "auto on\nauto live\n");
  launcher_.Control(id, 1, "auto on\nauto live\n");
  clock_.Advance(Millis(2500));
  launcher_.Control(id, 0, "auto late\n");
  clock_.Advance(Millis(2500));
  EXPECT_FALSE(Get(id).root_cause);
  clock_.Advance(Millis(501));
  ASSERT_TRUE(Get(id).root_cause);
  EXPECT_EQ(Get(id).root_cause->reason, CauseReason::kHang);
}

}  // namespace
}  // namespace ltd::test
