// The steps of rank_start.h, safe in a child that shares its parent's
// memory: raw system calls, buffers on the stack, no library call that
// may allocate, lock or set errno. Built without sanitizers (CMakeLists).
#include "rank_start.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>  // strerrordesc_np

namespace ltd {
namespace {

// A system call's result, or -errno: errno itself belongs to the thread
// whose memory this child shares.
#if defined(__x86_64__)
long Sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
  long ret;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                   : "rcx", "r11", "memory");
  return ret;
}
#elif defined(__aarch64__)
long Sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory");
  return x0;
}
#else
// Elsewhere only lt-exec, a process of its own, runs these steps
// (kRankChildSupported in rank_clone.h): errno is its own.
long Sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
  const long ret = syscall(n, a, b, c, d, e);
  return ret == -1 ? -errno : ret;
}
#endif

long L(const void* p) { return reinterpret_cast<long>(p); }

size_t Len(const char* s) {
  size_t n = 0;
  while (s[n] != '\0') ++n;
  return n;
}

void Copy(char* to, const char* from, size_t n) {
  for (size_t i = 0; i < n; ++i) to[i] = from[i];
}

bool HasSlash(const char* s) {
  for (; *s != '\0'; ++s)
    if (*s == '/') return true;
  return false;
}

// A line of at most a few KiB; longer text is cut and ends in "...".
class Text {
 public:
  Text& operator<<(std::string_view s) {
    for (char c : s) Put(c);
    return *this;
  }
  Text& operator<<(const char* s) { return *this << std::string_view(s, Len(s)); }
  Text& operator<<(unsigned long v) {
    char digits[24];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0) Put(digits[--n]);
    return *this;
  }
  Text& Error(long neg_errno) {
    const char* what = strerrordesc_np(static_cast<int>(-neg_errno));  // a table: no locale
    if (what != nullptr) return *this << what;
    return *this << "error " << static_cast<unsigned long>(-neg_errno);
  }
  std::string_view view() const { return {buf_, len_}; }

 private:
  void Put(char c) {
    if (len_ < sizeof buf_ - 3) {
      buf_[len_++] = c;
    } else if (len_ == sizeof buf_ - 3) {
      buf_[len_++] = '.', buf_[len_++] = '.', buf_[len_++] = '.';
    }
  }
  char buf_[2048];
  size_t len_ = 0;
};

void WriteAll(int fd, std::string_view a, std::string_view b) {
  char line[2200];
  size_t n = 0;
  for (std::string_view part : {a, b, std::string_view("\n")}) {
    for (char c : part)
      if (n < sizeof line) line[n++] = c;
  }
  (void)Sys(SYS_write, fd, L(line), static_cast<long>(n));
}

[[noreturn]] void Exit(int code) {
  for (;;) (void)Sys(SYS_exit_group, code);
}

[[noreturn]] void Fail(int code, const Text& what) {
  WriteAll(kRankHeartbeatFd, "exec_failed ", what.view());
  WriteAll(STDERR_FILENO, "ltd: ", what.view());
  Exit(code);
}

}  // namespace

void FailRankStart(int code, std::string_view what) {
  Text t;
  t << what;
  Fail(code, t);
}

namespace {

[[noreturn]] void Fail(int code, const char* what) { FailRankStart(code, what); }

void Close(int fd) { (void)Sys(SYS_close, fd); }

// Every fd but 0-3, the stack pipe and (when `keep_groups`) the groups'.
void CloseExtraFds(bool keep_groups) {
  Close(4);
  if (!keep_groups) Close(kRankGroupsFd);
  if (Sys(SYS_close_range, kRankGroupsFd + 1, ~0U, 0) == 0) return;
  // Kernels before 5.9: up to the limit on fds (at most a million).
  rlimit nofile{};
  long max = Sys(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, L(&nofile)) == 0 ? nofile.rlim_cur : 65536;
  if (max > (1L << 20)) max = 1L << 20;
  for (long fd = kRankGroupsFd + 1; fd < max; ++fd) Close(static_cast<int>(fd));
}

void ReadGroups(const RankStart& s, size_t* count) {
  size_t len = 0;
  for (;;) {
    const long n = Sys(SYS_read, kRankGroupsFd, L(s.groups_text + len),
                       static_cast<long>(kMaxGroupsText + 1 - len));
    if (n == -EINTR) continue;
    if (n < 0) {
      Text t;
      t << "cannot read the groups: ";
      Fail(126, t.Error(n));
    }
    if (n == 0) break;
    len += static_cast<size_t>(n);
    if (len > kMaxGroupsText) Fail(126, "more groups than the kernel takes");
  }
  Close(kRankGroupsFd);
  if (len == 0) {
    Text t;
    Fail(126, t << "the supervisor could not look up the groups of uid "
                << static_cast<unsigned long>(s.uid) << "; see its log");
  }
  switch (ParseGroupList(s.groups_text, len, s.groups_read, kMaxGroups, count)) {
    case GroupListError::kNone:
      return;
    case GroupListError::kTooMany:
      Fail(126, "more groups than the kernel takes");
    case GroupListError::kBad:
      Fail(126, "--groups takes GID,GID,...");
  }
}

void JoinCgroup(const char* procs) {
  const long fd = Sys(SYS_openat, AT_FDCWD, L(procs), O_WRONLY | O_CLOEXEC);
  long rc = fd;
  if (fd >= 0) {
    rc = Sys(SYS_write, fd, L("0\n"), 2);
    Close(static_cast<int>(fd));
  }
  if (rc < 0) {
    std::string_view dir(procs, Len(procs));
    if (dir.ends_with("/cgroup.procs")) dir.remove_suffix(13);
    Text t;
    t << "cannot join cgroup " << dir << ": ";
    Fail(126, t.Error(rc));
  }
}

void BecomeUser(const RankStart& s, const gid_t* groups, size_t count) {
  // The user's supplementary groups too: GPU device files are often
  // group-owned (video, render), and so may the program be.
  if (count == 0) {
    Fail(126,
         "--user needs --groups or --groups-fd (a supervisor older than this lt-exec "
         "passes neither; restart the job)");
  }
  const unsigned long uid = s.uid;
  if (long rc = Sys(SYS_setgroups, static_cast<long>(count), L(groups)); rc != 0) {
    Text t;
    t << "cannot set the groups of uid " << uid << ": ";
    Fail(126, t.Error(rc));
  }
  if (long rc = Sys(SYS_setresgid, s.gid, s.gid, s.gid); rc != 0) {
    Text t;
    Fail(126, (t << "setgid: ").Error(rc));
  }
  if (long rc = Sys(SYS_setresuid, s.uid, s.uid, s.uid); rc != 0) {
    Text t;
    Fail(126, (t << "setuid: ").Error(rc));
  }
  if (Sys(SYS_getuid) != static_cast<long>(s.uid) || Sys(SYS_geteuid) != static_cast<long>(s.uid))
    Fail(126, "setuid did not take");
  if (s.uid != 0 && Sys(SYS_setresuid, 0, 0, 0) == 0)
    Fail(126, "root could be regained after setuid");
  // No other process of the user may look into this one until its execve:
  // a launcher's child still shares the supervisor's memory. (The uid
  // change sets it so unless fs.suid_dumpable says 1.)
  (void)Sys(SYS_prctl, PR_SET_DUMPABLE, 0);
}

// The signals this process ignores or catches, as the kernel lists them in
// /proc/self/status (bit N-1: signal N); every signal without /proc.
uint64_t IgnoredOrCaught() {
  const long fd = Sys(SYS_openat, AT_FDCWD, L("/proc/self/status"), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ~uint64_t{0};
  char buf[8192];
  size_t len = 0;
  while (len < sizeof buf) {
    const long n = Sys(SYS_read, fd, L(buf + len), static_cast<long>(sizeof buf - len));
    if (n == -EINTR) continue;
    if (n <= 0) break;
    len += static_cast<size_t>(n);
  }
  Close(static_cast<int>(fd));
  const std::string_view text(buf, len);
  uint64_t set = 0;
  for (std::string_view key : {std::string_view("\nSigIgn:\t"), std::string_view("\nSigCgt:\t")}) {
    const size_t at = text.find(key);
    if (at == std::string_view::npos || text.size() - at - key.size() < 16) return ~uint64_t{0};
    uint64_t v = 0;
    for (char c : text.substr(at + key.size(), 16)) {
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return ~uint64_t{0};
      v = v << 4 | static_cast<uint64_t>(d);
    }
    set |= v;
  }
  return set;
}

// The kernel's struct sigaction (with sa_restorer: x86-64, arm64).
struct KernelSigaction {
  void* handler = nullptr;  // SIG_DFL
  unsigned long flags = 0;
  void* restorer = nullptr;
  uint64_t mask = 0;
};

void ResetSignals() {
  // Across exec only an ignored signal keeps its disposition; a caught one
  // must go back too before signals are unblocked, or the starter's
  // handler would run here.
  const uint64_t set = IgnoredOrCaught();
  const KernelSigaction dfl;
  for (int sig = 1; sig <= 64; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP || (set >> (sig - 1) & 1) == 0) continue;
    (void)Sys(SYS_rt_sigaction, sig, L(&dfl), 0, sizeof dfl.mask);
  }
  const uint64_t none = 0;
  (void)Sys(SYS_rt_sigprocmask, SIG_SETMASK, L(&none), 0, sizeof none);
}

std::string_view Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool IsPythonName(std::string_view name) {
  if (!name.starts_with("python")) return false;
  for (char c : name.substr(6))
    if ((c < '0' || c > '9') && c != '.') return false;
  return true;
}

bool IsWrapperName(std::string_view name) {
  static constexpr std::string_view kWrappers[] = {
      "sh",    "bash",    "dash",    "zsh",    "ksh",     "mksh", "env",    "nice",
      "nohup", "numactl", "taskset", "stdbuf", "timeout", "chrt", "ionice", "setsid"};
  for (std::string_view w : kWrappers)
    if (w == name) return true;
  return false;
}

// The interpreter a `#!` line names, looking through `env [-S] [-opts]`.
std::string_view ShebangProgram(std::string_view head) {
  if (!head.starts_with("#!")) return {};
  head.remove_prefix(2);
  head = head.substr(0, head.find('\n'));
  auto next_word = [&]() {
    const size_t start = head.find_first_not_of(" \t\r");
    if (start == std::string_view::npos) return std::string_view();
    head.remove_prefix(start);
    const size_t end = head.find_first_of(" \t\r");
    std::string_view word = head.substr(0, end);
    head.remove_prefix(word.size());
    return word;
  };
  std::string_view program = next_word();
  if (Basename(program) != "env") return program;
  for (std::string_view word = next_word(); !word.empty(); word = next_word()) {
    if (word.starts_with("-")) continue;                     // -S, -i, -u NAME is rare
    if (word.find('=') != std::string_view::npos) continue;  // NAME=VALUE
    return word;
  }
  return program;
}

// execve with the environment meant for the file at `path`: an automatic
// heartbeat request granted by its name or `#!` line (read as the user),
// or dropped. Returns -errno.
long ExecAt(const char* path, const RankStart& s) {
  if (s.env_granted == nullptr) return Sys(SYS_execve, L(path), L(s.argv), L(s.env));
  char head[256];
  long n = 0;
  const long fd = Sys(SYS_openat, AT_FDCWD, L(path), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd >= 0) {
    struct stat st {};
    if (Sys(SYS_fstat, fd, L(&st)) == 0 && S_ISREG(st.st_mode))
      n = Sys(SYS_read, fd, L(head), sizeof head);
    Close(static_cast<int>(fd));
  }
  const std::string_view start(head, n > 0 ? static_cast<size_t>(n) : 0);
  const bool python = MayRunPython(std::string_view(path, Len(path)), start);
  return Sys(SYS_execve, L(path), L(s.argv), L(python ? s.env_granted : s.env_dropped));
}

// execve of the program as a shell finds it: a name with a slash as is
// (relative to the working directory), else the first match in PATH.
[[noreturn]] void Exec(const RankStart& s) {
  const char* program = s.argv[0];
  long err = -ENOENT;
  if (HasSlash(program)) {
    err = ExecAt(program, s);
  } else {
    bool denied = false;
    for (const char* dir = s.path;;) {
      const char* end = dir;
      while (*end != '\0' && *end != ':') ++end;
      // An empty entry is the working directory, as in any shell.
      char full[PATH_MAX];
      const size_t dir_len = end == dir ? 1 : static_cast<size_t>(end - dir);
      const size_t prog_len = Len(program);
      long rc = -ENAMETOOLONG;
      if (dir_len + 1 + prog_len < sizeof full) {
        Copy(full, end == dir ? "." : dir, dir_len);
        full[dir_len] = '/';
        Copy(full + dir_len + 1, program, prog_len + 1);
        rc = ExecAt(full, s);
      }
      // Like execvp: keep looking past what is missing or forbidden here.
      if (rc == -EACCES) {
        denied = true;
      } else if (rc != -ENOENT && rc != -ENOTDIR && rc != -ENAMETOOLONG) {
        err = rc;
        break;
      }
      if (*end == '\0') {
        err = denied ? -EACCES : -ENOENT;
        break;
      }
      dir = end + 1;
    }
  }
  Text t;
  t << "cannot execute " << program << ": ";
  Fail(err == -ENOENT || err == -ENOTDIR ? 127 : 126, t.Error(err));
}

}  // namespace

GroupListError ParseGroupList(const char* text, size_t len, gid_t* out, size_t capacity,
                              size_t* count) {
  const char* at = text;
  const char* const end = text + len;
  for (;;) {
    const char* digits = at;
    uint64_t g = 0;
    while (at < end && *at >= '0' && *at <= '9' && g < (uint64_t{1} << 32))
      g = g * 10 + (*at++ - '0');
    if (at == digits || g >= static_cast<gid_t>(-1) || (at < end && *at != ',')) {
      return GroupListError::kBad;
    }
    if (*count >= capacity) return GroupListError::kTooMany;
    out[(*count)++] = static_cast<gid_t>(g);
    if (at == end) return GroupListError::kNone;
    ++at;  // the comma
  }
}

bool MayRunPython(std::string_view path, std::string_view head) {
  const std::string_view name = Basename(path);
  if (IsPythonName(name) || IsWrapperName(name)) return true;
  const std::string_view interpreter = Basename(ShebangProgram(head));
  return !interpreter.empty() && (IsPythonName(interpreter) || IsWrapperName(interpreter));
}

void StartRank(const RankStart& s) {
  if (s.argv == nullptr || s.argv[0] == nullptr || s.argv[0][0] == '\0')
    Fail(127, "no program given");
  size_t read_count = 0;
  if (s.groups_later) ReadGroups(s, &read_count);
  CloseExtraFds(/*keep_groups=*/false);
  for (size_t i = 0; i < s.cgroup_count; ++i) JoinCgroup(s.cgroup_procs[i]);
  if (s.change_user) {
    if (s.groups_later) {
      BecomeUser(s, s.groups_read, read_count);
    } else {
      BecomeUser(s, s.groups, s.group_count);
    }
  }
  // The submitter's limits, never above ours (ltd chose the lower of the
  // two): lowering needs no privilege, and the rank cannot raise a hard one.
  for (size_t i = 0; i < s.limit_count; ++i) {
    const RankLimit& l = s.limits[i];
    if (long rc = Sys(SYS_prlimit64, 0, l.resource, L(&l.limit), 0); rc != 0) {
      Text t;
      t << "setrlimit(" << static_cast<unsigned long>(l.resource) << "): ";
      Fail(126, t.Error(rc));
    }
  }
  // ltd reads a hung rank's stack with gdb running as this same user; where
  // Yama restricts ptrace to ancestors, this rank lets its user's gdb in
  // (its execve makes it dumpable again). Without Yama nothing changes.
  (void)Sys(SYS_prctl, PR_SET_PTRACER, static_cast<long>(PR_SET_PTRACER_ANY));
  // Die with the supervisor. If it died before this line, it is no longer
  // the parent.
  if (long rc = Sys(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL); rc != 0) {
    Text t;
    Fail(126, (t << "prctl: ").Error(rc));
  }
  if (s.parent > 0 && Sys(SYS_getppid) != s.parent) Exit(137);
  // From here on, as the user.
  if (long rc = Sys(SYS_chdir, L(s.cwd)); rc != 0) {
    Text t;
    t << "cannot enter the working directory " << s.cwd << ": ";
    Fail(126, t.Error(rc));
  }
  ResetSignals();
  Exec(s);
}

int RankChildMain(void* arg) {
  const auto* args = static_cast<const RankChildArgs*>(arg);
  const RankFds& fds = args->fds;
  const RankStart& s = *args->start;
  // What fails here fails before the heartbeat fd is the rank's: only its
  // exit status, 126, says so. (Where the supervisor had no fd 0,
  // /dev/null lands there itself.)
  const long null = Sys(SYS_openat, AT_FDCWD, L("/dev/null"), O_RDONLY);
  if (null < 0) Exit(126);
  if (null != STDIN_FILENO) {
    if (Sys(SYS_dup3, null, STDIN_FILENO, 0) < 0) Exit(126);
    Close(static_cast<int>(null));
  }
  const int moves[][2] = {{fds.heartbeat, kRankHeartbeatFd},
                          {fds.stdout_fd, STDOUT_FILENO},
                          {fds.stderr_fd, STDERR_FILENO},
                          {fds.stack, kRankStackFd},
                          {fds.groups, kRankGroupsFd}};
  for (const auto& [from, to] : moves) {
    if (from >= 0 && Sys(SYS_dup3, from, to, 0) < 0) Exit(126);
  }
  // Nothing else of the supervisor's stays open here while a later step
  // waits (for the groups, or on the user's file system).
  CloseExtraFds(/*keep_groups=*/fds.groups >= 0);
  if (Sys(SYS_setsid) < 0) Fail(126, "cannot start a session");
  StartRank(s);
}

}  // namespace ltd
