// A started ltd per test, and the after-test proof that nothing was left.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <regex>

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

// An ltd serving metrics on a free port, and its page fetched with curl
// (skipped where curl is not installed).
class MetricsE2E : public E2E {
 protected:
  std::vector<std::string> DaemonArgs() override { return {"--metrics-listen", "127.0.0.1:0"}; }

  void SetUp() override {
    E2E::SetUp();
    // ltd answers on its socket a moment before it serves metrics.
    const std::regex served("metrics on (http://127\\.0\\.0\\.1:[0-9]+/metrics)");
    std::smatch m;
    std::string log;
    ASSERT_TRUE(WaitFor([&] { return std::regex_search(log = d_.log(), m, served); }, 10s)) << log;
    url_ = m[1];
    CmdResult curl = RunCommand({"/bin/sh", "-c", "command -v curl"}, {}, 10s);
    if (curl.exit_code != 0) GTEST_SKIP() << "curl is not installed (apt-get install curl)";
    curl_ = curl.out.substr(0, curl.out.find('\n'));
  }

  // The metrics page now.
  std::string Fetch() {
    CmdResult r = RunCommand({curl_, "-sS", "--fail", "--max-time", "10", url_}, {}, 20s);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }

  std::string url_;
  std::string curl_;
};

}  // namespace ltd::test
