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
#include "run_verdict.h"

namespace ltd {

// What a fence reports, on the loop thread.
class RunFenceEvents {
 public:
  virtual ~RunFenceEvents() = default;
  // Another node (`cause.node`) failed in attempt `attempt`, or vanished:
  // the first such word, which may not be the run's root cause. The runner
  // tears this node's ranks down at once; its record waits for the verdict.
  virtual void OnRunCause(int attempt, RootCause cause) = 0;
  // Attempt `attempt`'s root cause as the run chose it from every node's
  // evidence (run_verdict.h), the same on every node. `note`: for a
  // consequence that stood, why nothing better was found. `reports`: every
  // node's report of the attempt the fence had then (vanished nodes as
  // kNodeGone), for the run's hang report (run_hang.h): a hang's verdict
  // comes once every node's evidence is in, or the window has passed.
  virtual void OnRunVerdict(int attempt, NodeReport verdict, std::string note,
                            std::vector<NodeReport> reports) = 0;
  // The nodes' states changed.
  virtual void OnNodes(std::vector<NodeStatus> nodes) = 0;
  // A line for the job's output (etcd gone, the lease lost).
  virtual void OnFenceNotice(std::string line) = 0;
  // Records of the run that did not hold (another user's, forged, expired)
  // were ignored: `total` so far, the last in one line.
  virtual void OnRefusedRecords(int64_t total, std::string last) {
    (void)total;
    (void)last;
  }
};

class RunFence {
 public:
  virtual ~RunFence() = default;
  // Events go to `events` from now on (nullptr: nowhere).
  virtual void SetEvents(RunFenceEvents* events) = 0;
  // This node's report of `attempt` (its root cause, `cause.node` set, and
  // the kind of evidence it is), for every node; a later one replaces it (a
  // hang's, once its stacks are in). Does not block.
  virtual void Publish(int attempt, const NodeReport& report) = 0;
  // How long the run's verdict may take after the first report: a
  // consequence waits this long for something better.
  virtual std::chrono::milliseconds verdict_window() const = 0;
  // This node's state, for the others' `show`. Does not block.
  virtual void SetState(JobState state, const std::optional<RootCause>& cause) = 0;
  // Before a restart: `ready` runs on the loop once every node is ready to
  // start `attempt`, or with why the run cannot go on. Does not block.
  virtual void BeginAttempt(int attempt, std::function<void(absl::Status)> ready) = 0;
};

}  // namespace ltd
