// A supervisor's way into a multi-node run on etcd: for a job whose spec
// names a rendezvous (spec.nodes.rdzv), joins the run and writes what the
// nodes agreed (node rank, master address and port) into the job, then
// returns the fence the job's runner uses. Blocks up to the job's
// --rdzv-timeout; run it before the loop does anything else.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "etcd_fence.h"
#include "job.h"

namespace ltd::rdzv {

// `host`: this node's address for the others (empty: its hostname).
// `abandon`, polled while waiting for the other nodes, gives up when true.
absl::StatusOr<std::unique_ptr<EtcdFence>> JoinRun(Job& job, EtcdFence::Post post,
                                                   std::string host = "",
                                                   std::function<bool()> abandon = nullptr);

}  // namespace ltd::rdzv
