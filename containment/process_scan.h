// Processes as /proc shows them. The subreaper fallback, lt-guardian and
// the start-up sweep know a job's processes by the markers they inherit in
// their environment (LT_JOB_ID, LT_DAEMON_TAG), which survive setsid(),
// double forks and reparenting; only exec with a scrubbed environment
// loses them, which is why the cgroup mode is preferred.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proc_dir.h"

namespace ltd {

struct ProcEntry {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t session = 0;
  char state = 0;  // R, S, D, T, Z, ... as in /proc/PID/stat
  // Clock ticks after boot it started at: with the pid, names one process
  // for good (a pid is reused, never with the same start time).
  uint64_t start_time = 0;
  // CPU time it used, user and system, in clock ticks (utime + stime).
  uint64_t cpu_ticks = 0;
};

// Where a process sleeps in the kernel: /proc/PID/wchan ("" when it
// runs, or cannot be read), and its kernel stack, /proc/PID/stack (root
// only; "" when it cannot be read), at most `max` bytes.
std::string ReadWchan(pid_t pid);
std::string ReadKernelStack(pid_t pid, size_t max = 4096);
// The same through a ProcDir: of that process for certain.
std::string ReadWchan(const ProcDir& dir);
std::string ReadKernelStack(const ProcDir& dir, size_t max = 4096);

// /proc/PID/stat of one process; nullopt once it is gone.
std::optional<ProcEntry> ReadProcEntry(pid_t pid);
std::optional<ProcEntry> ReadProcEntry(const ProcDir& dir);
// /proc/PID/task/PID/stat: the process's main thread alone (its CPU time
// is that thread's, not the sum over its threads); nullopt once it is gone.
std::optional<ProcEntry> ReadMainThreadEntry(pid_t pid);
// Every process in /proc.
std::vector<ProcEntry> ListProcesses();

// A process's environment as it was at exec (/proc/PID/environ).
class ProcEnviron {
 public:
  // nullopt when it cannot be read: gone, a zombie, a kernel thread, or
  // another user's process and we are not root.
  static std::optional<ProcEnviron> Read(pid_t pid);
  explicit ProcEnviron(std::string raw) : raw_(std::move(raw)) {}

  // Whether one of its entries is exactly `entry` ("K=V").
  bool Has(std::string_view entry) const;
  // Whether one of its entries starts with `prefix` ("K=V-prefix").
  bool HasPrefix(std::string_view prefix) const;

 private:
  bool Any(const std::function<bool(std::string_view)>& pred) const;
  std::string raw_;  // NUL-separated K=V entries
};

using EnvMatch = std::function<bool(const ProcEnviron&)>;

// Live processes (zombies excluded, this process too) whose environment
// matches.
std::vector<pid_t> FindProcesses(const EnvMatch& match);

// SIGKILLs every matching process, and again whatever a later scan finds
// that was not signalled yet (children forked meanwhile), until a scan
// finds nobody new or after `max_rounds` scans. Returns how many were
// signalled. Does not wait for them to die.
int KillProcesses(const EnvMatch& match, int max_rounds);

}  // namespace ltd
