// Heartbeats end to end: the watchdog, hang reports with stacks, and the
// worker runtimes (C, C++, Python) against a real ltd, up to real
// torch.distributed and LibTorch DDP jobs.
#include <algorithm>
#include <filesystem>

#include "e2e_fixture.h"

namespace ltd::test {
namespace {

const std::string kChild = TestChildPath();
const std::string kRanks = LT_TEST_RANKS_DIR;
const std::string kPython = "/usr/bin/python3";

std::vector<std::string> PythonEnv() { return {"PYTHONPATH=" LT_PYTHON_DIR}; }

bool HasTorch() {
  static const bool has =
      RunCommand({kPython, "-c", "import torch.distributed"}, {}, 60s).exit_code == 0;
  return has;
}

class Heartbeats : public E2E {};

// gdb's stacks are asserted on: a loaded machine may take longer than the
// default budget to give them, and the budget is only a ceiling.
class HeartbeatsWithStacks : public E2E {
 protected:
  std::vector<std::string> DaemonArgs() override { return {"--stack-budget", "30s"}; }
};

TEST_F(HeartbeatsWithStacks, RankThatStopsBeatingIsAHang) {
  CmdResult r = d_.Ctl({"submit", "--devices", "3", "--heartbeat-timeout", "500ms", "--", kChild,
                        "--rank", "2", "beat:3:20,hang", "beat:1000000:20"},
                       60s);
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_NE(r.err.find("rank 2 hung"), std::string::npos) << r.err;
  // The attached client says the report in short, and where the rest is.
  EXPECT_NE(r.err.find("ltctl: hang report: rank 2 stalled first"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ltctl: the whole report: `ltctl show 1`"), std::string::npos) << r.err;
  if (std::filesystem::exists("/usr/bin/gdb")) {
    EXPECT_NE(r.err.find("ltctl:   top of its stack: "), std::string::npos) << r.err;
  }
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["root_cause"]["reason"], "hang");
  EXPECT_EQ(job["root_cause"]["rank"], 2);
  const auto& report = job["hang_report"];
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["stalled_ranks"], nlohmann::json::array({2}));
  EXPECT_EQ(report["ranks"][2]["last_step"], 2);
  // Rank 2 lags far behind; the beating ranks are within jitter of each other.
  const auto& stragglers = report["straggler_ranks"];
  EXPECT_NE(std::find(stragglers.begin(), stragglers.end(), 2), stragglers.end()) << stragglers;
  EXPECT_GT(report["ranks"][0]["last_step"].get<int>(), 2);
  // Where the stall is: gdb's view of the native rank, when gdb is here.
  if (std::filesystem::exists("/usr/bin/gdb")) {
    EXPECT_NE(report["ranks"][2]["stack"].get<std::string>().find("pause"), std::string::npos)
        << report["ranks"][2]["stack"];
  }
}

TEST_F(Heartbeats, RankThatNeverBeatsHitsTheStartupTimeout) {
  CmdResult r = d_.Ctl({"submit", "--devices", "2", "--startup-timeout", "400ms", "--", kChild,
                        "--rank", "0", "beat:1:0,hang", "hang"});
  EXPECT_EQ(r.exit_code, 124) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["root_cause"]["reason"], "startup_timeout");
  EXPECT_EQ(job["root_cause"]["rank"], 1);
}

TEST_F(Heartbeats, TimeoutZeroTurnsTheWatchdogOff) {
  const std::string id = SubmitDetached({"--devices", "1", "--heartbeat-timeout", "200ms", "--",
                                         kChild, "beat:1:0,line:timeout 0,sleep:800,exit:0"});
  nlohmann::json job = d_.WaitEnded(id);
  EXPECT_EQ(job["state"], "SUCCEEDED") << job.dump();
}

TEST_F(Heartbeats, GarbageOnTheHeartbeatFdHarmsNothing) {
  const std::string id =
      SubmitDetached({"--devices", "1", "--heartbeat-timeout", "2s", "--", "/bin/sh", "-c",
                      "head -c 200000 /dev/urandom >&3; echo >&3; echo hb 9 >&3; exit 0"});
  nlohmann::json job = d_.WaitEnded(id);
  EXPECT_EQ(job["state"], "SUCCEEDED");
  EXPECT_EQ(job["ranks"][0]["last_step"], 9);
  EXPECT_EQ(d_.Ctl({"ps"}).exit_code, 0);  // ltd is fine
}

TEST_F(Heartbeats, ShellRankBeatsThroughFd3) {
  const std::string id = SubmitDetached(
      {"--devices", "2", "--", "/bin/sh", "-c", "echo hb 7 >&$LT_HEARTBEAT_FD; sleep 0.3"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(id)["ranks"][1]["last_step"] == 7; }, 10s));
  EXPECT_EQ(d_.WaitEnded(id)["state"], "SUCCEEDED");
}

TEST_F(Heartbeats, CRuntimeReportsStepsAndItsError) {
  CmdResult r = d_.Ctl({"submit", "--devices", "2", "--heartbeat-timeout", "5s", "--", LT_C_RANK});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["root_cause"]["message"], "c_rank: loss is NaN at step 4");
  // The rank that failed first beat every step; the other may have been
  // torn down a step short of it.
  const int failed = job["root_cause"]["rank"].get<int>();
  EXPECT_EQ(job["ranks"][failed]["last_step"], 4) << job.dump(1);
}

TEST_F(Heartbeats, CppRuntimeReportsStepsAndItsError) {
  CmdResult r = d_.Ctl({"submit", "--devices", "1", "--", LT_CPP_RANK});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["root_cause"]["message"],
            "cpp_rank: checkpoint write failed: No space left on device");
  EXPECT_EQ(job["ranks"][0]["last_step"], 6);
}

TEST_F(Heartbeats, PythonRankStalledInAFunctionIsNamedInTheReport) {
  CmdResult r = d_.Ctl({"submit", "--devices", "2", "--heartbeat-timeout", "1s", "--", kPython,
                        kRanks + "/stall.py"},
                       60s, PythonEnv());
  EXPECT_EQ(r.exit_code, 124) << r.err;
  nlohmann::json job = d_.Show("1");
  const auto& report = job["hang_report"];
  ASSERT_TRUE(report.is_object()) << job.dump();
  // Both ranks stopped beating together, in the same function, outside any
  // collective: nothing singles one out, and no rank is blamed.
  EXPECT_TRUE(job["root_cause"]["rank"].is_null()) << job["root_cause"].dump(1);
  EXPECT_NE(job["root_cause"]["message"].get<std::string>().find("the stacks single out no rank"),
            std::string::npos)
      << job["root_cause"].dump(1);
  for (int rank : {0, 1}) {
    const std::string stack = report["ranks"][rank]["stack"];
    EXPECT_NE(stack.find("stuck_in_data_loader"), std::string::npos) << stack;
    EXPECT_NE(stack.find("stall.py"), std::string::npos) << stack;
    EXPECT_EQ(report["ranks"][rank]["stack_status"], "taken");
    EXPECT_EQ(report["ranks"][rank]["stack_note"], "faulthandler");
  }
  // The traceback went to the hang report; the rank's output says so in
  // ltd's words, and holds nothing that reads like the program's own crash.
  CmdResult logs = d_.Ctl({"logs", "1"});
  EXPECT_EQ(logs.out.find("Fatal Python error"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("[1] ltd: stack of rank 1 taken for the hang report"), std::string::npos)
      << logs.out;
}

// No --heartbeat-timeout in these jobs: the rank's own "timeout DUR" line
// arms its watchdog (docs/protocol.md, "Heartbeats").
TEST_F(Heartbeats, PythonSetTimeoutArmsTheWatchdogWithoutAJobTimeout) {
  CmdResult r = d_.Ctl({"submit", "--devices", "2", "--", kPython, kRanks + "/timeout_hang.py",
                        "--timeout", "2", "--hang-rank", "1", "--beats", "3"},
                       60s, PythonEnv());
  EXPECT_EQ(r.exit_code, 124) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["root_cause"]["reason"], "hang") << job.dump();
  EXPECT_EQ(job["root_cause"]["rank"], 1) << job.dump();
  EXPECT_EQ(job["root_cause"]["message"].get<std::string>().rfind("no heartbeat for 2s", 0), 0u)
      << job["root_cause"];
  EXPECT_EQ(job["ranks"][1]["last_step"], 2);
}

TEST_F(Heartbeats, PythonSubMillisecondTimeoutIsOneMillisecondNotOff) {
  CmdResult r = d_.Ctl({"submit", "--devices", "1", "--", kPython, kRanks + "/timeout_hang.py",
                        "--timeout", "0.0004", "--beats", "1"},
                       60s, PythonEnv());
  EXPECT_EQ(r.exit_code, 124) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["root_cause"]["reason"], "hang") << job.dump();
  EXPECT_EQ(job["root_cause"]["rank"], 0);
  EXPECT_EQ(job["root_cause"]["message"].get<std::string>().rfind("no heartbeat for 1ms", 0), 0u)
      << job["root_cause"];
}

TEST_F(Heartbeats, LightningCallbackArmsTheWatchdogWithoutAJobTimeout) {
  CmdResult r = d_.Ctl({"submit", "--devices", "2", "--", kPython, kRanks + "/lightning_hang.py",
                        "--timeout", "2", "--hang-rank", "1", "--hang-batch", "3"},
                       60s, PythonEnv());
  EXPECT_EQ(r.exit_code, 124) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["root_cause"]["reason"], "hang") << job.dump();
  EXPECT_EQ(job["root_cause"]["rank"], 1) << job.dump();
  const auto& report = job["hang_report"];
  ASSERT_TRUE(report.is_object()) << job.dump();
  EXPECT_EQ(report["stalled_ranks"], nlohmann::json::array({1}));
  EXPECT_EQ(report["ranks"][1]["last_step"], 3);
  const std::string stack = report["ranks"][1]["stack"];
  EXPECT_NE(stack.find("training_step_that_never_returns"), std::string::npos) << stack;
}

TEST_F(Heartbeats, TorchDistributedDdpJobWithAHungRank) {
  if (!HasTorch()) GTEST_SKIP() << "python3-torch is not installed";
  // Clean first: the job trains and ends.
  CmdResult ok = d_.Ctl({"submit", "--devices", "3", "--heartbeat-timeout", "20s", "--", kPython,
                         kRanks + "/ddp_hang.py", "--steps", "20"},
                        120s, PythonEnv());
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("[0] trained 20 steps on 3 ranks"), std::string::npos) << ok.out;

  CmdResult r =
      d_.Ctl({"submit", "--devices", "3", "--heartbeat-timeout", "3s", "--", kPython,
              kRanks + "/ddp_hang.py", "--steps", "1000", "--hang-rank", "1", "--hang-step", "5"},
             120s, PythonEnv());
  EXPECT_EQ(r.exit_code, 124) << r.err;
  nlohmann::json job = d_.Show("2");
  EXPECT_EQ(job["root_cause"]["reason"], "hang");
  // Every rank stops beating; the stacks tell that ranks 0 and 2 wait in
  // DDP's allreduce for rank 1.
  EXPECT_EQ(job["root_cause"]["rank"], 1) << job["hang_report"].dump(1);
  const auto& report = job["hang_report"];
  EXPECT_EQ(report["stalled_ranks"], nlohmann::json::array({1}));
  EXPECT_NE(report["ranks"][1]["stack"].get<std::string>().find("rank_stalls_outside_collective"),
            std::string::npos);
  EXPECT_TRUE(report["ranks"][0]["in_collective"].get<bool>());
  EXPECT_EQ(report["ranks"][1]["last_step"], 4);
}

TEST_F(Heartbeats, StoppedDdpRankIsNamedAndTheJobEndsWithoutWaitingForTheGrace) {
  if (!HasTorch()) GTEST_SKIP() << "python3-torch is not installed";
  // The grace is far longer than the deadline below: the job can end in
  // time only if the stopped rank is continued to handle its SIGTERM, and
  // no stack budget is spent waiting on a faulthandler it cannot run.
  CmdResult r = d_.Ctl(
      {"submit", "--devices", "4", "--heartbeat-timeout", "3s", "--grace", "10m", "--", kPython,
       kRanks + "/ddp_hang.py", "--steps", "1000", "--stop-rank", "1", "--hang-step", "5"},
      120s, PythonEnv());
  EXPECT_EQ(r.exit_code, 124) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["root_cause"]["reason"], "hang");
  EXPECT_EQ(job["root_cause"]["rank"], 1) << job.dump(1);
  EXPECT_EQ(job["root_cause"]["message"], "rank 1 is stopped (SIGSTOP)");
  const auto& report = job["hang_report"];
  EXPECT_EQ(report["ranks"][1]["process_state"], "stopped (SIGSTOP)");
  EXPECT_EQ(report["stalled_ranks"], nlohmann::json::array({1}));
  EXPECT_EQ(job["ranks"][1]["signal"], SIGTERM) << job.dump(1);
  EXPECT_TRUE(report["ranks"][0]["in_collective"].get<bool>()) << report.dump(1);
}

#ifdef LT_TRAIN
TEST_F(Heartbeats, LibTorchTrainerCleanCrashAndHang) {
  CmdResult clean = d_.Ctl(
      {"submit", "--devices", "4", "--heartbeat-timeout", "30s", "--", LT_TRAIN, "--steps", "60"},
      120s);
  EXPECT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_NE(clean.out.find("params in sync"), std::string::npos) << clean.out;
  EXPECT_EQ(d_.Show("1")["ranks"][3]["last_step"], 60);

  CmdResult crash =
      d_.Ctl({"submit", "--devices", "4", "--heartbeat-timeout", "30s", "--", LT_TRAIN, "--steps",
              "100000", "--crash-rank", "2", "--crash-step", "5"},
             120s);
  EXPECT_EQ(crash.exit_code, 3) << crash.err;
  nlohmann::json c = d_.Show("2");
  EXPECT_EQ(c["root_cause"]["rank"], 2);
  EXPECT_EQ(c["root_cause"]["message"], "injected crash at step 5");

  CmdResult hang = d_.Ctl({"submit", "--devices", "4", "--heartbeat-timeout", "3s", "--", LT_TRAIN,
                           "--steps", "100000", "--hang-rank", "1", "--hang-step", "5"},
                          120s);
  EXPECT_EQ(hang.exit_code, 124) << hang.err;
  nlohmann::json h = d_.Show("3");
  EXPECT_EQ(h["root_cause"]["reason"], "hang");
  const auto& report = h["hang_report"];
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["ranks"][1]["last_step"], 4);
  // gdb needs about a second of CPU per rank; on a loaded 2-core machine
  // some stacks may miss the budget. Any stack of rank 1 shows the stall,
  // and once every stack is in, the verdict is rank 1.
  const std::string stack1 = report["ranks"][1]["stack"];
  if (!stack1.empty()) {
    EXPECT_NE(stack1.find("injected_hang"), std::string::npos) << stack1;
  }
  bool all_stacks = true;
  for (const auto& rank : report["ranks"])
    all_stacks = all_stacks && rank.value("stack_status", "") == "taken";
  if (all_stacks) {
    EXPECT_EQ(h["root_cause"]["rank"], 1);
  }
}

// scripts/demo.sh's hang, with the daemon's default stack budget: rank 1
// stops at step 30 and the others wait for it in the allreduce, all within
// milliseconds. The blame is rank 1 (its stack shows it outside the
// collective) or no rank (some stack was missing); never another rank.
TEST_F(Heartbeats, TheDemosHangBlamesRankOneOrNoRankNeverAnother) {
  CmdResult hang = d_.Ctl(
      {"submit", "--devices", "4", "--heartbeat-timeout", "3s", "--", LT_TRAIN, "--steps", "100000",
       "--step-ms", "5", "--print-every", "1000", "--hang-rank", "1", "--hang-step", "30"},
      120s);
  EXPECT_EQ(hang.exit_code, 124) << hang.err;
  nlohmann::json h = d_.Show("1");
  EXPECT_EQ(h["root_cause"]["reason"], "hang");
  const nlohmann::json& blamed = h["root_cause"]["rank"];
  EXPECT_TRUE(blamed.is_null() || blamed == 1) << h.dump(1);
  const std::string message = h["root_cause"]["message"];
  const auto& report = h["hang_report"];
  ASSERT_TRUE(report.is_object());
  std::vector<int> missing;
  for (const auto& rank : report["ranks"]) {
    const std::string status = rank.value("stack_status", "");
    EXPECT_FALSE(status.empty()) << "every rank's stack is accounted for: " << rank.dump(1);
    if (status != "taken") missing.push_back(rank["rank"].get<int>());
  }
  if (blamed.is_null()) {
    // What was missing is said.
    EXPECT_NE(message.find("stopped beating within"), std::string::npos) << message;
    EXPECT_FALSE(missing.empty() && message.find("single out no rank") == std::string::npos &&
                 message.find("collective") == std::string::npos)
        << message;
  } else {
    EXPECT_NE(report["ranks"][1]["stack"].get<std::string>().find("injected_hang"),
              std::string::npos)
        << report["ranks"][1].dump(1);
  }
  for (const auto& rank : h["ranks"]) {
    if (rank["rank"] != 1 || blamed.is_null()) {
      EXPECT_NE(rank["state"], "FAILED")
          << "a rank not blamed is not the failed one: " << rank.dump(1);
    }
  }
}
#endif

// --hold-on-hang: the report is taken at the verdict, the hung ranks are
// left alive for a look, ps says HUNG (held ... left), and a kill ends the
// hold with the hang as the cause.
TEST_F(Heartbeats, AHungJobIsHeldForALookUntilKilled) {
  const std::string id = SubmitDetached({"--devices", "2", "--heartbeat-timeout", "300ms",
                                         "--hold-on-hang", "1h", "--", kChild, "beat:3:20,hang"});
  ASSERT_TRUE(WaitFor([&] { return Has(d_.Ctl({"ps"}).out, "HUNG (held "); }, 60s))
      << d_.Ctl({"ps"}).out;
  nlohmann::json job = d_.Show(id);
  EXPECT_EQ(job["state"], "RUNNING");
  EXPECT_EQ(job["root_cause"]["reason"], "hang");
  EXPECT_TRUE(job["hang_report"].is_object());
  for (const auto& rank : job["ranks"]) EXPECT_TRUE(ProcessAlive(rank["pid"].get<pid_t>()));
  CmdResult show = d_.Ctl({"show", id});
  EXPECT_TRUE(Has(show.out, "ltctl stack " + id)) << show.out;
  EXPECT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  job = d_.WaitEnded(id, 20s);
  EXPECT_EQ(job["state"], "FAILED");
  EXPECT_EQ(job["root_cause"]["reason"], "hang");
  EXPECT_EQ(job["exit_code"], 124);
}

}  // namespace
}  // namespace ltd::test
