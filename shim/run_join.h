// A multi-node run's join, for lt-shim's main: the rendezvous on etcd, on
// a thread of its own (ltd hears from the supervisor meanwhile, and may
// cancel the job), then the run's fence, which outlives the runner. Only
// lt-shim-etcd has one (run_join.cc, with the etcd client over gRPC);
// lt-shim (run_join_none.cc) has none, so that it starts without gRPC.
#pragma once

#include <memory>

#include "job_runner.h"
#include "loop.h"

namespace ltd {

class RunJoin {
 public:
  virtual ~RunJoin() = default;
  // Loop thread: the runner's rendezvous; its ranks start once joined.
  virtual void Start(JobRunner& runner) = 0;
  // After the loop: a rendezvous still waiting gives up, and the fence
  // closes, so that this node's end reaches the others first.
  virtual void Stop() = 0;
};

// Whether this program can join a multi-node run.
bool CanJoinRuns();
// First thing in main: lt-shim-etcd's gRPC locks without abseil's
// lock-order graph (mutex_mode.h); nothing in lt-shim, which has none.
void SetUpJoiningProcess();
// This program's join; null where it cannot.
std::unique_ptr<RunJoin> MakeRunJoin(Loop& loop);

}  // namespace ltd
