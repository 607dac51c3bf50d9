// End-to-end test harness: a real ltd on a temp socket and state dir,
// driven through the real ltctl binary. Every wait has a deadline. On
// teardown it proves the test left nothing behind: no process carrying
// this test's marker, no zombie, no temp dir.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ltd::test {

using namespace std::chrono_literals;

struct CmdResult {
  int exit_code = -1;  // 128+N when killed by signal N
  std::string out;
  std::string err;
};

// Runs argv with extra env; kills it at the deadline (then exit_code 137).
// `started`, if given, is called with the pid right after the spawn.
CmdResult RunCommand(const std::vector<std::string>& argv,
                     const std::vector<std::string>& extra_env, std::chrono::milliseconds timeout,
                     const std::function<void(pid_t)>& started = nullptr);

// Polls `pred` every few ms until it holds or the deadline passes.
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

// Pids of live (non-zombie) processes whose environment has `marker` (K=V).
std::vector<pid_t> ProcessesWithMarker(const std::string& marker);
// Zombies whose parent is `parent`.
std::vector<pid_t> ZombieChildrenOf(pid_t parent);
bool ProcessAlive(pid_t pid);  // exists and is not a zombie
int CountOpenFds(pid_t pid);

std::string TestChildPath();
std::string LtdPath();
std::string LtctlPath();

class Daemon {
 public:
  // A fresh temp dir with socket and state dir; ltd is not started yet.
  Daemon();
  ~Daemon();  // stops ltd if running, removes the temp dir
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Starts ltd and waits until it answers; false with the log on failure.
  bool Start(std::vector<std::string> extra_args = {});
  // SIGTERM and wait for exit; returns ltd's exit code.
  int Stop(std::chrono::milliseconds timeout = 20s);
  void KillHard();  // SIGKILL, reaped
  pid_t pid() const { return pid_; }

  // ltctl with --socket and this test's marker in its environment, which
  // every rank inherits.
  CmdResult Ctl(std::vector<std::string> args, std::chrono::milliseconds timeout = 30s,
                std::vector<std::string> env = {}) const;
  // `show --json`; an empty object when ltctl fails (no such job yet).
  nlohmann::json Show(const std::string& job) const;
  // Waits until `show` reports the job in a final state.
  nlohmann::json WaitEnded(const std::string& job, std::chrono::milliseconds timeout = 30s) const;

  const std::string& dir() const { return dir_; }
  const std::string& socket() const { return socket_; }
  std::string state_dir() const { return dir_ + "/state"; }
  std::string log() const;
  std::string marker() const { return "LT_TEST_TAG=" + dir_; }

 private:
  std::string dir_;
  std::string socket_;
  pid_t pid_ = -1;
};

}  // namespace ltd::test
