// ltrun end to end: one job in the foreground with no daemon, as root in
// cgroup mode and as an unprivileged user in subreaper mode: a clean job,
// a crash, a hang, Ctrl-C. Nothing of a job outlives ltrun.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "harness.h"

namespace ltd::test {
namespace {

std::string LtrunPath() { return LtdPath().substr(0, LtdPath().rfind('/')) + "/ltrun"; }

class Ltrun : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ltrun-test.XXXXXX";
    dir_ = mkdtemp(tmpl);
    chmod(dir_.c_str(), 0777);
    marker_ = "LT_TEST_TAG=" + dir_;
    if (GetParam() == "subreaper") {
      if (geteuid() != 0) GTEST_SKIP() << "needs root to make a throwaway user";
      user_ = std::make_unique<TestUser>("ltrun" + std::to_string(getpid() % 100000));
      ASSERT_TRUE(user_->ok()) << user_->error();
    }
  }
  void TearDown() override {
    EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(marker_).empty(); }, 5s))
        << "processes left behind: " << ProcessesWithMarker(marker_).size();
    for (pid_t pid : ProcessesWithMarker(marker_)) kill(pid, SIGKILL);
    EXPECT_TRUE(ZombieChildrenOf(getpid()).empty());
    user_.reset();
    std::filesystem::remove_all(dir_);
  }

  // ltrun ARGS as root (cgroup mode) or as the throwaway user (subreaper).
  CmdResult Run(std::vector<std::string> args, std::chrono::milliseconds timeout = 60s,
                const std::function<void(pid_t)>& started = nullptr) {
    std::vector<std::string> argv = {LtrunPath(), "--containment", GetParam()};
    argv.insert(argv.end(), args.begin(), args.end());
    if (user_) return RunCommandAs(user_->As(dir_), argv, {marker_}, timeout, started);
    return RunCommand(argv, {marker_}, timeout, started);
  }

  std::string dir_;
  std::string marker_;
  std::unique_ptr<TestUser> user_;
};

TEST_P(Ltrun, CleanJobPrintsEveryRanksLinesAndExitsZero) {
  CmdResult r = Run({"--devices", "3", "--", TestChildPath(), "print:2,exit:0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    for (int line = 0; line < 2; ++line) {
      const std::string want = "[" + std::to_string(rank) + "] line " + std::to_string(line) + " of 2\n";
      EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
    }
  }
}

TEST_P(Ltrun, ACrashTearsTheOthersDownWithTheRanksExitCode) {
  const std::string report = dir_ + "/report.json";
  CmdResult r = Run({"--devices", "3", "--report", report, "--", TestChildPath(), "--rank", "1",
                     "sleep:100,exit:7", "hang"});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_NE(r.err.find("ltrun: job FAILED: rank 1 exited with code 7 (exit code 7)"),
            std::string::npos)
      << r.err;
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "no report at " << report;
  EXPECT_EQ(j["state"], "FAILED");
  EXPECT_EQ(j["root_cause"]["rank"], 1);
  EXPECT_EQ(j["root_cause"]["reason"], "exited");
}

TEST_P(Ltrun, AHangIsFoundReportedAndEndsWith124) {
  const std::string report = dir_ + "/report.json";
  CmdResult r = Run({"--devices", "2", "--heartbeat-timeout", "500ms", "--stack-budget", "0",
                     "--report", report, "--", TestChildPath(), "--rank", "1", "beat:3:20,hang",
                     "beat:100000:50"});
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_NE(r.err.find("ltrun: hang report: stalled rank(s) 1"), std::string::npos) << r.err;
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["root_cause"]["reason"], "hang");
  EXPECT_EQ(j["hang_report"]["stalled_ranks"], nlohmann::json::array({1}));
}

TEST_P(Ltrun, CtrlCTearsTheJobDownAndExits130) {
  const std::string pidfile = dir_ + "/pids";
  CmdResult r = Run({"--devices", "2", "--", TestChildPath(), "pidfile:" + pidfile + ",escape,hang"},
                    60s, [&](pid_t pid) {
                      // Once every rank and its escapee run, the user presses Ctrl-C.
                      std::thread([pid, pidfile] {
                        WaitFor(
                            [&] {
                              std::ifstream in(pidfile);
                              return std::count(std::istreambuf_iterator<char>(in),
                                                std::istreambuf_iterator<char>(), '\n') >= 4;
                            },
                            20s);
                        kill(pid, SIGINT);
                      }).detach();
                    });
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("ltrun: job CANCELLED: interrupted (SIGINT)"), std::string::npos) << r.err;
  // The escapees went with the job.
  std::ifstream in(pidfile);
  for (pid_t pid; in >> pid;) {
    EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(pid); }, 5s)) << "pid " << pid << " survived";
  }
}

TEST_P(Ltrun, BadCommandLinesAreOneLine) {
  CmdResult none = Run({"--devices", "2"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no program given"), std::string::npos) << none.err;
  CmdResult bad = Run({"--heartbeat-timeout", "soon", "--", "/bin/true"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

INSTANTIATE_TEST_SUITE_P(Modes, Ltrun, ::testing::Values("cgroup", "subreaper"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ltd::test
