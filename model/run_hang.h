// The hang report of a multi-node run. Each node takes its own ranks'
// stacks (hang_report.h); its report to the other nodes (run_verdict.h's
// NodeReport) carries its evidence, compact: every rank's step, whether it
// stalled and whether it waits in a collective, and the stack only of a
// rank that does not. Every node's final record then holds the whole run's
// report: every node's ranks, node by node, and the nodes that told
// nothing, with why. What comes from another node came through etcd, where
// anyone who reaches it may write: it is checked and bounded on the way in.
#pragma once

#include <chrono>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "job.h"
#include "run_verdict.h"

namespace ltd {

// Whether a run's verdict of this cause makes its hang report: a hang or
// a start-up timeout.
bool IsHangCause(const RootCause& cause);

// One node's evidence: a rank's stack at most kMaxHangStackBytes, all of a
// node's stacks kMaxNodeHangStackBytes (the rank its cause names first),
// a process state or stack note kMaxHangTextBytes, kMaxNodeHangRanks ranks.
inline constexpr size_t kMaxHangStackBytes = 8 * 1024;
inline constexpr size_t kMaxNodeHangStackBytes = 16 * 1024;
inline constexpr size_t kMaxHangTextBytes = 256;
inline constexpr size_t kMaxNodeHangRanks = 1024;
// The run's report holds at most this many ranks and bytes of stacks of
// other nodes (the culprit's node first), and lists this many missing
// nodes: a run of 4096 nodes must not make a record of gigabytes.
inline constexpr size_t kMaxRunHangRanks = 4096;
inline constexpr size_t kMaxRunHangStackBytes = 256 * 1024;
inline constexpr size_t kMaxMissingNodesListed = 64;

// This node's evidence from its hang report: its ranks with `node` set,
// each with its step, stalled, straggler, in_collective, process state and
// stack status; the stack only of a rank that does not wait in a
// collective, or of `culprit` (the local rank this node's cause names; -1:
// none), cut to the bounds above.
std::vector<HangReportRank> CompactHang(const HangReport& report, int node, int culprit);

// The evidence as it travels, its ranks as global RANKs (node * devices + rank).
nlohmann::json NodeHangToJson(const std::vector<HangReportRank>& ranks, int devices);

// Node `node`'s evidence as another node wrote it (hostile). An entry that
// is no object, whose global rank is not one of that node's in a run of
// `nnodes` x `devices`, or that repeats a rank, is dropped; at most
// `devices` (and kMaxNodeHangRanks) ranks; text and stacks are cut to the
// bounds. nullopt when it is no array, or `node` is not of the run.
std::optional<std::vector<HangReportRank>> NodeHangFromJson(const nlohmann::json& j, int node,
                                                            int nnodes, int devices);

// The run's hang report as node `me` records it, with the reports of the
// attempt its fence had when the verdict came (`reports`: each node's last,
// pending ones and vanished nodes included). Its own ranks come whole from
// `own` (its hang report of this attempt, if it made one), every other
// node's from the evidence in its report; a node without any is listed as
// missing, saying why: it vanished, its report had no hang evidence (its
// own cause), or its stacks (or any report) did not come within `window`.
// `culprit_node`'s ranks are taken first; past the bounds above a node's
// ranks (or a stack) are left out, saying so. When ranks wait in a
// collective, the ranks whose stacks show none are the stalled ones, on
// whichever node (as AttributeHang does within one). stalled_ranks and
// straggler_ranks are global RANKs.
HangReport MergeRunHang(int me, int nnodes, int devices, const std::optional<HangReport>& own,
                        const std::vector<NodeReport>& reports, int culprit_node,
                        std::chrono::milliseconds window, WallTime now);

}  // namespace ltd
