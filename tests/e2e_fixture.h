// A started ltd per test, and the after-test proof that nothing was left.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include "harness.h"

namespace ltd::test {

class E2E : public ::testing::Test {
 protected:
  virtual std::vector<std::string> DaemonArgs() { return {}; }

  void SetUp() override {
    ASSERT_TRUE(d_.Start(DaemonArgs())) << "ltd did not start:\n" << d_.log();
  }

  void TearDown() override {
    d_.Stop();
    // Nothing of any job of this test survives, and nobody is a zombie.
    EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).empty(); }, 5s))
        << "processes left behind: " << ProcessesWithMarker(d_.marker()).size();
    for (pid_t pid : ProcessesWithMarker(d_.marker())) kill(pid, SIGKILL);
    EXPECT_TRUE(ZombieChildrenOf(getpid()).empty());
    EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1) << "a child of the test is left";
    if (HasFailure()) std::fprintf(stderr, "---- ltd log ----\n%s\n", d_.log().c_str());
  }

  // Submits detached and returns the job id.
  std::string SubmitDetached(std::vector<std::string> args) {
    std::vector<std::string> argv = {"submit", "-d"};
    argv.insert(argv.end(), args.begin(), args.end());
    CmdResult r = d_.Ctl(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string id = r.out;
    while (!id.empty() && id.back() == '\n') id.pop_back();
    return id;
  }

  Daemon d_;
};

}  // namespace ltd::test
