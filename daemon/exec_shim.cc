// lt-exec: the step between libuv's spawn and a rank's program. libuv has
// no pre-exec hook, so ltd spawns this instead, which puts the process in
// place and then execs the program in the same pid:
//
//   lt-exec [--cgroup DIR] [--user UID:GID] [--parent PID] -- PROGRAM [ARGS...]
//
// It joins the rank's cgroup while still root (a user may not move itself
// out of ltd's cgroup), becomes the submitting user with that user's
// groups, then dies with ltd (PR_SET_PDEATHSIG, set after the uid change,
// which clears it), and starts the program with default signal handling
// and only fds 0-3 open. When the
// program cannot run it says why on the heartbeat fd (`exec_failed ...`)
// and exits 127 (not found) or 126 (not executable), as a shell would.
#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr int kHeartbeatFd = 3;

[[noreturn]] void Fail(int code, const std::string& what) {
  const std::string line = "exec_failed " + what + "\n";
  (void)!write(kHeartbeatFd, line.data(), line.size());
  const std::string err = "lt-exec: " + what + "\n";
  (void)!write(STDERR_FILENO, err.data(), err.size());
  _exit(code);
}

void JoinCgroup(const char* dir) {
  const std::string procs = std::string(dir) + "/cgroup.procs";
  const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, "0\n", 2) != 2) {
    Fail(126, "cannot join cgroup " + std::string(dir) + ": " + std::strerror(errno));
  }
  close(fd);
}

void BecomeUser(uid_t uid, gid_t gid) {
  // The user's supplementary groups too: GPU device files are often
  // group-owned (video, render).
  const passwd* pw = getpwuid(uid);
  const int rc = pw != nullptr ? initgroups(pw->pw_name, gid) : setgroups(1, &gid);
  if (rc != 0)
    Fail(126, std::string("cannot set the groups of uid ") + std::to_string(uid) + ": " +
                  std::strerror(errno));
  if (setgid(gid) != 0) Fail(126, std::string("setgid: ") + std::strerror(errno));
  if (setuid(uid) != 0) Fail(126, std::string("setuid: ") + std::strerror(errno));
  if (getuid() != uid || geteuid() != uid) Fail(126, "setuid did not take");
}

void CloseExtraFds() {
  if (syscall(SYS_close_range, kHeartbeatFd + 1, ~0U, 0) == 0) return;
  // Kernels before 5.9: close what /proc lists, or a bounded range.
  const long max = sysconf(_SC_OPEN_MAX);
  for (long fd = kHeartbeatFd + 1; fd < (max > 0 ? max : 65536); ++fd) close(static_cast<int>(fd));
}

void ResetSignals() {
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    signal(sig, SIG_DFL);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  const char* cgroup = nullptr;
  long parent = 0;
  bool change_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  int i = 1;
  for (; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      ++i;
      break;
    }
    if (std::strcmp(argv[i], "--cgroup") == 0 && i + 1 < argc) {
      cgroup = argv[++i];
    } else if (std::strcmp(argv[i], "--user") == 0 && i + 1 < argc) {
      unsigned long u = 0, g = 0;
      if (std::sscanf(argv[++i], "%lu:%lu", &u, &g) != 2)
        Fail(126, "lt-exec: --user takes UID:GID");
      change_user = true;
      uid = static_cast<uid_t>(u);
      gid = static_cast<gid_t>(g);
    } else if (std::strcmp(argv[i], "--parent") == 0 && i + 1 < argc) {
      parent = std::strtol(argv[++i], nullptr, 10);
    } else {
      Fail(126, std::string("lt-exec: unknown argument ") + argv[i]);
    }
  }
  if (i >= argc) Fail(126, "lt-exec: no program given");

  if (cgroup != nullptr) JoinCgroup(cgroup);
  if (change_user) BecomeUser(uid, gid);
  // Die with ltd. If ltd died before this line, getppid() is no longer it.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
    Fail(126, std::string("prctl: ") + std::strerror(errno));
  }
  if (parent > 0 && getppid() != parent) _exit(137);
  ResetSignals();
  CloseExtraFds();

  execv(argv[i], argv + i);
  const int err = errno;
  Fail(err == ENOENT ? 127 : 126,
       std::string("cannot execute ") + argv[i] + ": " + std::strerror(err));
}
