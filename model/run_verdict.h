// The root cause of a multi-node run, chosen from what its nodes report by
// the rank of their evidence, not by the order it arrived in. A node's
// failure is either its own doing (primary: a rank exited, crashed, was
// OOM-killed or stalled outside a collective), the loss of a whole node
// (its supervisor and lease vanished), or a consequence of another
// node's failure (a peer connection closed or reset, a collective timed
// out, every rank waiting in a collective). Within a node the hang report
// (hang_report.h) already tells a stalled rank from the ranks that wait for
// it; across nodes this does the same with the nodes' reports.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "job.h"

namespace ltd {

// How strongly a report says "this is where the run failed"; stronger
// beats weaker whatever came first.
enum class Evidence {
  kTornDown,     // this node was torn down for another node's report
  kPending,      // a hang whose stacks are still being taken: not a report yet
  kConsequence,  // this node failed because another did
  // A hang whose stacks single out no rank (not taken, or none shows
  // where it stopped): not known to be a consequence, so it beats one.
  kUndetermined,
  kNodeGone,  // a node vanished: its supervisor and ranks with it
  kPrimary,   // this node's own failure
};
std::string_view ToString(Evidence e);
std::optional<Evidence> ParseEvidence(std::string_view s);

// A rank's line that says its peer went away or a collective timed out
// (gloo's "Connection closed by peer", NCCL's "remote process exited");
// what it says in a few words ("lost its peer"), or "" for any other line.
std::string_view PeerLossIn(std::string_view line);
// The first of these: the peer went away (it is exiting, or gone), as
// opposed to a collective that timed out waiting for one.
inline constexpr std::string_view kLostPeer = "lost its peer";

struct Classified {
  Evidence kind = Evidence::kPrimary;
  // A consequence in a few words: "lost its peer", "timed out in a
  // collective", "waits in a collective with every other rank here".
  std::string what;
};

// What kind of evidence this node's root cause is. `hang`: the job's hang
// report (for a hang); `peer_loss`: the failed rank's own line that named
// a lost peer (PeerLossIn), if it wrote one.
Classified ClassifyCause(const RootCause& cause, const std::optional<HangReport>& hang,
                         std::string_view peer_loss);

// One node's report of an attempt, as every node reads it.
struct NodeReport {
  int node = 0;
  Evidence kind = Evidence::kPrimary;
  RootCause cause;   // cause.node is `node`
  std::string what;  // Classified::what
  // When the node first reported (etcd's create revision of its key, so a
  // hang's report counts from its verdict, not from its stacks): ties go
  // to the first.
  int64_t order = 0;
  // Its hang evidence (run_hang.h's CompactHang: its ranks, `node` set),
  // when it took its ranks' stacks for a hang in this attempt.
  std::optional<std::vector<HangReportRank>> hang;
};

// The strongest report (nullptr when there is none): primary, then a
// vanished node, then a hang whose stacks single out no rank, then a
// consequence, then a hang still investigated, then a node torn down for
// another; the first to arrive among equals.
const NodeReport* Strongest(const std::vector<NodeReport>& reports);

// Whether the run's root cause can be chosen now: a primary cause is in
// (nothing beats it), every node has reported (`nnodes`; a hang still
// investigated has not), or the window for something better has closed.
bool VerdictReady(const std::vector<NodeReport>& reports, int nnodes, bool window_closed);

// How long a consequence waits for something better: a node that vanished
// is known once its lease expired (`lease_ttl`) and etcd noticed
// (kLeaseMargin).
inline constexpr std::chrono::milliseconds kLeaseMargin{1000};
inline std::chrono::milliseconds VerdictWindow(std::chrono::milliseconds lease_ttl) {
  return lease_ttl + kLeaseMargin;
}

// What a record says of a consequence that stood because nothing better
// came: "no node reported a cause within 6s".
std::string StandingNote(std::chrono::milliseconds window);

}  // namespace ltd
