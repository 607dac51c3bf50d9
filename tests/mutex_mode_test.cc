// Debian's abseil keeps a lock-order graph for every absl::Mutex and
// aborts the process on a cycle in it (a deadlock it guesses, not one that
// happened); ltd, ltrun, ltctl and lt-shim-etcd turn that off first thing.
#include "mutex_mode.h"

#include <gtest/gtest.h>

namespace ltd::test {
namespace {

TEST(MutexMode, ALockOrderCycleDoesNotAbortTheProcess) {
  NoMutexDeadlockGraph();
  absl::Mutex a;
  absl::Mutex b;
  {
    absl::MutexLock first(&a);
    absl::MutexLock second(&b);
  }
  // The other order: a cycle in the graph, which aborted here before.
  {
    absl::MutexLock first(&b);
    absl::MutexLock second(&a);
  }
  EXPECT_TRUE(a.TryLock());
  a.Unlock();
}

}  // namespace
}  // namespace ltd::test
