// Automatic heartbeats end to end (issue 10): real, unmodified
// torch.distributed (gloo) scripts that never import ltworker, under a real
// ltd with a short hang timeout. ltd must find hangs in them, name the rank
// the others wait for, and never call a slow but working job hung.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "e2e_fixture.h"

namespace ltd::test {
namespace {

const std::string kRanks = LT_TEST_RANKS_DIR;
const std::string kPython = "/usr/bin/python3";
const std::string kTrain = kRanks + "/auto_train.py";

bool HasTorch() {
  static const bool has =
      RunCommand({kPython, "-c", "import torch.distributed"}, {}, 60s).exit_code == 0;
  return has;
}

// RFC 3339 UTC as ltctl prints it, to seconds since the epoch.
double EpochSeconds(const std::string& rfc3339) {
  std::tm tm{};
  const char* rest = strptime(rfc3339.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return 0;
  double seconds = static_cast<double>(timegm(&tm));
  if (*rest == '.') seconds += std::strtod(rest, nullptr);
  return seconds;
}

// When the script said rank R stalls ("rank R stalls at EPOCH").
double StallTime(const std::string& out, int rank) {
  const std::string mark = "rank " + std::to_string(rank) + " stalls at ";
  const size_t at = out.find(mark);
  return at == std::string::npos ? 0 : std::strtod(out.c_str() + at + mark.size(), nullptr);
}

// `n` busy shells (`while :; do :; done`), killed and reaped when this goes:
// the machine is starved for CPU while it lives.
class CpuHogs {
 public:
  explicit CpuHogs(int n) {
    for (int i = 0; i < n; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        execl("/bin/sh", "sh", "-c", "while :; do :; done", static_cast<char*>(nullptr));
        _exit(127);
      }
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~CpuHogs() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  }
  CpuHogs(const CpuHogs&) = delete;
  CpuHogs& operator=(const CpuHogs&) = delete;
  size_t size() const { return pids_.size(); }

 private:
  std::vector<pid_t> pids_;
};

class AutoHeartbeats : public E2E {
 protected:
  void SetUp() override {
    if (!HasTorch()) GTEST_SKIP() << "python3-torch is not installed";
    E2E::SetUp();
  }
};

TEST_F(AutoHeartbeats, RankBlockedInSleepIsTheRootCauseFromItsStack) {
  CmdResult r = d_.Ctl({"submit", "--devices", "3", "--heartbeat-timeout", "3s", "--", kPython,
                        kTrain, "--steps", "100000", "--hang-rank", "1", "--hang-step", "10"},
                       180s);
  EXPECT_EQ(r.exit_code, 124) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["heartbeat_mode"], "AUTOMATIC") << job.dump(1);
  EXPECT_EQ(job["hang_timeout_ms"], 3000);
  EXPECT_EQ(job["root_cause"]["reason"], "hang");
  EXPECT_EQ(job["root_cause"]["rank"], 1) << job["root_cause"].dump(1);
  const std::string message = job["root_cause"]["message"];
  EXPECT_NE(message.find("no rank made progress for 3s"), std::string::npos) << message;
  EXPECT_NE(message.find("rank(s) 1 stalled outside a collective"), std::string::npos) << message;
  const auto& report = job["hang_report"];
  const std::string stack1 = report["ranks"][1]["stack"];
  EXPECT_NE(stack1.find("stall_outside_collective"), std::string::npos) << stack1;
  EXPECT_TRUE(report["ranks"][0]["in_collective"].get<bool>()) << report.dump(1);
  EXPECT_FALSE(report["ranks"][1]["in_collective"].get<bool>());
  // Ten optimizer steps were taken before the stall.
  EXPECT_EQ(job["ranks"][1]["last_step"], 10) << job["ranks"].dump(1);
  // Functional, with generous slack for a loaded machine: the job ends
  // about a timeout after the stall, not after gloo's 30 minutes.
  const double stalled = StallTime(r.out, 1);
  ASSERT_GT(stalled, 0) << r.out;
  const double ended = EpochSeconds(job["ended_at"]);
  std::fprintf(stderr, "stall -> job ended: %.2f s (timeout 3 s)\n", ended - stalled);
  EXPECT_LT(ended - stalled, 3 + 10) << job.dump(1);
}

TEST_F(AutoHeartbeats, SlowRankWhileTheOthersWaitInABarrierIsNoHang) {
  // Rank 0 spends three timeouts in a Python loop; the others wait for it
  // in a barrier all along.
  CmdResult r =
      d_.Ctl({"submit", "--devices", "3", "--heartbeat-timeout", "3s", "--", kPython, kTrain,
              "--steps", "20", "--slow-rank", "0", "--slow-step", "5", "--slow-seconds", "9"},
             180s);
  EXPECT_EQ(r.exit_code, 0) << r.err << d_.Show("1").dump(1);
  EXPECT_NE(r.out.find("trained 20 steps on 3 ranks"), std::string::npos) << r.out;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["heartbeat_mode"], "AUTOMATIC");
  EXPECT_TRUE(job["hang_report"].is_null()) << job["hang_report"].dump(1);
}

TEST_F(AutoHeartbeats, SlowRankOnAStarvedMachineIsNeverCalledHung) {
  // The same slow checkpoint with two CPU hogs on the machine: rank 0 gets
  // a fraction of a core, its module's checks run late or see its frame
  // at the same instruction, yet its main thread runs all along. Five runs:
  // a verdict that depends on how much CPU the rank got shows up in some.
  CpuHogs hogs(2);
  ASSERT_EQ(hogs.size(), 2u);
  for (int run = 1; run <= 5; ++run) {
    CmdResult r =
        d_.Ctl({"submit", "--devices", "3", "--heartbeat-timeout", "3s", "--", kPython, kTrain,
                "--steps", "20", "--slow-rank", "0", "--slow-step", "5", "--slow-seconds", "9"},
               300s);
    nlohmann::json job = d_.Show(std::to_string(run));
    EXPECT_TRUE(job["hang_report"].is_null()) << "run " << run << ": " << job.dump(1);
    ASSERT_EQ(r.exit_code, 0) << "run " << run << ": " << r.err << job["root_cause"].dump(1);
    EXPECT_EQ(job["heartbeat_mode"], "AUTOMATIC");
  }
}

TEST_F(AutoHeartbeats, MismatchedCollectivesAreAHangReportedAsSuch) {
  CmdResult r = d_.Ctl({"submit", "--devices", "2", "--heartbeat-timeout", "3s", "--", kPython,
                        kTrain, "--steps", "100", "--mismatch-step", "5"},
                       180s);
  EXPECT_EQ(r.exit_code, 124) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["root_cause"]["reason"], "hang");
  const std::string message = job["root_cause"]["message"];
  EXPECT_NE(message.find("every rank waits in a collective and they disagree"), std::string::npos)
      << message;
  EXPECT_NE(message.find("rank 0 in all_reduce"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1 in barrier"), std::string::npos) << message;
  for (const auto& rank : job["hang_report"]["ranks"]) {
    EXPECT_TRUE(rank["in_collective"].get<bool>()) << rank.dump(1);
    EXPECT_FALSE(rank["stack"].get<std::string>().empty());
  }
}

TEST_F(AutoHeartbeats, DataLoaderWorkersSendNothingAndStepsMatchTheLoop) {
  // A worker that found the module active would raise in worker_init_fn
  // and fail the job.
  CmdResult r = d_.Ctl({"submit", "--devices", "2", "--heartbeat-timeout", "30s", "--", kPython,
                        kTrain, "--steps", "30", "--loader"},
                       180s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["heartbeat_mode"], "AUTOMATIC");
  for (const auto& rank : job["ranks"]) EXPECT_EQ(rank["last_step"], 30) << job["ranks"].dump(1);
  // ltd heard `auto on` once per rank: no worker announced itself.
  const std::string log = d_.log();
  size_t ons = 0;
  for (size_t at = log.find("automatic heartbeats on"); at != std::string::npos;
       at = log.find("automatic heartbeats on", at + 1))
    ++ons;
  EXPECT_EQ(ons, 2u) << log;
}

TEST_F(AutoHeartbeats, TheUsersOwnSitecustomizeStillRuns) {
  CmdResult r = d_.Ctl({"submit", "--devices", "2", "--", kPython, kTrain, "--steps", "5"}, 180s,
                       {"PYTHONPATH=" + kRanks + "/user_site"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[0] the user's sitecustomize ran"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1] the user's sitecustomize ran"), std::string::npos) << r.out;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["heartbeat_mode"], "AUTOMATIC");
  EXPECT_EQ(job["hang_timeout_ms"], 300000) << "the default of --auto-heartbeat-timeout";
  EXPECT_EQ(job["ranks"][1]["last_step"], 5);
}

TEST_F(AutoHeartbeats, UncaughtExceptionIsTheRootCauseMessage) {
  CmdResult r = d_.Ctl({"submit", "--devices", "3", "--", kPython, kTrain, "--steps", "100",
                        "--raise-rank", "2", "--raise-step", "5"},
                       180s);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["root_cause"]["rank"], 2) << job["root_cause"].dump(1);
  const std::string message = job["root_cause"]["message"];
  EXPECT_NE(message.find("RuntimeError: injected failure in rank 2 at step 5"), std::string::npos)
      << message;
  EXPECT_NE(message.find("auto_train.py"), std::string::npos) << message;
}

TEST_F(AutoHeartbeats, PythonStartedByAShellScriptIsWatched) {
  CmdResult r = d_.Ctl(
      {"submit", "--devices", "2", "--heartbeat-timeout", "3s", "--", "bash",
       kRanks + "/auto_train.sh", "--steps", "100000", "--hang-rank", "1", "--hang-step", "10"},
      180s);
  EXPECT_EQ(r.exit_code, 124) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["heartbeat_mode"], "AUTOMATIC");
  EXPECT_EQ(job["root_cause"]["rank"], 1) << job["root_cause"].dump(1);
  EXPECT_EQ(job["ranks"][1]["last_step"], 10);
  const std::string stack1 = job["hang_report"]["ranks"][1]["stack"];
  EXPECT_NE(stack1.find("stall_outside_collective"), std::string::npos) << stack1;
}

TEST_F(AutoHeartbeats, NothingIsInjectedIntoOtherProgramsOrWhenTurnedOff) {
  const std::vector<std::string> env = {"PYTHONPATH=/lt-test-path"};
  // A program that is no Python and starts none: its environment is as without ltd.
  CmdResult plain = d_.Ctl({"submit", "--devices", "1", "--", "printenv"}, 60s, env);
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("[0] PYTHONPATH=/lt-test-path\n"), std::string::npos) << plain.out;
  EXPECT_EQ(plain.out.find("LT_AUTO_HEARTBEAT"), std::string::npos) << plain.out;
  EXPECT_EQ(d_.Show("1")["heartbeat_mode"], "NONE");

  const std::string probe =
      "import os, sys, torch; print('module', 'ltd_autoheartbeat' in sys.modules, "
      "os.environ.get('LT_AUTO_HEARTBEAT'), os.environ.get('PYTHONPATH'))";
  CmdResult off = d_.Ctl(
      {"submit", "--devices", "1", "--no-auto-heartbeat", "--", kPython, "-c", probe}, 60s, env);
  EXPECT_EQ(off.exit_code, 0) << off.err;
  EXPECT_NE(off.out.find("[0] module False None /lt-test-path\n"), std::string::npos) << off.out;
  nlohmann::json job = d_.Show("2");
  EXPECT_EQ(job["heartbeat_mode"], "NONE");
  EXPECT_FALSE(job["auto_heartbeat"].get<bool>());

  // The same probe without the flag: instrumented (and watched, since it
  // imports torch), and the program still sees its own PYTHONPATH only.
  CmdResult on = d_.Ctl({"submit", "--devices", "1", "--", kPython, "-c", probe}, 60s, env);
  EXPECT_EQ(on.exit_code, 0) << on.err;
  EXPECT_NE(on.out.find("[0] module True used /lt-test-path\n"), std::string::npos) << on.out;
  EXPECT_EQ(d_.Show("3")["heartbeat_mode"], "AUTOMATIC");
  CmdResult show = d_.Ctl({"show", "3"});
  EXPECT_NE(show.out.find("automatic, hung when no rank progresses for 5m"), std::string::npos)
      << show.out;
}

}  // namespace
}  // namespace ltd::test
