// Debian's abseil is built without NDEBUG, so every absl::Mutex (gRPC's
// locks are) keeps a process-wide graph of the order locks are taken in:
// each lock updates it under one global lock, a new edge records a stack
// trace, and a cycle it takes for a possible deadlock aborts the process.
// A program that serves others neither pays for that on every lock nor
// dies of a guess: each calls this first thing in main.
#pragma once

#include "absl/synchronization/mutex.h"

namespace ltd {

inline void NoMutexDeadlockGraph() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace ltd
