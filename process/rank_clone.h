// A rank started without lt-exec: clone(2) with CLONE_VM makes a child
// that runs rank_start.h's steps in the supervisor's memory, on a stack of
// its own, until its execve of the program. One exec a rank instead of
// two: on a VM a process image costs about a millisecond of CPU.
//
// Not vfork: the supervisor's thread never waits for the child, which may
// wait on the user's file system (its working directory, PATH) as long as
// the kernel lets it. Until its execve the child shares the supervisor's
// memory as the user: the supervisor makes itself undumpable (no process
// of the user may ptrace it or read its /proc/PID/mem), and where
// fs.suid_dumpable is 1 (a uid change would make the memory dumpable
// again) ranks that change user start through lt-exec instead.
#pragma once

#include <sys/types.h>

#include <memory>

#include "absl/status/statusor.h"
#include "fd.h"
#include "rank_start.h"
#include "rank_start_plan.h"

namespace ltd {

// Where the steps can run in a shared-memory child: they make their own
// system calls, written for these.
#if defined(__x86_64__) || defined(__aarch64__)
inline constexpr bool kRankChildSupported = true;
#else
inline constexpr bool kRankChildSupported = false;
#endif

// What the child reads and runs on: freed only once it is reaped (it may
// still be on its stack until its execve or exit).
struct RankChildMemory {
  RankChildMemory(std::unique_ptr<RankStartPlan> plan, const RankFds& fds);
  ~RankChildMemory();
  RankChildMemory(const RankChildMemory&) = delete;
  RankChildMemory& operator=(const RankChildMemory&) = delete;

  std::unique_ptr<RankStartPlan> plan;
  RankChildArgs args;
  void* stack = nullptr;  // back to a pool of them once freed
};

// For a child not reaped when its owner ends (this process is ending, or
// a bug): it may still run on this memory until a kill lands, so it is
// kept, reachable, until the process exits.
void KeepRankChildMemoryToTheEnd(std::unique_ptr<RankChildMemory> memory);

struct ClonedRank {
  pid_t pid = 0;
  Fd pidfd;
  std::unique_ptr<RankChildMemory> memory;
};

// Starts the child (every signal blocked until its steps put them back).
// `fds` as RankFds says; they are dup'ed in the child, the caller's stay.
absl::StatusOr<ClonedRank> CloneRank(const RankFds& fds, std::unique_ptr<RankStartPlan> plan);

// Whether ranks that change user may start so here: fs.suid_dumpable is
// not 1. Read once a process.
bool RankChildMaySwitchUsers();

// A supervisor running as root calls this before its first rank: its
// memory is then never dumpable (see the top of the file).
void KeepRankChildrenOut();

}  // namespace ltd
