// The fence between the nodes of a multi-node run: what a job's runner
// tells the other nodes (its root cause, its state) and hears from them (a
// remote root cause, the nodes' states). The runner knows only this
// interface; rdzv/ implements it on etcd with threads of its own and
// brings every event back on the loop thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "job.h"

namespace ltd {

// What a fence reports, on the loop thread.
class RunFenceEvents {
 public:
  virtual ~RunFenceEvents() = default;
  // Attempt `attempt`'s root cause as the run agreed it (the first one
  // written), from node `cause.node`; the runner tears this node's ranks
  // down for it unless it is this node's own.
  virtual void OnRunCause(int attempt, RootCause cause) = 0;
  // The nodes' states changed.
  virtual void OnNodes(std::vector<NodeStatus> nodes) = 0;
  // A line for the job's output (etcd gone, the lease lost).
  virtual void OnFenceNotice(std::string line) = 0;
};

class RunFence {
 public:
  virtual ~RunFence() = default;
  // Events go to `events` from now on (nullptr: nowhere).
  virtual void SetEvents(RunFenceEvents* events) = 0;
  // This node's root cause of `attempt` (`cause.node` set), for every node;
  // the first cause of an attempt written wins. Does not block.
  virtual void Publish(int attempt, const RootCause& cause) = 0;
  // This node's state, for the others' `show`. Does not block.
  virtual void SetState(JobState state, const std::optional<RootCause>& cause) = 0;
  // Before a restart: `ready` runs on the loop once every node is ready to
  // start `attempt`, or with why the run cannot go on. Does not block.
  virtual void BeginAttempt(int attempt, std::function<void(absl::Status)> ready) = 0;
};

}  // namespace ltd
