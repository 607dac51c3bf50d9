// lt_test_child: the one program every integration and end-to-end test
// runs as its ranks. It performs a list of actions, chosen per rank:
//
//   lt_test_child [--rank R ACTIONS]... DEFAULT_ACTIONS
//
// ACTIONS is a comma-separated sequence, for example `beat:3:50,hang`:
//   exit:N          exit with code N
//   signal:N        die of signal N (raise it with default handling)
//   hang            sleep forever (SIGTERM ends it as usual)
//   ignore-term     ignore SIGTERM and SIGHUP from now on
//   sleep:MS        sleep MS milliseconds
//   spin:MS         burn MS milliseconds of CPU on the main thread
//   alloc:MB        allocate MB megabytes and touch every page
//   leak:BYTES      allocate BYTES and drop the only pointer to them
//   print:N         print N numbered lines to stdout
//   stderr:TEXT     one line to stderr
//   close-stdout    close stdout and stderr
//   beat:N:MS       N heartbeats "hb STEP", MS apart
//   line:TEXT       write TEXT and a newline to the heartbeat fd
//   escape          setsid + double fork: a grandchild outside the group
//                   that ignores SIGTERM and SIGHUP and sleeps forever
//   escape-scrubbed the same, the grandchild then `env -i sleep`: none of
//                   the job's environment (its markers) is left
//   escape-spew:MB  the same, the grandchild writing MB megabytes to
//                   stdout as fast as it can, then sleeping forever
//   fork:N          N children that sleep forever in the rank's group
//   stop            SIGSTOP itself
//   throw:TEXT      a thread throws std::runtime_error(TEXT) that nobody
//                   catches: std::terminate says so on stderr and aborts
//   env             print RANK WORLD_SIZE MASTER_ADDR MASTER_PORT ... lines
//   pidfile:PATH    append "PID\n" to PATH (grandchildren write theirs too)
//   waitfile:PATH   wait until PATH exists (the test says when to go on)
//   usr1log:PATH    from now on (and in children forked later) SIGUSR1
//                   appends "PID\n" to PATH instead of killing
//   tracer:PATH     fork a watcher (in the rank's group) that appends to
//                   PATH a line of the uids (real, effective, saved, fs)
//                   of each process it sees ptrace-attached to this one
//   fds             print "fds=0,1,2,3,5" (the open file descriptors)
//   ids             print "uid=U gid=G groups=G1,G2" (the kernel's order)
//   getenv:KEY      print "KEY=VALUE" (or "KEY=<unset>")
//   cwd             print "cwd=DIR" (the working directory, as the kernel has it)
//   signals         print "SigBlk: ..." and "SigIgn: ..." as the kernel lists
//                   this process's (/proc/self/status): what its starter may
//                   have passed on (its own handlers, a sanitizer's, are not)
//
//   lt_test_child argv ARGS...
//
// prints each of ARGS on a line of its own, as received, and exits 0: what
// the command line handed the program.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string pidfile;

void RecordPid() {
  if (pidfile.empty()) return;
  if (FILE* f = std::fopen(pidfile.c_str(), "a")) {
    std::fprintf(f, "%d\n", getpid());
    std::fclose(f);
  }
}

char usr1_log[4096];

void OnUsr1(int) {
  const int fd = open(usr1_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char buf[24];
  int n = 0;
  char digits[16];
  int d = 0;
  for (unsigned v = static_cast<unsigned>(getpid()); v != 0 || d == 0; v /= 10) {
    digits[d++] = static_cast<char>('0' + v % 10);
  }
  while (d > 0) buf[n++] = digits[--d];
  buf[n++] = '\n';
  (void)!write(fd, buf, static_cast<size_t>(n));
  close(fd);
}

// The numbers after `key` on the first line of /proc/PID/status that starts
// with it ("TracerPid:", "PPid:", "Uid:"); empty when there is none.
std::vector<long> StatusField(long pid, const char* key) {
  char file[64];
  std::snprintf(file, sizeof file, "/proc/%ld/status", pid);
  std::vector<long> values;
  FILE* f = std::fopen(file, "r");
  if (f == nullptr) return values;
  char line[256];
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, key, n) != 0) continue;
    char* at = line + n;
    for (char* end = nullptr;; at = end) {
      const long v = std::strtol(at, &end, 10);
      if (end == at) break;
      values.push_back(v);
    }
    break;
  }
  std::fclose(f);
  return values;
}

// A debugger stops every thread of what it attaches to, so the watching
// is done by a child, from outside. It appends each tracer's real,
// effective, saved and filesystem uids, a line a tracer it saw, until the
// rank is gone: an attach that lasts a few milliseconds may pass unseen
// on a loaded machine, so a test asks again until one is seen.
//
// While the kernel links or unlinks a tracer, /proc says TracerPid is the
// rank's real parent for an instant (ptrace_attach sets the flag before
// the link; __ptrace_unlink restores the parent before clearing the
// flag). The parent is ltd's supervisor, which never traces: that reading
// is skipped, and the watcher waits for the real tracer.
void WatchTracer(const std::string& path) {
  const long rank = getpid();
  const long parent = getppid();
  if (fork() != 0) return;
  long last = 0;
  for (;;) {
    const std::vector<long> tracer = StatusField(rank, "TracerPid:");
    if (tracer.empty()) _exit(0);  // the rank is gone
    const std::vector<long> tgid =
        tracer[0] > 0 ? StatusField(tracer[0], "Tgid:") : std::vector<long>{};
    const std::vector<long> uids =
        tracer[0] > 0 ? StatusField(tracer[0], "Uid:") : std::vector<long>{};
    if (tracer[0] != last && !tgid.empty() && tgid[0] != parent && uids.size() == 4) {
      last = tracer[0];
      if (FILE* out = std::fopen(path.c_str(), "a")) {
        std::fprintf(out, "%ld %ld %ld %ld\n", uids[0], uids[1], uids[2], uids[3]);
        std::fclose(out);
      }
    }
    // eu-stack is attached for a few milliseconds only: look again at once,
    // neither after a sleep nor a sched_yield (which hands the CPU to the
    // very tool it watches for), either of which could span the attach.
  }
}

[[noreturn]] void SleepForever() {
  for (;;) pause();
}

// How every path of this program ends: stdio flushed, then _exit. It
// stands in for a user's program, which ltd never builds with sanitizers;
// in a sanitized build, std::exit would run LeakSanitizer's check, which
// stops every thread to read their registers, and a teardown's SIGKILL
// (the rank beside it failed) cut short in the middle leaves a report of
// the sanitizer's own ("Unable to get registers from thread N"), not of
// any code of ltd's.
[[noreturn]] void End(int code) {
  std::fflush(nullptr);
  _exit(code);
}

// Memory nothing points to any more: what a leak checker would name.
[[gnu::noinline]] void Leak(size_t bytes) {
  char* volatile block = static_cast<char*>(std::malloc(bytes));
  if (block != nullptr) std::memset(block, 1, bytes);
  block = nullptr;
}

void Beat(long step) {
  char line[64];
  const int n = std::snprintf(line, sizeof line, "hb %ld\n", step);
  (void)!write(3, line, static_cast<size_t>(n));
}

// What the escapee does once outside the group: sleeps (`spew_mb` 0), or
// writes that many megabytes to stdout first; the rank goes on once the
// first is written, so that it exits while the escapee writes.
void Escape(bool scrub = false, long spew_mb = 0) {
  int written[2] = {-1, -1};
  if (spew_mb > 0 && pipe(written) != 0) End(99);
  const pid_t child = fork();
  if (child < 0) End(99);
  if (child > 0) {
    waitpid(child, nullptr, 0);
    if (spew_mb > 0) {
      close(written[1]);
      char c;
      (void)!read(written[0], &c, 1);
      close(written[0]);
    }
    return;
  }
  setsid();
  if (fork() != 0) _exit(0);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  RecordPid();
  if (spew_mb > 0) {
    close(written[0]);
    static char block[1 << 20];
    std::memset(block, 'y', sizeof block);
    for (size_t i = 63; i < sizeof block; i += 64) block[i] = '\n';
    for (long i = 0; i < spew_mb; ++i) {
      if (write(1, block, sizeof block) < 0) _exit(0);
      if (i == 0) close(written[1]);  // the rank goes on
    }
  }
  if (scrub) {
    execl("/usr/bin/env", "env", "-i", "/bin/sleep", "1000000", nullptr);
    _exit(127);
  }
  SleepForever();
}

void Run(const std::string& action) {
  const auto colon = action.find(':');
  const std::string verb = action.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : action.substr(colon + 1);
  if (verb == "exit") {
    End(std::atoi(arg.c_str()));
  } else if (verb == "signal") {
    const int sig = std::atoi(arg.c_str());
    std::fflush(stdout);
    signal(sig, SIG_DFL);
    raise(sig);
    SleepForever();
  } else if (verb == "throw") {
    std::fflush(stdout);
    std::thread([arg] { throw std::runtime_error(arg); }).join();
  } else if (verb == "hang") {
    std::fflush(stdout);
    SleepForever();
  } else if (verb == "leak") {
    Leak(static_cast<size_t>(std::atol(arg.c_str())));
  } else if (verb == "spin") {
    // CPU time, not wall time: a loaded machine makes it last longer.
    auto cpu = [] {
      timespec ts{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
    };
    const long long until = cpu() + std::atoll(arg.c_str());
    volatile unsigned sink = 0;
    while (cpu() < until) sink = sink + 1;
  } else if (verb == "ignore-term") {
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
  } else if (verb == "alloc") {
    // MB megabytes, every page touched: a job's memory limit kills it.
    const size_t bytes = static_cast<size_t>(std::atol(arg.c_str())) << 20;
    char* p = static_cast<char*>(std::malloc(bytes));
    if (p == nullptr) End(12);
    for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
    std::printf("allocated %s MB\n", arg.c_str());
    std::fflush(stdout);
  } else if (verb == "sleep") {
    usleep(static_cast<useconds_t>(std::atol(arg.c_str()) * 1000));
  } else if (verb == "print") {
    const long n = std::atol(arg.c_str());
    for (long i = 0; i < n; ++i) std::printf("line %ld of %ld\n", i, n);
    std::fflush(stdout);
  } else if (verb == "stderr") {
    std::fprintf(stderr, "%s\n", arg.c_str());
  } else if (verb == "close-stdout") {
    std::fflush(stdout);
    close(1);
    close(2);
  } else if (verb == "beat") {
    const long n = std::atol(arg.c_str());
    const auto c2 = arg.find(':');
    const long ms = c2 == std::string::npos ? 0 : std::atol(arg.c_str() + c2 + 1);
    for (long i = 0; i < n; ++i) {
      Beat(i);
      if (ms > 0) usleep(static_cast<useconds_t>(ms * 1000));
    }
  } else if (verb == "rlimits") {
    // The limits it runs with: nofile=SOFT:HARD nproc=SOFT:HARD.
    rlimit nofile{}, nproc{};
    getrlimit(RLIMIT_NOFILE, &nofile);
    getrlimit(RLIMIT_NPROC, &nproc);
    std::printf("nofile=%llu:%llu nproc=%llu:%llu\n",
                static_cast<unsigned long long>(nofile.rlim_cur),
                static_cast<unsigned long long>(nofile.rlim_max),
                static_cast<unsigned long long>(nproc.rlim_cur),
                static_cast<unsigned long long>(nproc.rlim_max));
  } else if (verb == "repeat") {
    // repeat:N:TEXT: TEXT as N heartbeat lines, in writes of many lines.
    const auto c2 = arg.find(':');
    const long n = std::atol(arg.c_str());
    const std::string line = (c2 == std::string::npos ? "" : arg.substr(c2 + 1)) + "\n";
    std::string chunk;
    for (long i = 0; i < n; ++i) {
      chunk += line;
      if (chunk.size() >= 65536 || i + 1 == n) {
        (void)!write(3, chunk.data(), chunk.size());
        chunk.clear();
      }
    }
  } else if (verb == "line") {
    const std::string line = arg + "\n";
    (void)!write(3, line.data(), line.size());
  } else if (verb == "escape") {
    Escape();
  } else if (verb == "escape-scrubbed") {
    Escape(/*scrub=*/true);
  } else if (verb == "escape-spew") {
    std::fflush(stdout);
    Escape(/*scrub=*/false, std::atol(arg.c_str()));
  } else if (verb == "fork") {
    const long n = std::atol(arg.c_str());
    for (long i = 0; i < n; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        RecordPid();
        SleepForever();
      }
      if (pid < 0) End(98);
    }
  } else if (verb == "ids") {
    std::vector<gid_t> groups(static_cast<size_t>(std::max(getgroups(0, nullptr), 0)));
    groups.resize(static_cast<size_t>(
        std::max(getgroups(static_cast<int>(groups.size()), groups.data()), 0)));
    std::string list;
    for (gid_t g : groups) list += (list.empty() ? "" : ",") + std::to_string(g);
    std::printf("uid=%u gid=%u groups=%s\n", getuid(), getgid(), list.c_str());
    std::fflush(stdout);
  } else if (verb == "stop") {
    raise(SIGSTOP);
  } else if (verb == "env") {
    for (const char* key : {"RANK",
                            "LOCAL_RANK",
                            "WORLD_SIZE",
                            "LOCAL_WORLD_SIZE",
                            "GROUP_RANK",
                            "NODE_RANK",
                            "ROLE_RANK",
                            "ROLE_WORLD_SIZE",
                            "GROUP_WORLD_SIZE",
                            "ROLE_NAME",
                            "MASTER_ADDR",
                            "MASTER_PORT",
                            "TORCHELASTIC_RUN_ID",
                            "TORCHELASTIC_RESTART_COUNT",
                            "TORCHELASTIC_MAX_RESTARTS",
                            "TORCHELASTIC_ERROR_FILE",
                            "OMP_NUM_THREADS",
                            "USE_LIBUV",
                            "PYTHONFAULTHANDLER",
                            "CUDA_VISIBLE_DEVICES",
                            "LT_JOB_ID",
                            "LT_HEARTBEAT_FD",
                            "LT_TEST_EXTRA"}) {
      const char* v = std::getenv(key);
      std::printf("%s=%s\n", key, v != nullptr ? v : "<unset>");
    }
    std::fflush(stdout);
  } else if (verb == "fds") {
    std::string list;
    DIR* dir = opendir("/proc/self/fd");
    std::vector<int> fds;
    while (dirent* e = dir != nullptr ? readdir(dir) : nullptr) {
      if (e->d_name[0] == '.' || std::atoi(e->d_name) == dirfd(dir)) continue;
      fds.push_back(std::atoi(e->d_name));
    }
    if (dir != nullptr) closedir(dir);
    std::sort(fds.begin(), fds.end());
    for (int fd : fds) {
      if (!list.empty()) list.push_back(',');
      list.append(std::to_string(fd));
    }
    std::printf("fds=%s\n", list.c_str());
    std::fflush(stdout);
  } else if (verb == "getenv") {
    const char* v = std::getenv(arg.c_str());
    std::printf("%s=%s\n", arg.c_str(), v != nullptr ? v : "<unset>");
    std::fflush(stdout);
  } else if (verb == "cwd") {
    char dir[4096];
    std::printf("cwd=%s\n", getcwd(dir, sizeof dir) != nullptr ? dir : "<unknown>");
    std::fflush(stdout);
  } else if (verb == "signals") {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
      if (line.starts_with("SigBlk:") || line.starts_with("SigIgn:")) {
        std::printf("%s\n", line.c_str());
      }
    }
    std::fflush(stdout);
  } else if (verb == "pidfile") {
    pidfile = arg;
    RecordPid();
  } else if (verb == "tracer") {
    WatchTracer(arg);
  } else if (verb == "usr1log") {
    std::snprintf(usr1_log, sizeof usr1_log, "%s", arg.c_str());
    signal(SIGUSR1, OnUsr1);
  } else if (verb == "waitfile") {
    while (access(arg.c_str(), F_OK) != 0) usleep(2000);
  } else {
    std::fprintf(stderr, "lt_test_child: unknown action '%s'\n", action.c_str());
    End(90);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "argv") == 0) {
    for (int i = 2; i < argc; ++i) std::printf("%s\n", argv[i]);
    End(0);
  }
  const char* rank_env = std::getenv("RANK");
  const std::string rank = rank_env != nullptr ? rank_env : "0";
  std::string defaults, mine;
  bool have_mine = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rank") == 0 && i + 2 < argc) {
      if (argv[i + 1] == rank) {
        mine = argv[i + 2];
        have_mine = true;
      }
      i += 2;
    } else {
      defaults = argv[i];
    }
  }
  const std::string actions = have_mine ? mine : defaults;
  size_t start = 0;
  while (start <= actions.size() && !actions.empty()) {
    size_t end = actions.find(',', start);
    if (end == std::string::npos) end = actions.size();
    Run(actions.substr(start, end - start));
    start = end + 1;
  }
  End(0);
}
