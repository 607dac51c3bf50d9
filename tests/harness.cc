#include "harness.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "cgroup_fs.h"
#include "mount_scan.h"
#include "process_scan.h"
#include "state_tag.h"
#include "str_util.h"

extern char** environ;

namespace ltd::test {
namespace {

// This process's environment with `extra` on top: an extra K=V replaces
// an inherited K.
std::vector<std::string> EnvWith(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const std::string_view key = kv.substr(0, kv.find('=') + 1);
    const bool replaced = std::any_of(extra.begin(), extra.end(),
                                      [&](const std::string& x) { return x.starts_with(key); });
    if (!replaced) env.emplace_back(kv);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
            int out_fd, int err_fd) {
  const std::vector<std::string> env = EnvWith(extra_env);
  std::vector<char*> cargv = CStrings(argv), cenv = CStrings(env);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (out_fd >= 0) posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  if (err_fd >= 0) posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// Spawn as another user. Everything is prepared before the fork; the child
// makes system calls only (the test may have threads).
pid_t SpawnAs(const RunAs& as, const std::vector<std::string>& argv,
              const std::vector<std::string>& extra_env, int out_fd, int err_fd) {
  const std::vector<std::string> env = EnvWith(extra_env);
  std::vector<char*> cargv = CStrings(argv), cenv = CStrings(env);
  const std::string procs = as.cgroup.empty() ? "" : as.cgroup + "/cgroup.procs";
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int devnull = open("/dev/null", O_RDONLY);
  dup2(devnull, 0);
  if (out_fd >= 0) dup2(out_fd, 1);
  if (err_fd >= 0) dup2(err_fd, 2);
  if (!procs.empty()) {
    const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) _exit(120);
    close(fd);
  }
  if (!as.cwd.empty() && chdir(as.cwd.c_str()) != 0) _exit(121);
  if (setgroups(as.groups.size(), as.groups.data()) != 0) _exit(122);
  if (setgid(as.gid) != 0 || setuid(as.uid) != 0) _exit(123);
  if (getuid() != as.uid || geteuid() != as.uid) _exit(124);
  execve(cargv[0], cargv.data(), cenv.data());
  _exit(127);
}

// ltd for a test: like Spawn, and SIGTERMed if the test process dies
// (an abort, a crash), so that even then ltd tears its jobs down.
pid_t SpawnDaemon(const std::vector<std::string>& argv, int log_fd, rlim_t nofile,
                  const std::function<void()>& child_setup) {
  std::vector<char*> cargv = CStrings(argv);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(1);
  const int devnull = open("/dev/null", O_RDONLY);
  dup2(devnull, 0);
  dup2(log_fd, 1);
  dup2(log_fd, 2);
  if (nofile > 0) {
    const rlimit lim{nofile, nofile};
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) _exit(126);
  }
  if (child_setup) child_setup();
  execv(cargv[0], cargv.data());
  _exit(127);
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string TestChildPath() { return LT_TEST_CHILD; }
std::string LtdPath() { return LT_LTD; }
std::string LtctlPath() { return LT_LTCTL; }

namespace {

CmdResult Run(const RunAs* as, const std::vector<std::string>& argv,
              const std::vector<std::string>& extra_env, std::chrono::milliseconds timeout,
              const std::function<void(pid_t)>& started) {
  CmdResult result;
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return result;
  const pid_t pid = as != nullptr ? SpawnAs(*as, argv, extra_env, out[1], err[1])
                                  : Spawn(argv, extra_env, out[1], err[1]);
  close(out[1]);
  close(err[1]);
  if (started && pid > 0) started(pid);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool killed = false;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0 && pid > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      if (!killed) kill(pid, SIGKILL);
      killed = true;
      break;
    }
    if (poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000))) < 0 && errno != EINTR)
      break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(n));
      } else {
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  close(out[0]);
  close(err[0]);
  if (pid > 0) {
    int status = 0;
    // Output closed; the process is exiting. Bound the wait all the same.
    if (!WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 10s)) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    result.exit_code = DecodeStatus(status);
  }
  return result;
}

}  // namespace

CmdResult RunCommand(const std::vector<std::string>& argv,
                     const std::vector<std::string>& extra_env, std::chrono::milliseconds timeout,
                     const std::function<void(pid_t)>& started) {
  return Run(nullptr, argv, extra_env, timeout, started);
}

CmdResult RunCommandAs(const RunAs& as, const std::vector<std::string>& argv,
                       const std::vector<std::string>& extra_env, std::chrono::milliseconds timeout,
                       const std::function<void(pid_t)>& started) {
  return Run(&as, argv, extra_env, timeout, started);
}

TestUser::TestUser(std::string name, const std::vector<std::string>& groups)
    : name_(std::move(name)) {
  // A user of that name left by a test process that crashed goes first.
  if (getpwnam(name_.c_str()) != nullptr) RunCommand({"/usr/sbin/userdel", "-r", name_}, {}, 30s);
  std::vector<std::string> argv = {"/usr/sbin/useradd", "-m", "-s", "/bin/sh"};
  std::string list;
  for (const std::string& g : groups) list += (list.empty() ? "" : ",") + g;
  if (!list.empty()) argv.insert(argv.end(), {"-G", list});
  argv.push_back(name_);
  CmdResult r = RunCommand(argv, {}, 60s);
  if (r.exit_code != 0) {
    error_ = "useradd " + name_ + " exited " + std::to_string(r.exit_code) + ": " + r.err;
    return;
  }
  const passwd* pw = getpwnam(name_.c_str());
  if (pw == nullptr) {
    error_ = "useradd made no user " + name_;
    return;
  }
  uid_ = pw->pw_uid;
  gid_ = pw->pw_gid;
  home_ = pw->pw_dir;
  chmod(home_.c_str(), 0700);  // whatever login.defs says: a private home
  ok_ = true;
}

TestUser::~TestUser() { Remove(); }

RunAs TestUser::As(std::string cwd) const {
  RunAs as;
  as.uid = uid_;
  as.gid = gid_;
  as.cwd = cwd.empty() ? home_ : std::move(cwd);
  int n = 64;
  as.groups.resize(static_cast<size_t>(n));
  if (getgrouplist(name_.c_str(), gid_, as.groups.data(), &n) < 0) {
    as.groups.resize(static_cast<size_t>(n));
    getgrouplist(name_.c_str(), gid_, as.groups.data(), &n);
  }
  as.groups.resize(static_cast<size_t>(n));
  return as;
}

bool TestUser::Remove() {
  if (!ok_) return true;
  // userdel refuses while the user has processes: they go first.
  if (!WaitFor([&] { return ProcessesOfUser(uid_).empty(); }, 5s)) {
    for (pid_t pid : ProcessesOfUser(uid_)) kill(pid, SIGKILL);
    WaitFor([&] { return ProcessesOfUser(uid_).empty(); }, 5s);
  }
  CmdResult r = RunCommand({"/usr/sbin/userdel", "-r", name_}, {}, 60s);
  // -r complains (exit 12) about a missing mail spool; the user is gone all
  // the same, which is what counts.
  if (getpwnam(name_.c_str()) != nullptr) {
    error_ = "userdel " + name_ + " exited " + std::to_string(r.exit_code) + ": " + r.err;
    return false;
  }
  std::error_code ec;
  std::filesystem::remove_all(home_, ec);
  ok_ = false;
  return true;
}

PublicDir::PublicDir() {
  char tmpl[] = "/tmp/ltpub.XXXXXX";
  if (mkdtemp(tmpl) != nullptr) path_ = tmpl;
  chmod(path_.c_str(), 0755);
}

PublicDir::~PublicDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

std::string PublicDir::Copy(const std::string& from) {
  const std::string to = path_ + "/" + std::filesystem::path(from).filename().string();
  std::error_code ec;
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
  chmod(to.c_str(), 0755);
  return to;
}

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
}

// /proc as the start-up sweep reads it (containment/process_scan.h).
std::vector<pid_t> ProcessesWithMarker(const std::string& marker) {
  return FindProcesses([&](const ProcEnviron& env) { return env.Has(marker); });
}

std::vector<pid_t> ZombieChildrenOf(pid_t parent) {
  std::vector<pid_t> found;
  for (const ProcEntry& e : ListProcesses()) {
    if (e.state == 'Z' && e.ppid == parent) found.push_back(e.pid);
  }
  return found;
}

bool ProcessAlive(pid_t pid) {
  auto e = ReadProcEntry(pid);
  return e && e->state != 'Z' && e->state != 'X';
}

std::vector<pid_t> ProcessesOfUser(uid_t uid) {
  std::vector<pid_t> found;
  for (const ProcEntry& e : ListProcesses()) {
    if (e.state == 'Z' || e.state == 'X') continue;
    std::istringstream status(ReadFile("/proc/" + std::to_string(e.pid) + "/status"));
    bool mine = false;
    for (std::string line; std::getline(status, line);) {
      if (!line.starts_with("Uid:")) continue;
      std::istringstream ids(line.substr(4));
      long real = -1, effective = -1;
      ids >> real >> effective;
      mine = real == static_cast<long>(uid) || effective == static_cast<long>(uid);
    }
    if (mine) found.push_back(e.pid);
  }
  return found;
}

namespace {

// lt-shim processes on `state_dir` whose --job value satisfies `job_is`.
std::vector<pid_t> ShimsOf(const std::string& state_dir,
                           const std::function<bool(const std::string&)>& job_is) {
  std::vector<pid_t> found;
  for (const ProcEntry& e : ListProcesses()) {
    const pid_t pid = e.pid;
    if (ReadFile("/proc/" + std::to_string(pid) + "/comm") != "lt-shim\n") continue;
    const std::string cmdline = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
    std::vector<std::string> args;
    for (size_t start = 0; start < cmdline.size();) {
      size_t end = cmdline.find('\0', start);
      if (end == std::string::npos) end = cmdline.size();
      args.push_back(cmdline.substr(start, end - start));
      start = end + 1;
    }
    auto value = [&](const std::string& flag) -> std::optional<std::string> {
      for (size_t i = 0; i + 1 < args.size(); ++i) {
        if (args[i] == flag) return args[i + 1];
      }
      return std::nullopt;
    };
    const auto job = value("--job");
    if (value("--state-dir") == state_dir && job && job_is(*job) && ProcessAlive(pid)) {
      found.push_back(pid);
    }
  }
  return found;
}

}  // namespace

std::vector<pid_t> Supervisors(const std::string& state_dir, const std::string& job) {
  // A spare's --job is a placeholder of '_' until it has a job.
  return ShimsOf(state_dir, [&](const std::string& j) {
    return job.empty() ? !j.starts_with('_') : j == job;
  });
}

std::vector<pid_t> SpareSupervisors(const std::string& state_dir) {
  return ShimsOf(state_dir, [](const std::string& j) { return j.starts_with('_'); });
}

bool IsReadySpare(const std::string& state_dir, pid_t pid) {
  const std::vector<pid_t> spares = SpareSupervisors(state_dir);
  if (std::find(spares.begin(), spares.end(), pid) == spares.end()) return false;
  const int policy = sched_getscheduler(pid);
  return policy >= 0 && (policy & ~SCHED_RESET_ON_FORK) == SCHED_IDLE;
}

pid_t ReadySpare(const std::string& state_dir) {
  const std::vector<pid_t> spares = SpareSupervisors(state_dir);
  return spares.size() == 1 && IsReadySpare(state_dir, spares[0]) ? spares[0] : 0;
}

int CountOpenFds(pid_t pid) {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

std::string DescribeOpenFds(pid_t pid) {
  std::map<std::string, int> kinds;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::string target = std::filesystem::read_symlink(it->path(), ec).string();
    if (ec) continue;
    // "socket:[123]" and "pipe:[456]" by kind; "anon_inode:[eventfd]" and
    // files by name.
    if (const size_t bracket = target.find(":[");
        bracket != std::string::npos && std::isdigit(target[bracket + 2])) {
      target.resize(bracket);
    }
    ++kinds[target];
  }
  std::string out;
  for (const auto& [kind, n] : kinds) {
    if (!out.empty()) out += ", ";
    out += n > 1 ? kind + " x" + std::to_string(n) : kind;
  }
  return out;
}

Daemon::Daemon() {
  char tmpl[] = "/tmp/ltdtest.XXXXXX";
  if (mkdtemp(tmpl) != nullptr) dir_ = tmpl;
  socket_ = dir_ + "/ltd.sock";
}

Daemon::~Daemon() {
  if (pid_ > 0) Stop();
  if (killed_hard_) RemoveLeftCgroups();
  // A supervisor may still be writing its job's last record and log; the
  // temp dir goes once none is left (else it could recreate what
  // remove_all just removed, and the dir would stay behind).
  if (!dir_.empty()) {
    WaitFor(
        [&] { return Supervisors(state_dir()).empty() && SpareSupervisors(state_dir()).empty(); },
        10s);
  }
  // A mount left below the temp dir (a job's errors/ tmpfs) fails the
  // test, unless a KillHard left it for a next ltd that never came.
  if (!dir_.empty()) {
    for (const std::string& m : MountsUnder(dir_)) {
      if (!killed_hard_) ADD_FAILURE() << "a mount is left behind: " << m;
      umount2(m.c_str(), MNT_DETACH);
    }
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::vector<std::string> MountsUnder(const std::string& dir) {
  std::vector<std::string> found;
  std::istringstream lines(ReadWhole("/proc/self/mountinfo"));
  for (std::string line; std::getline(lines, line);) {
    const std::vector<std::string_view> fields = NonEmptyFields(line, ' ');
    if (fields.size() < 5) continue;
    const std::string point = UnescapeMountinfo(fields[4]);
    if (point == dir || point.rfind(dir + "/", 0) == 0) found.push_back(point);
  }
  std::sort(found.begin(), found.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return found;
}

void Daemon::LetUsersConnect() const { chmod(dir_.c_str(), 0711); }

void Daemon::RemoveLeftCgroups() const {
  auto own = OwnCgroupDir();
  if (!own.ok()) return;
  const std::string base = Cat(*own, "/ltd-", StateTag(state_dir()));
  if (access(base.c_str(), F_OK) != 0) return;
  (void)KillCgroup(base);
  WaitFor([&] { return !CgroupPopulated(base).value_or(false); }, 10s);
  EXPECT_TRUE(RemoveCgroupTree(base).ok()) << base;
}

bool Daemon::Start(std::vector<std::string> extra_args) {
  killed_hard_ = false;
  const std::string ltd = binary_.empty() ? LtdPath() : binary_;
  std::vector<std::string> argv = {ltd,         "--socket",    socket_, "--state-dir",
                                   state_dir(), "--log-level", "debug"};
  bool has_devices = false;
  for (const auto& a : extra_args) has_devices = has_devices || a == "--devices" || a == "--gpus";
  if (!has_devices && default_devices_) argv.insert(argv.end(), {"--devices", "8"});
  // Jobs end with ltd unless a test says otherwise: that nothing outlives
  // a test's ltd is what most of them check.
  bool has_window = false;
  for (const auto& a : extra_args) has_window = has_window || a == "--restore-window";
  if (!has_window) argv.insert(argv.end(), {"--restore-window", "0"});
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  const int log =
      open((dir_ + "/ltd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_ = SpawnDaemon(argv, log, nofile_, child_setup_);
  close(log);
  if (pid_ <= 0) return false;
  return WaitFor(
             [&] {
               int status = 0;
               if (waitpid(pid_, &status, WNOHANG) == pid_) {
                 pid_ = -1;
                 return true;  // died: report below
               }
               sockaddr_un addr{};
               addr.sun_family = AF_UNIX;
               std::strncpy(addr.sun_path, socket_.c_str(), sizeof addr.sun_path - 1);
               const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
               const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
               close(fd);
               return ok;
             },
             10s) &&
         pid_ > 0;
}

int Daemon::Stop(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  if (!WaitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, timeout)) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
  pid_ = -1;
  return DecodeStatus(status);
}

void Daemon::KillHard() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  killed_hard_ = true;
}

CmdResult Daemon::Ctl(std::vector<std::string> args, std::chrono::milliseconds timeout,
                      std::vector<std::string> env) const {
  std::vector<std::string> argv = {LtctlPath(), "--socket", socket_};
  argv.insert(argv.end(), args.begin(), args.end());
  env.push_back(marker());
  return RunCommand(argv, env, timeout);
}

nlohmann::json Daemon::Show(const std::string& job) const {
  // An empty object when there is no such job (yet): tests can poll it.
  CmdResult r = Ctl({"--json", "show", job});
  if (r.exit_code != 0) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

nlohmann::json Daemon::WaitEnded(const std::string& job, std::chrono::milliseconds timeout) const {
  nlohmann::json j;
  WaitFor(
      [&] {
        j = Show(job);
        if (!j.contains("state")) return false;  // not known (yet)
        const std::string s = j.value("state", "");
        return s != "PENDING" && s != "STARTING" && s != "RUNNING";
      },
      timeout);
  return j;
}

std::string Daemon::log() const { return ReadFile(dir_ + "/ltd.log"); }

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ltd::test
