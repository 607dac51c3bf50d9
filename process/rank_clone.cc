#include "rank_clone.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <vector>

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

// Stacks of reaped children, kept for the next ranks: a new mapping, its
// first page faults and its unmapping (a TLB flush on every CPU this
// process ran on) cost ~80 us a rank here. At most kKeep are kept, a few
// touched pages each.
class StackPool {
 public:
  static constexpr size_t kKeep = 16;

  static size_t Size() { return kStackBytes + Page(); }

  absl::StatusOr<void*> Take() {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        void* stack = free_.back();
        free_.pop_back();
        return stack;
      }
    }
    void* stack = mmap(nullptr, Size(), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
    if (stack == MAP_FAILED) return PosixError("mmap", "a rank's starting stack", errno);
    if (mprotect(stack, Page(), PROT_NONE) != 0) {
      const int err = errno;
      munmap(stack, Size());
      return PosixError("mprotect", "a rank's starting stack", err);
    }
    return stack;
  }

  // Only once no child runs on it.
  void Give(void* stack) {
#if defined(__SANITIZE_ADDRESS__)
    // Nothing instrumented ran on it; whoever has it next starts clean.
    ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(stack) + Page(), kStackBytes);
#endif
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (free_.size() < kKeep) {
        free_.push_back(stack);
        return;
      }
    }
    munmap(stack, Size());
  }

 private:
  static size_t Page() {
    static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return page;
  }

  std::mutex mu_;
  std::vector<void*> free_;
};

// Never destroyed: a child left running at exit may still be on its stack.
StackPool& Stacks() {
  static auto* pool = new StackPool;
  return *pool;
}

}  // namespace

RankChildMemory::RankChildMemory(std::unique_ptr<RankStartPlan> plan, const RankFds& fds)
    : plan(std::move(plan)) {
  args.fds = fds;
  args.start = &this->plan->start();
}

RankChildMemory::~RankChildMemory() {
  if (stack != nullptr) Stacks().Give(stack);
}

void KeepRankChildMemoryToTheEnd(std::unique_ptr<RankChildMemory> memory) {
  static std::mutex mu;
  // Never destroyed, so what it holds is neither freed nor a leak.
  static auto* kept = new std::vector<std::unique_ptr<RankChildMemory>>;
  const std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(memory));
}

absl::StatusOr<ClonedRank> CloneRank(const RankFds& fds, std::unique_ptr<RankStartPlan> plan) {
  if constexpr (!kRankChildSupported) {
    return absl::UnimplementedError("rank_start.cc makes no system call of its own here");
  }
  auto memory = std::make_unique<RankChildMemory>(std::move(plan), fds);
  auto stack = Stacks().Take();
  if (!stack.ok()) return stack.status();
  memory->stack = *stack;
  char* top = static_cast<char*>(*stack) + StackPool::Size();

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
