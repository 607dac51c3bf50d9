// The real launcher (process/uv_launcher.h) with real children
// (lt_test_child): what each rank said and how it ended, and a loop run
// until a condition. Every test ends with no child of ours left, no
// zombie, and a loop that closes clean.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness.h"
#include "loop.h"
#include "run_loop.h"
#include "uv_launcher.h"

namespace ltd::test {

class LauncherFixture : public ::testing::Test {
 protected:
  void TearDown() override {
    launcher_.reset();
    if (loop_) {
      EXPECT_EQ(loop_->Close(), 0) << "a handle is left on the loop";
    }
    loop_.reset();
    EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
    EXPECT_EQ(errno, ECHILD) << "a child is left";
  }

  struct Rank {
    std::string out, err, control;
    std::optional<ExitStatus> exit;
  };

  // lt_test_child ARGS in "/" as this process's user, rank 0 of job "t".
  static SpawnRequest Request(const std::vector<std::string>& args) {
    SpawnRequest req;
    req.job_id = "t";
    req.argv = {TestChildPath()};
    req.argv.insert(req.argv.end(), args.begin(), args.end());
    req.env = {"RANK=0"};
    req.cwd = "/";
    req.uid = geteuid();
    req.gid = getegid();
    return req;
  }

  // Its pid, or -1 (and a failure) when it did not start.
  pid_t Spawn(Rank& rank, const SpawnRequest& req) {
    RankCallbacks cb;
    cb.on_output = [&rank](Stream s, std::string_view d) {
      (s == Stream::kStdout ? rank.out : rank.err).append(d);
    };
    cb.on_control = [&rank](std::string_view d) { rank.control.append(d); };
    cb.on_exit = [&rank](ExitStatus s) { rank.exit = s; };
    auto pid = launcher_->Spawn(req, std::move(cb));
    EXPECT_TRUE(pid.ok()) << pid.status();
    return pid.ok() ? *pid : -1;
  }

  bool RunUntil(const std::function<bool()>& done,
                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return RunLoopUntil(loop_->get(), done, timeout);
  }

  std::unique_ptr<Loop> loop_ = std::make_unique<Loop>();
  std::unique_ptr<UvLauncher> launcher_;
};

}  // namespace ltd::test
