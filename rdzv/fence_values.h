// What the fence (etcd_fence.h) reads of the other nodes' keys under the
// run's prefix: their states and root causes (status/<r>), and each
// attempt's reports, vanished nodes and verdict (attempts/<k>/...). As
// run_keys.h: every byte hostile, a key of no node of the run is nothing,
// a value cannot speak for another node than its key's, text is bounded.
#pragma once

#include <optional>
#include <string>

#include "job.h"
#include "run_verdict.h"

namespace ltd::rdzv {

// A root cause as the job record writes it, read by the record's reader;
// its message at most `message_max` bytes and who cancelled it at most
// 256 (both no more than `message_max`), each cut between characters.
std::optional<RootCause> ParseCause(const nlohmann::json& j, size_t message_max = 4096);

// The most bytes of each text of a node's status (its host, its cause's
// message, who cancelled it) in a run of `nnodes` nodes: 256, less where
// the run's nodes would hold more than 256 KiB of them, and never under 16.
// The table of a run's nodes is in its job's record, which ltd holds.
size_t NodeTextMax(int nnodes);

// status/<r>: the node's state (a JobState word, else ""), host and root
// cause, into `n`, each text at most `text_max` bytes (NodeTextMax); false
// (and `n` as it was) when `value` is no object.
bool ApplyStatus(const std::string& value, NodeStatus& n, size_t text_max = 256);

// attempts/<k>/report/<r>, attempts/<k>/gone/<r> or attempts/<k>/verdict.
struct AttemptValue {
  int attempt = 0;
  bool verdict = false;  // the run's verdict, `report.node` the node it names
  bool gone = false;     // a node vanished; `report.node` is it
  NodeReport report;     // its cause's node is the report's
  std::string note;      // a verdict's
};
// `rest`: the key after the run's prefix. nullopt for a key or value that
// is none of those of a run of `nnodes` nodes of `devices` ranks.
std::optional<AttemptValue> ParseAttempt(const std::string& rest, const std::string& value,
                                         int64_t create_revision, int nnodes, int devices);

}  // namespace ltd::rdzv
