// Taking stacks with real tools and real children: eu-stack (or gdb) run
// through lt-exec on a sleeping process, and tools that never finish, which
// must be killed (their whole process group) at the budget and reaped with
// a deadline, leaving no child behind.
#include "stack_sampler.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ltd::test {
namespace {

using Outcome = SampledStack::Outcome;

// A process to take the stack of: sleeps until killed.
class Sleeper {
 public:
  Sleeper() {
    pid_ = fork();
    if (pid_ == 0) {
      execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
      _exit(127);
    }
    // Until it has exec'd, its stack is ours.
    for (int i = 0; i < 500; ++i) {
      std::error_code ec;
      auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid_) + "/exe", ec);
      if (!ec && exe.filename() == "sleep") break;
      usleep(2000);
    }
  }
  ~Sleeper() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

class StackSamplerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
    EXPECT_EQ(errno, ECHILD) << "a helper is left";
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // A "tool" that ignores its arguments: a shell script.
  std::string Tool(const std::string& body) {
    if (dir_.empty()) {
      char tmpl[] = "/tmp/ltd-stacks.XXXXXX";
      dir_ = mkdtemp(tmpl);
    }
    const std::string path = dir_ + "/tool" + std::to_string(++tools_);
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    return path;
  }
  std::string dir_;
  int tools_ = 0;
};

TEST_F(StackSamplerTest, EuStackTakesEveryRanksStackThroughLtExec) {
  const StackTools tools = StackTools::Installed();
  if (tools.eu_stack.empty() && tools.gdb.empty()) GTEST_SKIP() << "no eu-stack, no gdb";
  Sleeper a, b;
  auto stacks = TakeStacks(tools, LT_EXEC_SHIM, Credentials{geteuid(), getegid(), {}},
                           {a.pid(), 0, b.pid()}, Millis(20'000));
  ASSERT_EQ(stacks.size(), 3u);
  for (size_t i : {0u, 2u}) {
    EXPECT_EQ(stacks[i].outcome, Outcome::kTaken) << stacks[i].note << "\n" << stacks[i].text;
    EXPECT_NE(stacks[i].text.find("Thread "), std::string::npos) << stacks[i].text;
    EXPECT_NE(stacks[i].text.find("#0"), std::string::npos) << stacks[i].text;
    // The kernel's view comes along: the main thread sleeps in a syscall.
    EXPECT_NE(stacks[i].text.find("kernel: thread "), std::string::npos) << stacks[i].text;
  }
  EXPECT_EQ(stacks[1].outcome, Outcome::kSkipped);
}

TEST_F(StackSamplerTest, AToolThatNeverEndsIsKilledWithItsChildrenAtTheBudget) {
  Sleeper a;
  StackTools tools;
  // It starts a child that holds the output pipe open too: killing the
  // tool alone would leave the pipe open (and the child) behind.
  tools.eu_stack = Tool("sleep 300 & exec sleep 300");
  const auto start = std::chrono::steady_clock::now();
  auto stacks = TakeStacks(tools, LT_EXEC_SHIM, Credentials{geteuid(), getegid(), {}}, {a.pid()},
                           Millis(300));
  const auto spent = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(stacks.size(), 1u);
  EXPECT_EQ(stacks[0].outcome, Outcome::kTimedOut);
  EXPECT_NE(stacks[0].note.find("budget ran out"), std::string::npos) << stacks[0].note;
  EXPECT_LT(spent, std::chrono::seconds(60)) << "waited on the tool without a deadline";
}

// A tracer of the tool's own user holds the killed tool's exit back from
// its parent until the tracer waits for it, which this one never does: the
// sampler gives up on it after a deadline instead of waiting forever (a
// root supervisor once hung so in waitpid).
TEST_F(StackSamplerTest, AToolHeldByATracerIsGivenUpOn) {
  Sleeper a;
  StackTools tools;
  tools.eu_stack = Tool("exec sleep 301");
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t tracer = fork();
  if (tracer == 0) {
    // Finds the tool (a child of the test running `sleep 301`), seizes it,
    // says its pid, and never waits for it.
    close(report[0]);
    for (int i = 0; i < 20'000; ++i) {
      for (const auto& e : std::filesystem::directory_iterator("/proc")) {
        const std::string pid = e.path().filename();
        if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream cmdline(e.path() / "cmdline");
        std::string cmd((std::istreambuf_iterator<char>(cmdline)), {});
        if (cmd != std::string("sleep\0"
                               "301\0",
                               10))
          continue;
        const pid_t tool = std::stoi(pid);
        if (ptrace(PTRACE_SEIZE, tool, nullptr, nullptr) != 0) continue;
        (void)!write(report[1], &tool, sizeof tool);
        for (;;) pause();
      }
      usleep(500);
    }
    _exit(1);
  }
  close(report[1]);
  const auto start = std::chrono::steady_clock::now();
  // Budget enough for the tracer to have seized the tool before the kill.
  auto stacks = TakeStacks(tools, LT_EXEC_SHIM, Credentials{geteuid(), getegid(), {}}, {a.pid()},
                           Millis(5000));
  const auto spent = std::chrono::steady_clock::now() - start;
  pid_t tool = -1;
  fcntl(report[0], F_SETFL, O_NONBLOCK);
  const bool seized = read(report[0], &tool, sizeof tool) == sizeof tool;
  close(report[0]);
  // The tracer's end lets the tool's exit through to us: reap it.
  kill(tracer, SIGKILL);
  waitpid(tracer, nullptr, 0);
  if (seized) waitpid(tool, nullptr, 0);
  ASSERT_TRUE(seized) << "the tracer never seized the tool";
  ASSERT_EQ(stacks.size(), 1u);
  EXPECT_EQ(stacks[0].outcome, Outcome::kTimedOut) << stacks[0].note;
  EXPECT_LT(spent, std::chrono::seconds(60)) << "waited on a traced tool without a deadline";
}

TEST_F(StackSamplerTest, AToolWithoutFramesFallsBackToTheNext) {
  Sleeper a;
  StackTools tools;
  tools.eu_stack = Tool("echo 'eu-stack: cannot attach'; exit 2");
  tools.gdb = Tool("echo 'Thread 1 (Thread 0x7f (LWP 5)):'; echo '#0  nanosleep ()'; exit 0");
  auto stacks = TakeStacks(tools, LT_EXEC_SHIM, Credentials{geteuid(), getegid(), {}}, {a.pid()},
                           Millis(20'000));
  ASSERT_EQ(stacks.size(), 1u);
  EXPECT_EQ(stacks[0].outcome, Outcome::kTaken) << stacks[0].note;
  EXPECT_EQ(stacks[0].note, "gdb");
  EXPECT_EQ(stacks[0].text.rfind("Thread 1 (Thread 0x7f (LWP 5)):\n#0  nanosleep ()\n", 0), 0u)
      << stacks[0].text;

  tools.gdb.clear();
  stacks = TakeStacks(tools, LT_EXEC_SHIM, Credentials{geteuid(), getegid(), {}}, {a.pid()},
                      Millis(20'000));
  EXPECT_EQ(stacks[0].outcome, Outcome::kFailed);
  EXPECT_NE(stacks[0].note.find("eu-stack gave no frames (exit 2): eu-stack: cannot attach"),
            std::string::npos)
      << stacks[0].note;
}

}  // namespace
}  // namespace ltd::test
