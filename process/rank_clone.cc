#include "rank_clone.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "posix_error.h"
#include "str_util.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

namespace ltd {
namespace {

// The steps' deepest frames hold a few KiB (a path, a message, the
// kernel's status text); a guard page below.
constexpr size_t kStackBytes = 128 << 10;

}  // namespace

RankChildMemory::RankChildMemory(std::unique_ptr<RankStartPlan> plan, const RankFds& fds)
    : plan(std::move(plan)) {
  args.fds = fds;
  args.start = &this->plan->start();
}

RankChildMemory::~RankChildMemory() {
  if (stack == nullptr) return;
#if defined(__SANITIZE_ADDRESS__)
  // Nothing instrumented ran on it, but the mapping's next owner must not
  // inherit any poison.
  ASAN_UNPOISON_MEMORY_REGION(stack, stack_size);
#endif
  munmap(stack, stack_size);
}

absl::StatusOr<ClonedRank> CloneRank(const RankFds& fds, std::unique_ptr<RankStartPlan> plan) {
  if constexpr (!kRankChildSupported) {
    return absl::UnimplementedError("rank_start.cc makes no system call of its own here");
  }
  auto memory = std::make_unique<RankChildMemory>(std::move(plan), fds);
  const long page = sysconf(_SC_PAGESIZE);
  const size_t size = kStackBytes + static_cast<size_t>(page);
  void* stack = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
  if (stack == MAP_FAILED) return PosixError("mmap", "a rank's starting stack", errno);
  memory->stack = stack;
  memory->stack_size = size;
  if (mprotect(stack, static_cast<size_t>(page), PROT_NONE) != 0) {
    return PosixError("mprotect", "a rank's starting stack", errno);
  }
  char* top = static_cast<char*>(stack) + size;

  // Blocked in the child from its first instruction: a signal must not run
  // the supervisor's handler there. Its steps reset the handlers and then
  // unblock them.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int pidfd = -1;
  const int pid =
      clone(RankChildMain, top, CLONE_VM | CLONE_PIDFD | SIGCHLD, &memory->args, &pidfd);
  const int err = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    return absl::UnavailableError(
        Cat("clone: ", std::strerror(err), err == EINVAL ? "; ltd needs Linux 5.3 or newer" : ""));
  }
  ClonedRank started;
  started.pid = pid;
  started.pidfd.reset(pidfd);
  started.memory = std::move(memory);
  return started;
}

bool RankChildMaySwitchUsers() {
  static const bool may = [] {
    std::ifstream f("/proc/sys/fs/suid_dumpable");
    int v = 0;
    return !(f >> v) || v != 1;
  }();
  return may;
}

void KeepRankChildrenOut() { (void)prctl(PR_SET_DUMPABLE, 0); }

}  // namespace ltd
