// The runner's side of a multi-node run: its root cause goes to the other
// nodes through the fence with the kind of evidence it is; the first word
// of another node's failure tears this node's ranks down at once; the
// record's root cause is the run's verdict, chosen from every node's
// evidence (run_verdict.h), for which a failed node's record waits.
#include "bytes.h"
#include "duration.h"
#include "job_runner.h"
#include "run_hang.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

// How long past the fence's window a record waits for the verdict before
// it keeps this node's own cause: the fence's etcd calls take a second at
// most each.
constexpr Millis kVerdictSlack{2000};

}  // namespace

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

void JobRunner::Announce(const RootCause& cause, bool pending) {
  const Job& job = job_;
  if (fence_ == nullptr || attempt_ == nullptr) return;
  NodeReport report;
  report.node = NodeRankOf(job.spec.nodes);
  report.cause = cause;
  report.cause.node = report.node;
  const std::string peer_loss =
      cause.rank >= 0 && static_cast<size_t>(cause.rank) < At().ranks.size()
          ? At().ranks[static_cast<size_t>(cause.rank)].peer_loss
          : "";
  Classified kind = ClassifyCause(cause, job.hang_report, peer_loss);
  report.kind = pending ? Evidence::kPending : kind.kind;
  report.what = std::move(kind.what);
  // Its stacks, once in, go with it: every node's record shows the run's.
  if (!pending && At().investigation && job.hang_report) {
    report.hang = CompactHang(*job.hang_report, report.node,
                              cause.node < 0 || cause.node == report.node ? cause.rank : -1);
  }
  fence_->Publish(job.restart_count, report);
}

RootCause JobRunner::RemoteCause(const RootCause& remote) const {
  const Job& job = job_;
  RootCause cause;
  cause.node = remote.node;
  cause.rank = remote.rank;
  cause.reason = CauseReason::kRemoteFailure;
  cause.remote_reason =
      remote.reason == CauseReason::kRemoteFailure ? remote.remote_reason : remote.reason;
  cause.exit_code = ExitCodeFor(remote);
  cause.at = remote.at;
  const std::string global =
      remote.rank >= 0 ? Cat(" rank ", remote.node * job.spec.devices + remote.rank) : "";
  // A vanished node's message names it already.
  cause.message = remote.reason == CauseReason::kSupervisorLost
                      ? remote.message
                      : Cat("node ", remote.node, global, ": ", remote.message);
  return cause;
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
  // This node's own failure, or a hang investigated here, stays its cause
  // until the run's verdict: the first word from elsewhere is no evidence
  // that it is the root cause.
  if (rt.cause || rt.phase != Phase::kRunning) return;
  if ((remote.reason == CauseReason::kHang || remote.reason == CauseReason::kStartupTimeout) &&
      rt.live > 0) {
    // The run is hung, found there; whether a rank here is what it waits
    // for only this node's stacks can say: they are taken before the
    // teardown, as for a hang found here.
    std::vector<int> ranks;
    for (size_t r = 0; r < rt.ranks.size(); ++r) {
      if (rt.ranks[r].alive) ranks.push_back(static_cast<int>(r));
    }
    spdlog::warn("job={} node {} found the run hung: taking this node's stacks", job.id,
                 remote.node);
    return ReportHang(std::move(ranks), {}, CauseReason::kHang, clock_.Monotonic(), kBeatNoise,
                      Cat("the run is hung (node ", remote.node, " found no progress)"));
  }
  RootCause cause = RemoteCause(remote);
  rt.run_cancelled = remote.reason == CauseReason::kCancelled;
  spdlog::warn("job={} another node failed: {}", job.id, ForLog(cause.message));
  Output(-1, Stream::kStderr, Cat("ltd: tearing down: ", cause.message));
  Fail(std::move(cause));
}

void JobRunner::OnRunVerdict(int attempt, NodeReport verdict, std::string note,
                             std::vector<NodeReport> reports) {
  Job& job = job_;
  if (ended() || attempt_ == nullptr || attempt != job.restart_count) return;
  LiveAttempt& rt = At();
  if (rt.verdict) return;  // one verdict an attempt
  if (IsHangCause(verdict.cause)) {
    rt.run_reports = std::move(reports);
    rt.verdict_node = verdict.node;
  }
  const int me = NodeRankOf(job.spec.nodes);
  RootCause cause = verdict.node == me && rt.cause ? *rt.cause : RemoteCause(verdict.cause);
  if (verdict.kind != Evidence::kPrimary && verdict.kind != Evidence::kNodeGone) {
    // A consequence stood: say so, and what was not found.
    const RootCause& c = verdict.cause;
    const std::string who =
        Cat("node ", verdict.node,
            c.rank >= 0 ? Cat(" rank ", verdict.node * job.spec.devices + c.rank) : "");
    cause.message = Cat(who, " ", verdict.what.empty() ? "failed" : verdict.what,
                        note.empty() ? "" : Cat("; ", note), " (", c.message, ")");
  }
  rt.run_cancelled = verdict.cause.reason == CauseReason::kCancelled;
  spdlog::warn("job={} the run's root cause ({}): {}", job.id, ToString(verdict.kind),
               ForLog(cause.message));
  rt.verdict = cause;
  if (rt.phase == Phase::kBackoff || rt.phase == Phase::kAwaitingRun) {
    job.attempts.back().root_cause = cause;
    RecordRunHang();
    return Persist();
  }
  if (rt.phase == Phase::kAwaitingVerdict) {
    rt.Cancel(rt.verdict_timer);
    job.attempts.back().root_cause = cause;
    RecordRunHang();
    return Finish(std::move(cause));
  }
  if (!rt.cause) {
    // Nothing here failed yet: the verdict tears it down.
    Output(-1, Stream::kStderr, Cat("ltd: tearing down: ", cause.message));
    return Fail(std::move(cause));
  }
  if (rt.phase == Phase::kInvestigating || rt.phase == Phase::kHeld) return;  // at its end
  rt.cause = cause;
  job.root_cause = cause;
  Persist();
}

void JobRunner::FinishRun(std::optional<RootCause> cause) {
  Job& job = job_;
  LiveAttempt& rt = At();
  if (fence_ == nullptr || !cause || rt.lost) return Finish(std::move(cause));
  if (rt.verdict) {
    job.attempts.back().root_cause = rt.verdict;
    RecordRunHang();
    return Finish(rt.verdict);
  }
  // The ranks are gone; the record waits for the run's verdict (which
  // the other nodes' evidence decides), at most its window and a slack.
  Enter(Phase::kAwaitingVerdict);
  const Millis wait = fence_->verdict_window() + kVerdictSlack;
  rt.verdict_timer = clock_.StartTimer(wait, [this, self = std::weak_ptr(attempt_), wait] {
    if (!Current(self) || At().phase != Phase::kAwaitingVerdict) return;
    At().verdict_timer = 0;
    Output(-1, Stream::kStderr,
           Cat("ltd: the run chose no root cause within ", FormatDuration(wait),
               " (etcd unreachable?); this node's record keeps its own"));
    Finish(job_.attempts.back().root_cause);
  });
  Persist();
}

void JobRunner::RecordRunHang() {
  Job& job = job_;
  LiveAttempt& rt = At();
  if (!rt.run_reports || fence_ == nullptr) return;
  // This node's own report, whole, when this attempt made one; an earlier
  // attempt's is no evidence of this one.
  std::optional<HangReport> own;
  if (rt.investigation && job.hang_report) own = std::move(job.hang_report);
  job.hang_report =
      MergeRunHang(NodeRankOf(job.spec.nodes), job.spec.nodes.nnodes, job.spec.devices, own,
                   *rt.run_reports, rt.verdict_node, fence_->verdict_window(), clock_.Now());
  rt.run_reports.reset();  // once: the report is the run's now
}

void JobRunner::OnNodes(std::vector<NodeStatus> nodes) {
  if (ended()) return;
  job_.nodes = std::move(nodes);
  Persist();
}

void JobRunner::OnRefusedRecords(int64_t total, std::string last) {
  if (ended()) return;
  job_.rdzv_refused = total;
  job_.rdzv_refused_last = std::move(last);
  // A writer may make many: the record is saved for the first ones, then
  // at each power of two; the final record has them all.
  if (total <= 16 || (total & (total - 1)) == 0) Persist();
}

void JobRunner::OnFenceNotice(std::string line) {
  if (ended()) return;
  Output(-1, Stream::kStderr, Cat("ltd: ", line));
}

}  // namespace ltd
