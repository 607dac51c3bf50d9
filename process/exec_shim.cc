// lt-exec: the step between libuv's spawn and a rank's program. libuv has
// no pre-exec hook, so ltd spawns this instead, which puts the process in
// place and then execs the program in the same pid:
//
//   lt-exec [--cgroup DIR]... [--user UID:GID (--groups GID,...)... | --groups-fd 6]
//           [--rlimit R:SOFT:HARD]... [--parent PID]
//
// It runs as root with an empty environment, so nothing the user controls
// reaches code with more privilege than the user: glibc reads its own
// variables (GLIBC_TUNABLES; LD_* in a sanitized build, linked shared)
// before main(), and the user's environment is not lt-exec's. What to
// run comes on fd 4 (a sealed memfd ltd wrote), never in argv or environ:
//
//   CWD \0 ARGC \0 ARGV[0] \0 ... ENVC \0 ENV[0] \0 ...
//
// In order: join the rank's cgroups as root (its own, and the job's in
// each cgroup v1 hierarchy that holds a limit of it) (a user may not move itself out
// of ltd's cgroup); become the submitting user with that user's groups
// as the caller looked them up (`--groups`, or, when its lookup had not
// answered yet, `G,G,...` on fd 6 once it has: `--groups-fd 6`). lt-exec
// runs no NSS: it is linked statically (a rank's start costs a quarter
// less CPU), and glibc's NSS would load a second, shared glibc into it;
// die with ltd (PR_SET_PDEATHSIG, after the uid change, which clears it);
// then, as the user, enter the working directory and find the program in
// the user's PATH, so that the kernel checks the user's own permissions and
// no file the user may not see is ever looked at on their behalf; reset
// signals, keep only fds 0-3 and 5 (the stack pipe), and execve with the rank's environment. When
// the program cannot run it says why on the heartbeat fd (`exec_failed
// ...`) and exits 127 (not found) or 126 (cannot run), as a shell would.
//
// ltd may ask for automatic heartbeats (auto_instrument.h): lt-exec grants
// them, by the program it found and that file's `#!` line, read as the
// user, only to a program that runs Python or may start it.
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "auto_instrument.h"

namespace {

constexpr int kHeartbeatFd = 3;
constexpr int kSpecFd = 4;
constexpr int kStackFd = 5;   // exec_spec.h; kept for the program
constexpr int kGroupsFd = 6;  // exec_shim_args.h
// argv and environ together cannot exceed what execve takes; this bounds
// what lt-exec reads whatever fd 4 holds.
constexpr size_t kMaxSpec = 64u << 20;

[[noreturn]] void Fail(int code, const std::string& what) {
  const std::string line = "exec_failed " + what + "\n";
  (void)!write(kHeartbeatFd, line.data(), line.size());
  const std::string err = "lt-exec: " + what + "\n";
  (void)!write(STDERR_FILENO, err.data(), err.size());
  _exit(code);
}

struct Spec {
  std::string cwd;
  std::vector<std::string> argv;
  std::vector<std::string> env;
};

// All of `fd` up to its end, then closed; past `max` bytes, or when it
// cannot be read, lt-exec fails saying `too_large` or what it read (`what`).
std::string ReadToEnd(int fd, size_t max, const char* too_large, const char* what) {
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
      if (text.size() > max) Fail(126, too_large);
      continue;
    }
    if (n == 0) break;
    if (errno != EINTR) Fail(126, std::string("cannot read ") + what + ": " + std::strerror(errno));
  }
  close(fd);
  return text;
}

Spec ReadSpec() {
  const std::string raw = ReadToEnd(
      kSpecFd, kMaxSpec, "the program's arguments and environment are too large", "what to run");
  size_t at = 0;
  auto next = [&]() -> std::string {
    const size_t end = raw.find('\0', at);
    if (end == std::string::npos) Fail(126, "what to run is garbled; this is a bug of ltd");
    std::string field = raw.substr(at, end - at);
    at = end + 1;
    return field;
  };
  auto count = [&]() -> size_t {
    const std::string n = next();
    char* end = nullptr;
    const unsigned long v = std::strtoul(n.c_str(), &end, 10);
    if (n.empty() || *end != '\0' || v > raw.size()) Fail(126, "what to run is garbled");
    return v;
  };
  Spec spec;
  spec.cwd = next();
  for (size_t i = count(); i > 0; --i) spec.argv.push_back(next());
  for (size_t i = count(); i > 0; --i) spec.env.push_back(next());
  if (spec.argv.empty() || spec.argv.front().empty()) Fail(127, "no program given");
  return spec;
}

void JoinCgroup(const char* dir) {
  const std::string procs = std::string(dir) + "/cgroup.procs";
  const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, "0\n", 2) != 2) {
    Fail(126, "cannot join cgroup " + std::string(dir) + ": " + std::strerror(errno));
  }
  close(fd);
}

// `--groups G1,G2,...`: decimal gids, added to `groups` (a long list comes
// in several), at most the kernel's limit in all.
void ParseGroups(const char* list, std::vector<gid_t>& groups) {
  for (const char* at = list;;) {
    char* end = nullptr;
    errno = 0;
    const unsigned long g = std::strtoul(at, &end, 10);
    if (end == at || *at < '0' || *at > '9' || errno != 0 || g >= static_cast<gid_t>(-1) ||
        (*end != ',' && *end != '\0')) {
      Fail(126, "--groups takes GID,GID,...");
    }
    if (groups.size() >= NGROUPS_MAX) Fail(126, "more groups than the kernel takes");
    groups.push_back(static_cast<gid_t>(g));
    if (*end == '\0') return;
    at = end + 1;
  }
}

// `--groups-fd 6`: the caller's lookup writes `G,G,...` there once NSS
// has answered, then closes it; nothing when its lookup failed.
void ReadGroups(uid_t uid, std::vector<gid_t>& groups) {
  // The kernel's limit of gids, each at most ten digits and a comma.
  constexpr size_t kMaxText = NGROUPS_MAX * 11;
  const std::string text =
      ReadToEnd(kGroupsFd, kMaxText, "more groups than the kernel takes", "the groups");
  if (text.empty()) {
    Fail(126, "the supervisor could not look up the groups of uid " + std::to_string(uid) +
                  "; see its log");
  }
  ParseGroups(text.c_str(), groups);
}

// `groups` is what the caller looked up (LoginGroups in exec_shim_args.h).
void BecomeUser(uid_t uid, gid_t gid, const std::vector<gid_t>& groups) {
  // The user's supplementary groups too: GPU device files are often
  // group-owned (video, render), and so may the program be. A supervisor
  // of the release before --groups passes none, and left the lookup here.
  if (groups.empty()) {
    Fail(126,
         "--user needs --groups or --groups-fd (a supervisor older than this lt-exec "
         "passes neither; restart the job)");
  }
  const int rc = setgroups(groups.size(), groups.data());
  if (rc != 0)
    Fail(126, std::string("cannot set the groups of uid ") + std::to_string(uid) + ": " +
                  std::strerror(errno));
  if (setgid(gid) != 0) Fail(126, std::string("setgid: ") + std::strerror(errno));
  if (setuid(uid) != 0) Fail(126, std::string("setuid: ") + std::strerror(errno));
  if (getuid() != uid || geteuid() != uid) Fail(126, "setuid did not take");
  if (uid != 0 && setuid(0) == 0) Fail(126, "root could be regained after setuid");
}

// Keeps 0-3 and the stack pipe (kStackFd).
void CloseExtraFds() {
  close(kSpecFd);
  if (syscall(SYS_close_range, kStackFd + 1, ~0U, 0) == 0) return;
  // Kernels before 5.9.
  const long max = sysconf(_SC_OPEN_MAX);
  for (long fd = kStackFd + 1; fd < (max > 0 ? max : 65536); ++fd) close(static_cast<int>(fd));
}

// The signals this process ignores or catches, as the kernel lists them in
// /proc/self/status (bit N-1: signal N); nullopt without /proc.
std::optional<uint64_t> IgnoredOrCaught() {
  const int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[8192];
  size_t len = 0;
  for (ssize_t n; len < sizeof buf - 1 && (n = read(fd, buf + len, sizeof buf - 1 - len)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    len += static_cast<size_t>(n);
  }
  close(fd);
  const std::string_view text(buf, len);
  uint64_t set = 0;
  for (std::string_view key : {"\nSigIgn:\t", "\nSigCgt:\t"}) {
    const size_t at = text.find(key);
    if (at == std::string_view::npos || text.size() - at - key.size() < 16) return std::nullopt;
    uint64_t v = 0;
    for (char c : text.substr(at + key.size(), 16)) {
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return std::nullopt;
      v = v << 4 | static_cast<uint64_t>(d);
    }
    set |= v;
  }
  return set;
}

void ResetSignals() {
  // Across exec only an ignored signal keeps its disposition (a handler
  // cannot): those, by the kernel's list, go back to their default, not
  // every signal one call each (62 calls).
  const std::optional<uint64_t> set = IgnoredOrCaught();
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    if (set && sig <= 64 && (*set >> (sig - 1) & 1) == 0) continue;
    signal(sig, SIG_DFL);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

std::string_view EnvValue(const std::vector<std::string>& env, std::string_view key) {
  for (const std::string& kv : env) {
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=')
      return std::string_view(kv).substr(key.size() + 1);
  }
  return {};
}

// The start of the file at `path` (its `#!` line), as the user; empty
// when it cannot be read as a regular file.
std::string Head(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return {};
  std::string head;
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    char buf[256];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) head.assign(buf, static_cast<size_t>(n));
  }
  close(fd);
  return head;
}

// execve with the environment meant for this file: an automatic heartbeat
// request is granted or dropped here (see the top of the file).
void ExecAt(const std::string& path, char* const* argv, const Spec& spec,
            const std::vector<char*>& env) {
  if (!ltd::HasAutoHeartbeatRequest(spec.env)) {
    execve(path.c_str(), argv, env.data());
    return;
  }
  const std::vector<std::string> granted =
      ltd::ApplyAutoHeartbeat(spec.env, ltd::MayRunPython(path, Head(path)));
  std::vector<char*> envp;
  for (const std::string& e : granted) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  execve(path.c_str(), argv, envp.data());
}

// execve of the program as a shell finds it: a name with a slash as is
// (relative to the working directory), else the first match in the
// user's PATH. Returns only when nothing could be executed.
[[noreturn]] void Exec(const Spec& spec) {
  std::vector<char*> argv, env;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : spec.env) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);

  const std::string& program = spec.argv.front();
  int err = ENOENT;
  if (program.find('/') != std::string::npos) {
    ExecAt(program, argv.data(), spec, env);
    err = errno;
  } else {
    std::string_view path = EnvValue(spec.env, "PATH");
    if (path.empty()) path = "/usr/local/bin:/usr/bin:/bin";
    bool denied = false;
    for (;;) {
      const size_t colon = path.find(':');
      // An empty entry is the working directory, as in any shell.
      std::string full(path.substr(0, colon));
      if (full.empty()) full.push_back('.');
      full.push_back('/');
      full.append(program);
      ExecAt(full, argv.data(), spec, env);
      // Like execvp: keep looking past what is missing or forbidden here.
      if (errno == EACCES) {
        denied = true;
      } else if (errno != ENOENT && errno != ENOTDIR && errno != ENAMETOOLONG) {
        err = errno;
        break;
      }
      if (colon == std::string_view::npos) {
        err = denied ? EACCES : ENOENT;
        break;
      }
      path.remove_prefix(colon + 1);
    }
  }
  const int code = err == ENOENT || err == ENOTDIR ? 127 : 126;
  Fail(code, "cannot execute " + program + ": " + std::strerror(err));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<const char*> cgroups;
  long parent = 0;
  bool change_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  bool groups_later = false;
  std::vector<std::pair<int, rlimit>> limits;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cgroup") == 0 && i + 1 < argc) {
      cgroups.push_back(argv[++i]);
    } else if (std::strcmp(argv[i], "--user") == 0 && i + 1 < argc) {
      unsigned long u = 0, g = 0;
      if (std::sscanf(argv[++i], "%lu:%lu", &u, &g) != 2) Fail(126, "--user takes UID:GID");
      change_user = true;
      uid = static_cast<uid_t>(u);
      gid = static_cast<gid_t>(g);
    } else if (std::strcmp(argv[i], "--groups") == 0 && i + 1 < argc) {
      ParseGroups(argv[++i], groups);
    } else if (std::strcmp(argv[i], "--groups-fd") == 0 && i + 1 < argc) {
      if (std::strcmp(argv[++i], "6") != 0) Fail(126, "--groups-fd takes 6");
      groups_later = true;
    } else if (std::strcmp(argv[i], "--rlimit") == 0 && i + 1 < argc) {
      // RESOURCE:SOFT:HARD, the submitter's as ltd passes them on.
      int resource = -1;
      unsigned long long soft = 0, hard = 0;
      if (std::sscanf(argv[++i], "%d:%llu:%llu", &resource, &soft, &hard) != 3 || soft > hard) {
        Fail(126, "--rlimit takes RESOURCE:SOFT:HARD");
      }
      limits.push_back({resource, rlimit{soft, hard}});
    } else if (std::strcmp(argv[i], "--parent") == 0 && i + 1 < argc) {
      parent = std::strtol(argv[++i], nullptr, 10);
    } else {
      Fail(126, std::string("unknown argument ") + argv[i]);
    }
  }
  const Spec spec = ReadSpec();
  if (groups_later) ReadGroups(uid, groups);

  for (const char* cgroup : cgroups) JoinCgroup(cgroup);
  if (change_user) BecomeUser(uid, gid, groups);
  // The submitter's limits, never above ours (ltd chose the lower of the
  // two): lowering needs no privilege, and the rank cannot raise a hard one.
  for (const auto& [resource, lim] : limits) {
    if (setrlimit(static_cast<__rlimit_resource>(resource), &lim) != 0) {
      Fail(126, "setrlimit(" + std::to_string(resource) + "): " + std::strerror(errno));
    }
  }
  // ltd reads a hung rank's stack with gdb running as this same user; where
  // Yama restricts ptrace to ancestors, this rank lets its user's gdb in.
  // (Without Yama the call fails and nothing changes.)
  (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  // Die with ltd. If ltd died before this line, getppid() is no longer it.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
    Fail(126, std::string("prctl: ") + std::strerror(errno));
  }
  if (parent > 0 && getppid() != parent) _exit(137);
  // From here on, as the user.
  if (chdir(spec.cwd.c_str()) != 0) {
    Fail(126, "cannot enter the working directory " + spec.cwd + ": " + std::strerror(errno));
  }
  ResetSignals();
  CloseExtraFds();
  Exec(spec);
}
