// The runner's side of a multi-node run: its root cause goes to the other
// nodes through the fence, and the run's root cause, when another node's,
// tears this node's ranks down through the same path as a local failure.
#include "job_runner.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

void JobRunner::SetFence(RunFence* fence) {
  fence_ = fence;
  if (fence_ != nullptr) fence_->SetEvents(this);
}

void JobRunner::JoinedRun(RunFence* fence, const NodeSpec& agreed, int master_port) {
  job_.spec.nodes = agreed;
  job_.master_port = master_port;
  SetFence(fence);
}

void JobRunner::FailToJoin(std::string why) {
  if (ended()) return;
  RootCause cause;
  cause.reason = CauseReason::kSpawnFailed;
  cause.exit_code = 1;
  cause.at = clock_.Now();
  cause.message = std::move(why);
  spdlog::error("job={} cannot join its run: {}", job_.id, cause.message);
  Finish(std::move(cause));
}

void JobRunner::Announce(const RootCause& cause) {
  const Job& job = job_;
  if (fence_ == nullptr || cause.reason == CauseReason::kRemoteFailure) return;
  RootCause mine = cause;
  mine.node = NodeRankOf(job.spec.nodes);
  fence_->Publish(job.restart_count, mine);
}

void JobRunner::NodeEnded() {
  Job& job = job_;
  const int me = NodeRankOf(job.spec.nodes);
  for (NodeStatus& n : job.nodes) {
    if (n.node_rank != me) continue;
    n.state = std::string(ToString(job.state));
    n.root_cause = job.root_cause;
  }
  fence_->SetState(job.state, job.root_cause);
}

void JobRunner::OnRunCause(int attempt, RootCause remote) {
  Job& job = job_;
  if (ended() || attempt_ == nullptr || attempt != job.restart_count) return;
  if (remote.node < 0 || remote.node == NodeRankOf(job.spec.nodes)) return;  // ours
  LiveAttempt& rt = At();
  RootCause cause;
  cause.node = remote.node;
  cause.rank = remote.rank;
  cause.reason = CauseReason::kRemoteFailure;
  cause.exit_code = ExitCodeFor(remote);
  cause.at = remote.at;
  const std::string global =
      remote.rank >= 0 ? Cat(" rank ", remote.node * job.spec.devices + remote.rank) : "";
  cause.message = Cat("node ", remote.node, global, ": ", remote.message);
  rt.run_cancelled = remote.reason == CauseReason::kCancelled;
  spdlog::warn("job={} the run's root cause is on another node: {}", job.id, cause.message);
  if (rt.phase == Phase::kBackoff || rt.phase == Phase::kAwaitingRun) {
    // This attempt already ended here, for what was a consequence.
    job.attempts.back().root_cause = cause;
    return Persist();
  }
  if (rt.cause && rt.phase != Phase::kInvestigating && rt.phase != Phase::kHeld) {
    // This node failed too, as a consequence (gloo noticing its peer gone):
    // the run's first cause is the root cause of every node.
    rt.cause = cause;
    job.root_cause = cause;
    Persist();
    return;
  }
  if (rt.cause) return;  // a hang investigation here goes on; its verdict stays
  Output(-1, Stream::kStderr, Cat("ltd: tearing down: ", cause.message));
  // Ranks that all ended already are on their way out (OnRanksGone ran):
  // the cause is all this changes.
  Fail(std::move(cause));
}

void JobRunner::OnNodes(std::vector<NodeStatus> nodes) {
  if (ended()) return;
  job_.nodes = std::move(nodes);
  Persist();
}

void JobRunner::OnFenceNotice(std::string line) {
  if (ended()) return;
  Output(-1, Stream::kStderr, Cat("ltd: ", line));
}

}  // namespace ltd
