#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace ltd::test {
namespace {

pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
            int out_fd, int err_fd) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
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

// ltd for a test: like Spawn, and SIGTERMed if the test process dies
// (an abort, a crash), so that even then ltd tears its jobs down.
pid_t SpawnDaemon(const std::vector<std::string>& argv, int log_fd) {
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(1);
  const int devnull = open("/dev/null", O_RDONLY);
  dup2(devnull, 0);
  dup2(log_fd, 1);
  dup2(log_fd, 2);
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

CmdResult RunCommand(const std::vector<std::string>& argv,
                     const std::vector<std::string>& extra_env, std::chrono::milliseconds timeout,
                     const std::function<void(pid_t)>& started) {
  CmdResult result;
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return result;
  const pid_t pid = Spawn(argv, extra_env, out[1], err[1]);
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

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
}

static char ProcState(pid_t pid, pid_t* ppid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const auto close_paren = stat.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= stat.size()) return 0;
  char state = stat[close_paren + 2];
  if (ppid != nullptr) *ppid = static_cast<pid_t>(std::atoi(stat.c_str() + close_paren + 4));
  return state;
}

std::vector<pid_t> ProcessesWithMarker(const std::string& marker) {
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0 || pid == getpid()) continue;
    const std::string env = ReadFile("/proc/" + std::to_string(pid) + "/environ");
    size_t start = 0;
    bool match = false;
    while (start < env.size()) {
      size_t end = env.find('\0', start);
      if (end == std::string::npos) end = env.size();
      if (env.compare(start, end - start, marker) == 0) match = true;
      start = end + 1;
    }
    if (match && ProcState(pid, nullptr) != 'Z') found.push_back(pid);
  }
  closedir(proc);
  return found;
}

std::vector<pid_t> ZombieChildrenOf(pid_t parent) {
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    pid_t ppid = 0;
    if (ProcState(pid, &ppid) == 'Z' && ppid == parent) found.push_back(pid);
  }
  closedir(proc);
  return found;
}

bool ProcessAlive(pid_t pid) {
  const char s = ProcState(pid, nullptr);
  return s != 0 && s != 'Z' && s != 'X';
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

Daemon::Daemon() {
  char tmpl[] = "/tmp/ltdtest.XXXXXX";
  if (mkdtemp(tmpl) != nullptr) dir_ = tmpl;
  socket_ = dir_ + "/ltd.sock";
}

Daemon::~Daemon() {
  if (pid_ > 0) Stop();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

bool Daemon::Start(std::vector<std::string> extra_args) {
  std::vector<std::string> argv = {LtdPath(),   "--socket",    socket_, "--state-dir",
                                   state_dir(), "--log-level", "debug"};
  bool has_devices = false;
  for (const auto& a : extra_args) has_devices = has_devices || a == "--devices" || a == "--gpus";
  if (!has_devices) argv.insert(argv.end(), {"--devices", "8"});
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  const int log =
      open((dir_ + "/ltd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_ = SpawnDaemon(argv, log);
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
        return s != "PENDING" && s != "RUNNING";
      },
      timeout);
  return j;
}

std::string Daemon::log() const { return ReadFile(dir_ + "/ltd.log"); }

}  // namespace ltd::test
