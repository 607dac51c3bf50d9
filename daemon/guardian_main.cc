// lt-guardian: outlives ltd by exactly one sweep. ltd starts it with the
// read end of a pipe as stdin; only ltd holds the write end, so EOF means
// ltd is gone (exited, crashed, SIGKILLed). Then it kills everything ltd
// named and exits:
//
//   lt-guardian --ltd-pid PID [--cgroup DIR] [--marker K=V]
//
//   --cgroup DIR   ltd's run cgroup: cgroup.kill on it, then remove it
//   --marker K=V   every process whose environment has this entry
//
// A clean ltd stop writes one 'x' before closing; the sweep still runs
// (it finds nothing) but says nothing.
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "cgroup_fs.h"
#include "process_scan.h"

namespace {

constexpr auto kSweepTimeout = std::chrono::seconds(5);

void Say(const std::string& line) {
  const std::string text = "lt-guardian: " + line + "\n";
  (void)!write(STDERR_FILENO, text.data(), text.size());
}

// Returns true when ltd said it stopped cleanly.
bool WaitForEof() {
  bool clean = false;
  char buf[64];
  for (;;) {
    const ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
    if (n > 0) {
      clean = clean || std::memchr(buf, 'x', static_cast<size_t>(n)) != nullptr;
    } else if (n == 0) {
      return clean;
    } else if (errno != EINTR) {
      Say(std::string("read(ltd pipe): ") + std::strerror(errno) + "; acting as if ltd died");
      return false;
    }
  }
}

// Kills and removes ltd's run cgroup; returns how many processes were in
// it, or -1 when there is no such cgroup (ltd did not use cgroups).
int SweepCgroup(const std::string& dir) {
  const int procs = ltd::CountCgroupProcs(dir);
  if (absl::Status s = ltd::KillCgroup(dir); !s.ok()) {
    if (absl::IsNotFound(s)) return -1;
    Say(std::string(s.message()));
    return procs;
  }
  const auto deadline = std::chrono::steady_clock::now() + kSweepTimeout;
  for (;;) {
    auto populated = ltd::CgroupPopulated(dir);
    if (!populated.ok() || !*populated) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      Say(dir + " did not empty within 5s of cgroup.kill");
      return procs;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (absl::Status s = ltd::RemoveCgroupTree(dir); !s.ok()) Say(std::string(s.message()));
  // ltd-<tag> goes too unless a newer ltd on the same state dir uses it.
  const std::string base = dir.substr(0, dir.rfind('/'));
  if (!base.empty()) rmdir(base.c_str());
  return procs;
}

// SIGKILLs every marked process until none is left; returns how many.
int SweepMarked(const std::string& marker) {
  const ltd::EnvMatch match = [&](const ltd::ProcEnviron& env) { return env.Has(marker); };
  int killed = 0;
  const auto deadline = std::chrono::steady_clock::now() + kSweepTimeout;
  for (;;) {
    killed += ltd::KillProcesses(match, 20);
    if (ltd::FindProcesses(match).empty()) return killed;
    if (std::chrono::steady_clock::now() >= deadline) {
      Say("processes marked " + marker + " still alive 5s after SIGKILL");
      return killed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string ltd_pid = "?", cgroup, marker;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) {
      Say("option " + arg +
          " needs a value; usage: lt-guardian --ltd-pid PID [--cgroup DIR] "
          "[--marker K=V]");
      return 2;
    }
    if (arg == "--ltd-pid") {
      ltd_pid = argv[++i];
    } else if (arg == "--cgroup") {
      cgroup = argv[++i];
    } else if (arg == "--marker") {
      marker = argv[++i];
    } else {
      Say("unknown argument " + arg);
      return 2;
    }
  }
  // A Ctrl-C or hangup meant for ltd's terminal must not end the guardian
  // first; it already runs in its own session.
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  // Hold nothing of ltd's: no socket, no cwd (a mount it could pin).
  if (chdir("/") != 0) Say(std::string("chdir(/): ") + std::strerror(errno));
  if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
    for (int fd = 3; fd < 1024; ++fd) close(fd);
  }

  const bool clean = WaitForEof();
  const int in_cgroup = cgroup.empty() ? -1 : SweepCgroup(cgroup);
  const int marked = marker.empty() ? 0 : SweepMarked(marker);
  const int total = std::max(in_cgroup, 0) + marked;
  if (!clean) {
    std::string what = std::to_string(marked) + " marked process(es)";
    if (in_cgroup >= 0)
      what = std::to_string(in_cgroup) + " process(es) in " + cgroup + ", " + what;
    Say("ltd (pid " + ltd_pid + ") is gone; killed its jobs: " + what);
  } else if (total > 0) {
    Say("ltd stopped with " + std::to_string(total) + " job process(es) alive; killed");
  }
  return 0;
}
