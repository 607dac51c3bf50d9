// ltrun end to end: one job in the foreground with no daemon, as root in
// cgroup mode, as an unprivileged user in a delegated cgroup (what
// `systemd-run --user --scope -p Delegate=yes` gives), and as an
// unprivileged user in subreaper mode: a clean job, a crash, a hang,
// Ctrl-C. Nothing of a job outlives ltrun.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cgroup_fs.h"
#include "file_io.h"
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
    if (GetParam() != "cgroup") {
      if (geteuid() != 0) GTEST_SKIP() << "needs root to make a throwaway user";
      user_ = std::make_unique<TestUser>("ltrun" + std::to_string(getpid() % 100000));
      ASSERT_TRUE(user_->ok()) << user_->error();
      as_ = user_->As(dir_);
    }
    if (GetParam() == "delegated") {
      auto own = OwnCgroupDir();
      if (!own.ok()) GTEST_SKIP() << "no cgroup v2 here: " << own.status().message();
      delegated_ = *own + "/ltrun-test-" + std::to_string(getpid());
      ASSERT_EQ(mkdir(delegated_.c_str(), 0755), 0) << delegated_ << ": " << strerror(errno);
      // What systemd hands the user of a scope with Delegate=yes.
      for (const char* f : {"", "/cgroup.procs", "/cgroup.subtree_control", "/cgroup.threads"}) {
        const std::string path = delegated_ + f;
        ASSERT_EQ(chown(path.c_str(), as_.uid, as_.gid), 0) << path << ": " << strerror(errno);
      }
      as_.cgroup = delegated_;
    }
  }
  void TearDown() override {
    EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(marker_).empty(); }, 5s))
        << "processes left behind: " << ProcessesWithMarker(marker_).size();
    for (pid_t pid : ProcessesWithMarker(marker_)) kill(pid, SIGKILL);
    EXPECT_TRUE(ZombieChildrenOf(getpid()).empty());
    if (!delegated_.empty()) {
      // ltrun leaves nothing of its own below the scope, as a scope's user
      // would expect; the scope itself is the test's.
      EXPECT_TRUE(ChildCgroups(delegated_).empty()) << "ltrun left cgroups under " << delegated_;
      EXPECT_TRUE(RemoveCgroupTree(delegated_).ok());
    }
    user_.reset();
    std::filesystem::remove_all(dir_);
  }

  // ltrun ARGS as root (cgroup mode) or as the throwaway user (in its
  // delegated cgroup, or subreaper).
  CmdResult Run(std::vector<std::string> args, std::chrono::milliseconds timeout = 60s,
                const std::function<void(pid_t)>& started = nullptr) {
    const std::string mode = GetParam() == "delegated" ? "cgroup" : GetParam();
    std::vector<std::string> argv = {LtrunPath(), "--containment", mode};
    argv.insert(argv.end(), args.begin(), args.end());
    if (user_) return RunCommandAs(as_, argv, {marker_}, timeout, started);
    return RunCommand(argv, {marker_}, timeout, started);
  }

  std::string dir_;
  std::string marker_;
  std::unique_ptr<TestUser> user_;
  RunAs as_;
  std::string delegated_;  // the user's delegated cgroup, in that mode
};

TEST_P(Ltrun, CleanJobPrintsEveryRanksLinesAndExitsZero) {
  CmdResult r = Run({"--devices", "3", "--", TestChildPath(), "print:2,exit:0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    for (int line = 0; line < 2; ++line) {
      const std::string want =
          "[" + std::to_string(rank) + "] line " + std::to_string(line) + " of 2\n";
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

// The report replaces the file whole (a reader that polls for it never
// reads half a record): a reader of the old file keeps the old one. Where
// it is not a plain file (a link, /dev/stdout), it is written as it is.
TEST_P(Ltrun, TheReportReplacesItsFileWholeAndGoesToStdoutAsItIs) {
  const std::string report = dir_ + "/report.json";
  std::ofstream(report) << "old\n";
  const int old = open(report.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(old, 0);
  CmdResult r = Run({"--devices", "1", "--report", report, "--", TestChildPath(), "print:1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  char buf[16] = {};
  EXPECT_EQ(pread(old, buf, sizeof buf, 0), 4);
  EXPECT_STREQ(buf, "old\n") << "the report was written into the old file, not replacing it";
  close(old);
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << ReadWhole(report);
  EXPECT_EQ(j["state"], "SUCCEEDED");
  EXPECT_FALSE(std::filesystem::exists(report + ".tmp"));

  // A link (to stdout, say) is written through, not replaced.
  const std::string target = dir_ + "/target.json";
  std::ofstream(target) << "";
  ASSERT_EQ(chmod(target.c_str(), 0666), 0);
  const std::string link = dir_ + "/link.json";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  r = Run({"--devices", "1", "--report", link, "--", TestChildPath(), "print:1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_NE(ReadWhole(target).find("\"state\": \"SUCCEEDED\""), std::string::npos) << r.err;
}

TEST_P(Ltrun, AHangIsFoundReportedAndEndsWith124) {
  const std::string report = dir_ + "/report.json";
  CmdResult r =
      Run({"--devices", "2", "--heartbeat-timeout", "500ms", "--stack-budget", "0", "--report",
           report, "--", TestChildPath(), "--rank", "1", "beat:3:20,hang", "beat:100000:50"});
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
  // In the cgroup modes, where the ranks and escapees ran: below the
  // delegated cgroup, when there is one.
  auto cgroups = std::make_shared<std::vector<std::string>>();
  auto seen = std::make_shared<std::atomic<bool>>(false);
  CmdResult r =
      Run({"--devices", "2", "--", TestChildPath(), "pidfile:" + pidfile + ",escape,hang"}, 60s,
          [&](pid_t pid) {
            // Once every rank and its escapee run, the user presses Ctrl-C.
            std::thread([pid, pidfile, cgroups, seen] {
              WaitFor(
                  [&] {
                    std::ifstream in(pidfile);
                    return std::count(std::istreambuf_iterator<char>(in),
                                      std::istreambuf_iterator<char>(), '\n') >= 4;
                  },
                  20s);
              std::ifstream in(pidfile);
              for (pid_t p; in >> p;) {
                auto cg = ReadWholeFile("/proc/" + std::to_string(p) + "/cgroup");
                cgroups->push_back(cg.ok() ? *cg : "");
              }
              seen->store(true, std::memory_order_release);
              kill(pid, SIGINT);
            }).detach();
          });
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("ltrun: job CANCELLED: interrupted (SIGINT)"), std::string::npos) << r.err;
  if (GetParam() != "subreaper") {
    const std::string within =
        GetParam() == "delegated" ? delegated_.substr(delegated_.rfind('/')) + "/ltd-" : "/ltd-";
    ASSERT_TRUE(seen->load(std::memory_order_acquire));
    ASSERT_EQ(cgroups->size(), 4u);
    for (const std::string& cg : *cgroups) EXPECT_NE(cg.find(within), std::string::npos) << cg;
  }
  // The escapees went with the job.
  std::ifstream in(pidfile);
  for (pid_t pid; in >> pid;) {
    EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(pid); }, 5s)) << "pid " << pid << " survived";
  }
}

TEST_P(Ltrun, BadCommandLinesAreOneLine) {
  CmdResult none = Run({"--devices", "2"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("no program given"), std::string::npos) << none.err;
  CmdResult bad = Run({"--heartbeat-timeout", "soon", "--", "/bin/true"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

// --env takes one KEY=VALUE per use: PROGRAM right after it is PROGRAM,
// and its own options (`sh -c`) are its own, as with ltctl submit.
TEST_P(Ltrun, EnvTakesOneKeyValueAndLeavesTheProgram) {
  if (GetParam() != "cgroup") GTEST_SKIP() << "one mode is enough";
  CmdResult r = Run({"--env", "LT_TEST_EXTRA=first", "--env", "LT_TEST_OTHER=second",
                     TestChildPath(), "getenv:LT_TEST_EXTRA,getenv:LT_TEST_OTHER,exit:0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[0] LT_TEST_EXTRA=first\n[0] LT_TEST_OTHER=second\n") << r.err;
  CmdResult sh = Run({"--env", "LT_TEST_EXTRA=x", "/bin/sh", "-c", "echo \"got $LT_TEST_EXTRA\""});
  EXPECT_EQ(sh.exit_code, 0) << sh.err;
  EXPECT_EQ(sh.out, "[0] got x\n") << sh.err;
  for (const char* bad : {"NOEQUALS", "=value"}) {
    CmdResult r = Run({"--env", bad, "/bin/true"});
    EXPECT_EQ(r.exit_code, 1) << bad;
    EXPECT_EQ(r.err, std::string("ltrun: --env takes KEY=VALUE, got '") + bad + "'\n");
  }
}

// Each rank holds five of ltrun's fds: under the usual soft limit of 1,024
// a job of 400 ranks needs ltrun to raise its own, while its ranks keep the
// limit ltrun was started with. A hard limit too low is one line, exit 1.
// Cgroup mode only (the fds are the same in every mode); about 5 s.
TEST_P(Ltrun, ManyRanksUnderTheUsualFdLimit) {
  if (GetParam() != "cgroup") GTEST_SKIP() << "one mode is enough";
  const std::string ltrun = LtrunPath() + " --containment cgroup";
  CmdResult ok = RunCommand({"/bin/sh", "-c",
                             "ulimit -Sn 1024 && exec " + ltrun + " --devices 400 -- " +
                                 TestChildPath() + " --rank 399 rlimits exit:0"},
                            {marker_}, 120s);
  EXPECT_EQ(ok.exit_code, 0) << ok.err.substr(0, 2000);
  EXPECT_NE(ok.out.find("[399] nofile=1024:"), std::string::npos) << ok.out.substr(0, 2000);
  CmdResult low = RunCommand(
      {"/bin/sh", "-c", "ulimit -n 512 && exec " + ltrun + " --devices 400 -- /bin/true"},
      {marker_}, 60s);
  EXPECT_EQ(low.exit_code, 1) << low.err;
  EXPECT_NE(low.err.find("--devices 400: the job needs about 2128 open files, and the hard "
                         "limit is 512"),
            std::string::npos)
      << low.err;
  EXPECT_EQ(std::count(low.err.begin(), low.err.end(), '\n'), 1) << low.err;
}

// The issue's: an ltrun that is SIGKILLed cannot remove its cgroups; they
// stay, emptied, until the next ltrun beside it removes them (and their
// ltd-<tag> parent). Fails where nobody did.
TEST_P(Ltrun, ASigkilledLtrunsEmptyCgroupsGoWithTheNext) {
  if (GetParam() == "subreaper") GTEST_SKIP() << "no cgroups in this mode";
  std::string own = delegated_;
  if (own.empty()) {
    auto mine = OwnCgroupDir();
    ASSERT_TRUE(mine.ok()) << mine.status();
    own = *mine;
  }
  const std::string pidfile = dir_ + "/pids";
  auto run_dir = std::make_shared<std::string>();
  // Its state dir below the test's: a killed ltrun cannot remove a temp one.
  CmdResult r = Run({"--state-dir", dir_ + "/killed", "--devices", "2", "--", TestChildPath(),
                     "pidfile:" + pidfile + ",hang"},
                    60s, [&](pid_t pid) {
                      std::thread([pid, pidfile, own, run_dir] {
                        WaitFor(
                            [&] {
                              std::ifstream in(pidfile);
                              return std::count(std::istreambuf_iterator<char>(in),
                                                std::istreambuf_iterator<char>(), '\n') >= 2;
                            },
                            20s);
                        for (const std::string& base : ChildCgroups(own)) {
                          const std::string dir =
                              own + "/" + base + "/run-ltrun" + std::to_string(pid);
                          if (base.starts_with("ltd-") && access(dir.c_str(), F_OK) == 0) {
                            *run_dir = dir;
                          }
                        }
                        kill(pid, SIGKILL);
                      }).detach();
                    });
  EXPECT_EQ(r.exit_code, 137) << r.err;
  std::ifstream in(pidfile);
  for (pid_t pid; in >> pid;) {
    EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(pid); }, 10s)) << "rank " << pid << " lives";
  }
  ASSERT_FALSE(run_dir->empty()) << "no run-ltrun cgroup under " << own;
  const std::string base = run_dir->substr(0, run_dir->rfind('/'));
  ASSERT_TRUE(WaitFor([&] { return !CgroupPopulated(*run_dir).value_or(true); }, 10s));
  EXPECT_EQ(access(run_dir->c_str(), F_OK), 0) << "gone before the next ltrun";

  CmdResult next = Run({"--devices", "1", "--", "/bin/true"});
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_NE(access(run_dir->c_str(), F_OK), 0) << *run_dir << " was left by the next ltrun";
  EXPECT_NE(access(base.c_str(), F_OK), 0) << base << " was left by the next ltrun";
}

INSTANTIATE_TEST_SUITE_P(Modes, Ltrun, ::testing::Values("cgroup", "delegated", "subreaper"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ltd::test
