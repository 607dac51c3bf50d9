// A root ltd (not started) and two throwaway local users, A and B, for
// the suites that need another user to be one (Controls, Dos); and the
// after-test proof that neither left a process, a zombie or the user.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "harness.h"

namespace ltd::test {

class TwoUsersTest : public ::testing::Test {
 protected:
  // `prefix`: the users' names start with it (then the test's pid).
  explicit TwoUsersTest(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "needs root: it creates local users and runs ltd as root; run it as root "
                      "(e.g. `sudo ctest -L security`)";
    }
    if (access("/usr/sbin/useradd", X_OK) != 0) {
      GTEST_SKIP() << "useradd (package passwd) is not installed";
    }
    const std::string base = prefix_ + std::to_string(getpid());
    a_ = std::make_unique<TestUser>(base + "a");
    ASSERT_TRUE(a_->ok()) << a_->error();
    b_ = std::make_unique<TestUser>(base + "b");
    ASSERT_TRUE(b_->ok()) << b_->error();
    ltctl_ = bin_.Copy(LtctlPath());
    child_ = bin_.Copy(TestChildPath());
    d_.LetUsersConnect();
    set_up_ = true;
  }

  void TearDown() override {
    if (d_.pid() > 0) {
      EXPECT_EQ(d_.Stop(), 0) << "ltd did not exit 0 when stopped";
    }
    EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).empty(); }, 10s))
        << "processes left behind: " << ProcessesWithMarker(d_.marker()).size();
    for (pid_t pid : ProcessesWithMarker(d_.marker())) kill(pid, SIGKILL);
    for (auto* u : {a_.get(), b_.get()}) {
      if (u == nullptr || !u->ok()) continue;
      EXPECT_TRUE(WaitFor([&] { return ProcessesOfUser(u->uid()).empty(); }, 10s))
          << "processes of " << u->name() << " left behind";
      EXPECT_TRUE(u->Remove()) << u->error();
    }
    EXPECT_TRUE(ZombieChildrenOf(getpid()).empty());
    if (HasFailure() && set_up_) {
      const std::string log = d_.log();
      std::fprintf(stderr, "---- ltd log (tail) ----\n%s\n",
                   log.substr(log.size() > 20000 ? log.size() - 20000 : 0).c_str());
    }
  }

  CmdResult CtlAs(const TestUser& u, std::vector<std::string> args,
                  std::chrono::milliseconds timeout = 30s) const {
    std::vector<std::string> argv = {ltctl_, "--socket", d_.socket()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommandAs(u.As(), argv, {d_.marker(), "HOME=" + u.home(), "USER=" + u.name()},
                        timeout);
  }

  // Submits detached as `u`; the job id, "" on failure.
  std::string SubmitAs(const TestUser& u, std::vector<std::string> args) {
    std::vector<std::string> argv = {"submit", "-d"};
    argv.insert(argv.end(), args.begin(), args.end());
    CmdResult r = CtlAs(u, argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? TrimEnd(r.out) : "";
  }

  bool WaitState(const std::string& id, const std::string& state,
                 std::chrono::milliseconds timeout = 20s) const {
    return WaitFor([&] { return d_.Show(id).value("state", "") == state; }, timeout);
  }

  Daemon d_;
  PublicDir bin_;
  std::unique_ptr<TestUser> a_, b_;
  std::string ltctl_, child_;

 private:
  std::string prefix_;
  bool set_up_ = false;
};

}  // namespace ltd::test
