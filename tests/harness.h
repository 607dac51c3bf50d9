// End-to-end test harness: a real ltd on a temp socket and state dir,
// driven through the real ltctl binary. Every wait has a deadline. On
// teardown it proves the test left nothing behind: no process carrying
// this test's marker, no zombie, no temp dir.
#pragma once

#include <sys/resource.h>
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

// Who a command runs as: RunCommandAs forks, enters `cwd` while still
// root (so a directory the user may not enter can still be its working
// directory), sets the supplementary groups, then the gid, then the uid,
// and execs. `groups` as initgroups() would set them.
struct RunAs {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string cwd;  // empty: the test's own
  // A cgroup directory the command joins while still root, as a process
  // started in a delegated scope does (systemd-run --scope -p Delegate=yes).
  std::string cgroup;
};

CmdResult RunCommandAs(const RunAs& as, const std::vector<std::string>& argv,
                       const std::vector<std::string>& extra_env, std::chrono::milliseconds timeout,
                       const std::function<void(pid_t)>& started = nullptr);

// A throwaway local user for tests that need more than one: `useradd -m`
// on construction (its own group, home 0700), `userdel -r` on destruction,
// after every process of the user is gone. Needs root.
class TestUser {
 public:
  // `groups`: supplementary groups to put the user in (must exist).
  explicit TestUser(std::string name, const std::vector<std::string>& groups = {});
  ~TestUser();
  TestUser(const TestUser&) = delete;
  TestUser& operator=(const TestUser&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }  // why not ok
  const std::string& name() const { return name_; }
  uid_t uid() const { return uid_; }
  gid_t gid() const { return gid_; }
  const std::string& home() const { return home_; }
  // Runs as this user, in `cwd` (default: the user's home).
  RunAs As(std::string cwd = "") const;
  // Removes the user now; false (and why, in error()) if userdel failed.
  bool Remove();

 private:
  std::string name_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  std::string home_;
  bool ok_ = false;
  std::string error_;
};

// A 0755 temp dir that every user can reach, for the binaries and files
// the test's users need: the build tree may sit under a 0700 directory.
// Removed with everything in it on destruction.
class PublicDir {
 public:
  PublicDir();
  ~PublicDir();
  PublicDir(const PublicDir&) = delete;
  PublicDir& operator=(const PublicDir&) = delete;

  const std::string& path() const { return path_; }
  // Copies an executable in (mode 0755); returns its new path.
  std::string Copy(const std::string& from);

 private:
  std::string path_;
};

// `s` without the newlines and spaces it ends with (a command's output).
inline std::string TrimEnd(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The whole of the file at `path`; "" when it cannot be read.
std::string ReadWhole(const std::string& path);

inline bool Has(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Polls `pred` every few ms until it holds or the deadline passes.
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

// Pids of live (non-zombie) processes whose environment has `marker` (K=V).
std::vector<pid_t> ProcessesWithMarker(const std::string& marker);
// Zombies whose parent is `parent`.
std::vector<pid_t> ZombieChildrenOf(pid_t parent);
// Pids of live (non-zombie) processes whose real or effective uid is `uid`.
std::vector<pid_t> ProcessesOfUser(uid_t uid);
bool ProcessAlive(pid_t pid);  // exists and is not a zombie
// Live job supervisors (lt-shim) of the state dir `state_dir` (as ltd was
// given it), of job `job` only unless it is empty.
std::vector<pid_t> Supervisors(const std::string& state_dir, const std::string& job = "");
// The spare supervisors ltd keeps ready, not given a job (yet, or again).
std::vector<pid_t> SpareSupervisors(const std::string& state_dir);
// The spare once ltd has it ready: the only one, at SCHED_IDLE, which ltd
// sets after every fd it holds for it is open. 0 until then.
pid_t ReadySpare(const std::string& state_dir);
// Whether `pid` is one of the spares, ready (at SCHED_IDLE).
bool IsReadySpare(const std::string& state_dir, pid_t pid);
int CountOpenFds(pid_t pid);
// What those fds are, for a failure message: "socket x5, pipe x2, /dev/null".
std::string DescribeOpenFds(pid_t pid);

std::string TestChildPath();
std::string LtdPath();
std::string LtctlPath();

class Daemon {
 public:
  // A fresh temp dir with socket and state dir; ltd is not started yet.
  Daemon();
  // Stops ltd if running; after a KillHard that no Start followed, removes
  // what that ltd and its supervisors left (nobody else would: the next
  // ltd's start-up sweep would); removes the temp dir.
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Starts ltd and waits until it answers; false with the log on failure.
  bool Start(std::vector<std::string> extra_args = {});
  // SIGTERM and wait for exit; returns ltd's exit code.
  int Stop(std::chrono::milliseconds timeout = 20s);
  void KillHard();  // SIGKILL, reaped
  pid_t pid() const { return pid_; }
  // RLIMIT_NOFILE (soft and hard) for the next Start(); 0: inherited.
  void set_nofile_limit(rlim_t n) { nofile_ = n; }
  // The ltd binary the next Start() runs ("" : the build's); ltd finds its
  // helpers (lt-exec, lt-shim) beside it.
  void set_binary(std::string path) { binary_ = std::move(path); }
  // Runs in the forked child just before it execs ltd (set the environment
  // systemd would, pass fds); only async-signal-safe work and setenv.
  void set_child_setup(std::function<void()> fn) { child_setup_ = std::move(fn); }
  // Start() without the `--devices 8` it adds when neither --devices nor
  // --gpus is given: ltd picks its slots itself.
  void set_default_devices(bool on) { default_devices_ = on; }
  // Lets other users reach the socket (traverse the temp dir, 0711); the
  // temp dir is 0700 otherwise.
  void LetUsersConnect() const;

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
  rlim_t nofile_ = 0;
  std::string binary_;
  std::function<void()> child_setup_;
  bool default_devices_ = true;
  bool killed_hard_ = false;
  void RemoveLeftCgroups() const;  // by KillHard, and not started again since
};

}  // namespace ltd::test
