// The process layer as a job's supervisor (supervisor/job_runner) sees it.
// Only implementations of this interface create, signal and reap
// processes; the supervisor decides when. Tests inject a fake launcher
// with made-up pids.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "job_limits.h"
#include "user_files.h"

namespace ltd {

enum class Stream { kStdout, kStderr };

struct ExitStatus {
  int exit_code = 0;    // valid when term_signal == 0
  int term_signal = 0;  // the signal that killed it, or 0
};

struct SpawnRequest {
  std::string job_id;
  int rank = 0;
  std::vector<std::string> argv;  // argv[0] already resolved to a path
  std::vector<std::string> env;   // K=V
  std::string cwd;
  uid_t uid = 0;
  gid_t gid = 0;
  // RLIMIT_*, soft, hard: set just before the program runs (none: as the
  // launcher's own).
  std::vector<std::tuple<int, uint64_t, uint64_t>> rlimits;
};

// "S (sleeping)" for /proc's state letter 'S'; "" for 0.
inline std::string StateWords(char state) {
  switch (state) {
    case 'R':
      return "R (running)";
    case 'S':
      return "S (sleeping)";
    case 'D':
      return "D (uninterruptible sleep)";
    case 'T':
      return "T (stopped)";
    case 't':
      return "t (stopped by a tracer)";
    case 'Z':
      return "Z (zombie)";
    case 'X':
      return "X (dead)";
    case 'I':
      return "I (idle)";
    case 0:
      return "";
    default:
      return std::string(1, state >= 0x20 && state < 0x7f ? state : '?');
  }
}

// A rank's process that is still there after SIGKILL (in the kernel's
// uninterruptible sleep, or frozen), as /proc shows it.
struct StuckProcess {
  pid_t pid = 0;
  int rank = -1;             // Leftovers: the rank whose cgroup holds it; -1 when not known
  char state = 0;            // /proc/PID/stat's: D, or R, S ... of a frozen one
  uint64_t start_time = 0;   // ProcEntry::start_time: the pid's for good
  std::string wchan;         // where it sleeps in the kernel, when it can be read
  std::string kernel_stack;  // /proc/PID/stack, when it can be read (root)
};

// Callbacks run on the loop thread. `on_exit` comes once, after the
// process is reaped and everything it wrote to its pipes was delivered.
struct RankCallbacks {
  std::function<void(Stream, std::string_view)> on_output;
  std::function<void(std::string_view)> on_control;  // heartbeat fd bytes
  std::function<void(ExitStatus)> on_exit;
};

class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;

  // How jobs are contained: "cgroup", "subreaper" or "process-group".
  virtual std::string_view containment() const = 0;

  // The job's next attempt runs its ranks as uid:gid with supplementary
  // `groups` (none: the user's login groups, which a launcher may look up
  // now, ahead of the attempt's first spawn).
  virtual void ExpectUser(uid_t uid, gid_t gid, const std::optional<std::vector<gid_t>>& groups) {
    (void)uid;
    (void)gid;
    (void)groups;
  }

  // Prepares what holds a job's processes (its cgroup, say), for each
  // attempt of the job, with `limits` set; fails in one line when they
  // cannot be.
  virtual absl::Status BeginJob(const std::string& job_id, const JobLimits& limits) = 0;
  // How many processes of the job (of rank `rank`, with --mem-per-rank)
  // the OOM killer killed in this attempt; nullopt without a memory limit.
  virtual std::optional<uint64_t> OomKills(const std::string& job_id, int rank) {
    (void)job_id;
    (void)rank;
    return std::nullopt;
  }

  virtual absl::StatusOr<pid_t> Spawn(const SpawnRequest& request, RankCallbacks callbacks) = 0;

  // Ranks are named by job and rank, never by pid: a launcher holds each
  // rank's process through a pidfd from its spawn until it is reaped, so it
  // can never signal a process (or group) whose number was reused. Once a
  // rank is reaped these do nothing.

  // Sends `sig` to the rank's whole process group (its workers too).
  virtual void SignalRank(const std::string& job_id, int rank, int sig) = 0;
  // Sends `sig` to the rank's process alone (its workers are spared).
  virtual void SignalProcess(const std::string& job_id, int rank, int sig) = 0;
  // Whether the rank's process is stopped (SIGSTOP, SIGTSTP, ...) and by
  // which signal (0 when stopped but the signal cannot be told).
  virtual std::optional<int> StopSignal(const std::string& job_id, int rank) = 0;
  // The CPU time (clock ticks, user and system) the rank's main thread has
  // used: the kernel's account, which needs no CPU of the rank to read.
  // nullopt once it is reaped, or where the launcher cannot tell.
  virtual std::optional<uint64_t> MainThreadCpu(const std::string& job_id, int rank) {
    (void)job_id;
    (void)rank;
    return std::nullopt;
  }

  // SIGKILLs everything of the job still alive, escaped descendants included.
  virtual void KillJob(const std::string& job_id) = 0;

  // The rank's process while it is not reaped, as /proc shows it; nullopt
  // once it is (or when the launcher cannot tell).
  virtual std::optional<StuckProcess> Stuck(const std::string& job_id, int rank) {
    (void)job_id;
    (void)rank;
    return std::nullopt;
  }
  // Every thread of the rank's main process as the kernel sees it (state,
  // wchan, kernel stack where readable): stack_text.h's KernelView. ""
  // once the rank is reaped.
  virtual std::string KernelView(const std::string& job_id, int rank) {
    (void)job_id;
    (void)rank;
    return "";
  }
  // What the rank wrote to its stack pipe (kStackFd) since the last read,
  // at most kStackPipeBytes; NotFound once the rank is reaped (or where
  // the launcher gives ranks no stack pipe).
  static constexpr size_t kStackPipeBytes = 256 * 1024;
  virtual absl::StatusOr<std::string> ReadStackPipe(const std::string& job_id, int rank) {
    (void)job_id;
    (void)rank;
    return absl::NotFoundError("no stack pipe");
  }
  // The job ended without the ranks that would not die: their callbacks
  // are dropped (nobody hears of them again) and what holds the job (its
  // cgroup) is left to whoever cleans up once they are gone. They are
  // still reaped when they go.
  virtual void Abandon(const std::string& job_id) { (void)job_id; }
  // What is left of the job once its ranks are reaped and EndJob waits (a
  // descendant in the kernel's uninterruptible sleep), as /proc shows it,
  // at most `max`. Abandon stops the wait for them as well.
  virtual std::vector<StuckProcess> Leftovers(const std::string& job_id, size_t max) {
    (void)job_id;
    (void)max;
    return {};
  }

  // The CPU time the job's processes used in the attempt EndJob last
  // emptied (Containment::TakeCpuUsed); asked once.
  virtual std::optional<std::chrono::microseconds> TakeCpuUsed(const std::string& job_id) {
    (void)job_id;
    return std::nullopt;
  }

  // Calls `on_empty` once no process of the job is left, and releases what
  // BeginJob made. Kills nothing by itself. `on_empty` always runs later
  // from the loop, never from within EndJob.
  virtual void EndJob(const std::string& job_id, std::function<void()> on_empty) = 0;

  // Delivers (on_control) every heartbeat byte that has arrived and not
  // been delivered yet: a launcher may read heartbeats in batches, late by
  // up to ControlReader::kMaxBatchDelayMs, and a watchdog must not judge a
  // rank on beats still waiting in a socket.
  virtual void ReadHeartbeats() {}

  // Where the job's --output/--error files are opened and written, as
  // its user (nullptr: this launcher cannot).
  virtual UserFiles* user_files() { return nullptr; }

  // Runs `work` where it may block (a user's file system: UserFiles waits
  // up to its deadline), off the loop, then `after` on the loop. The
  // default runs both at once, for launchers without a loop (the tests').
  virtual void OffLoop(std::function<void()> work, std::function<void()> after) {
    work();
    after();
  }
};

// One rank's stack as the sampler could (or could not) take it.
struct SampledStack {
  enum class Outcome {
    kTaken,     // a tool printed its threads' frames
    kSkipped,   // not tried (pid 0, no tool installed, too many ranks)
    kTimedOut,  // the tool was still at it when the budget ran out: killed
    kFailed,    // the tool ended without frames (see note)
  };
  Outcome outcome = Outcome::kSkipped;
  // The frames (gdb's layout, main thread first) when taken; the kernel's
  // view of every thread (wchan, kernel stack) is appended either way.
  std::string text;
  std::string note;  // which tool took it, or why none did
};

// Gathers hung ranks' stacks (eu-stack, else gdb, plus the kernel's
// /proc view), off the loop thread. `done` runs on the loop with one
// entry per pid, whatever could be had within the budget.
class StackSampler {
 public:
  virtual ~StackSampler() = default;
  // Python ranks are asked for their stacks through faulthandler instead.
  virtual bool IsPython(pid_t pid) = 0;
  // Taken with the privileges of the ranks' user `who`, no more;
  // pid 0 is skipped. Every helper is killed at the budget.
  virtual void Sample(const std::vector<pid_t>& pids, const Credentials& who,
                      std::chrono::milliseconds budget,
                      std::function<void(std::vector<SampledStack>)> done) = 0;
};

}  // namespace ltd
