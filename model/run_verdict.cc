#include "run_verdict.h"

#include <algorithm>
#include <array>
#include <utility>

#include "duration.h"
#include "hang_report.h"
#include "str_util.h"

namespace ltd {

std::string_view ToString(Evidence e) {
  switch (e) {
    case Evidence::kTornDown:
      return "torn_down";
    case Evidence::kPending:
      return "pending";
    case Evidence::kConsequence:
      return "consequence";
    case Evidence::kUndetermined:
      return "undetermined";
    case Evidence::kNodeGone:
      return "node_gone";
    case Evidence::kPrimary:
      return "primary";
  }
  return "?";
}

std::optional<Evidence> ParseEvidence(std::string_view s) {
  for (Evidence e : {Evidence::kTornDown, Evidence::kPending, Evidence::kConsequence,
                     Evidence::kUndetermined, Evidence::kNodeGone, Evidence::kPrimary}) {
    if (s == ToString(e)) return e;
  }
  return std::nullopt;
}

std::string_view PeerLossIn(std::string_view line) {
  // gloo's, NCCL's and torch.distributed's own words for a peer that went
  // away, and for a collective that waited past its timeout. A rank that
  // died of one of these died because of another rank.
  static constexpr std::array<std::string_view, 12> kLost = {
      "Connection closed by peer",
      "Connection reset by peer",
      "Broken pipe",
      "Connection refused",
      "Read error",
      "Write error",
      "ECONNRESET",
      "NCCL communicator was aborted",
      "ncclRemoteError",
      "remote process exited or there was a network error",
      "DistNetworkError",
      "Socket Timeout",
  };
  static constexpr std::array<std::string_view, 4> kTimedOut = {
      "Timed out waiting",
      "collective operation timeout",
      "Watchdog caught collective",
      "timed out in collective",
  };
  for (std::string_view p : kLost) {
    if (line.find(p) != std::string_view::npos) return kLostPeer;
  }
  for (std::string_view p : kTimedOut) {
    if (line.find(p) != std::string_view::npos) return "timed out in a collective";
  }
  return "";
}

Classified ClassifyCause(const RootCause& cause, const std::optional<HangReport>& hang,
                         std::string_view peer_loss) {
  switch (cause.reason) {
    case CauseReason::kExited:
    case CauseReason::kSignaled: {
      std::string_view what = PeerLossIn(cause.message);
      if (what.empty()) what = PeerLossIn(peer_loss);
      if (!what.empty()) return {Evidence::kConsequence, std::string(what)};
      return {Evidence::kPrimary, ""};
    }
    case CauseReason::kHang:
    case CauseReason::kStartupTimeout: {
      if (!hang) return {Evidence::kPrimary, ""};
      int with_stack = 0, waiting = 0;
      for (const HangReportRank& r : hang->ranks) {
        // A stopped rank cannot run: it is what its peers wait for.
        if (!r.process_state.empty()) return {Evidence::kPrimary, ""};
        if (!StackIsEvidence(r)) continue;
        ++with_stack;
        if (r.in_collective) {
          ++waiting;
        } else if (r.rank == cause.rank || cause.rank < 0) {
          // Stalled outside a collective: what the others wait for.
          return {Evidence::kPrimary, ""};
        }
      }
      // A consequence only when every rank is seen waiting: a rank whose
      // stack is missing or says nothing may be the one they wait for.
      if (with_stack > 0 && waiting == with_stack &&
          with_stack == static_cast<int>(hang->ranks.size())) {
        return {Evidence::kConsequence, "waits in a collective, as every rank of its node does"};
      }
      // The beats single a rank out (it stopped clearly first) and no
      // stack says otherwise.
      if (cause.rank >= 0) {
        for (const HangReportRank& r : hang->ranks) {
          if (r.rank == cause.rank && StackIsEvidence(r) && r.in_collective) {
            return {Evidence::kConsequence, "waits in a collective"};
          }
        }
        return {Evidence::kPrimary, ""};
      }
      return {Evidence::kUndetermined, "made no progress, and its stacks single out no rank"};
    }
    case CauseReason::kDaemonLost:
    case CauseReason::kSupervisorLost:
      return {Evidence::kNodeGone, ""};
    case CauseReason::kRemoteFailure:
      return {Evidence::kTornDown, "was torn down for another node"};
    case CauseReason::kCancelled:
    case CauseReason::kSpawnFailed:
    case CauseReason::kDependencyFailed:
    case CauseReason::kTimeLimit:
    case CauseReason::kOom:
      return {Evidence::kPrimary, ""};
  }
  return {Evidence::kPrimary, ""};
}

const NodeReport* Strongest(const std::vector<NodeReport>& reports) {
  const NodeReport* best = nullptr;
  for (const NodeReport& r : reports) {
    if (best == nullptr || r.kind > best->kind ||
        (r.kind == best->kind &&
         (r.order < best->order || (r.order == best->order && r.node < best->node)))) {
      best = &r;
    }
  }
  return best;
}

bool VerdictReady(const std::vector<NodeReport>& reports, int nnodes, bool window_closed) {
  const NodeReport* best = Strongest(reports);
  if (best == nullptr) return false;
  if (best->kind == Evidence::kPrimary || window_closed) return true;
  if (best->kind <= Evidence::kPending) return false;  // nothing of its own reported yet
  std::vector<int> reported;
  for (const NodeReport& r : reports) {
    if (r.kind != Evidence::kPending && r.node >= 0 && r.node < nnodes) reported.push_back(r.node);
  }
  std::sort(reported.begin(), reported.end());
  reported.erase(std::unique(reported.begin(), reported.end()), reported.end());
  return static_cast<int>(reported.size()) >= nnodes;
}

std::string StandingNote(std::chrono::milliseconds window) {
  return Cat("no node reported a cause within ", FormatDuration(window));
}

}  // namespace ltd
