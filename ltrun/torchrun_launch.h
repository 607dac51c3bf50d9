// The parts of a torchrun command line that touch the machine: what
// --nproc-per-node gpu|cpu counts, torchrun's per-rank log directories
// (--log-dir, --redirects, --tee), and hosting a c10d rendezvous.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "c10d_host.h"
#include "run_fence.h"
#include "run_verdict.h"
#include "torchrun_args.h"

namespace ltd {

// This machine as --nproc-per-node and the choice of Python see it.
MachineFacts ThisMachine();

// --output/--error patterns: the user's, or with --redirects/--tee the
// files torchrun would write, LOG_DIR/RUN_ID_XXXXXX/attempt_0/R/std{out,err}.log
// (LOG_DIR: --log-dir, else a new $TMPDIR/torchelastic_XXXXXX), whose
// directories are made here. `where`: that run directory, else "".
struct TorchrunLogs {
  std::string output, error;
  std::string where;
};
absl::StatusOr<TorchrunLogs> TorchrunLogDirs(const LaunchArgs& opt);

// For --rdzv-backend c10d across nodes: the private etcd this node hosts
// under `dir`, or null when another node hosts it (c10d_host.h's rule).
absl::StatusOr<std::unique_ptr<PrivateEtcd>> HostC10d(const LaunchArgs& opt,
                                                      const std::string& dir);

}  // namespace ltd

namespace ltd {

// A node of a c10d run that does not host it: which node hosts it (the
// node whose address in the rendezvous is `host_ip`), read once the nodes
// have met; -1 when none is.
int C10dHostNode(const std::string& endpoint, const std::string& run_id,
                 const std::string& host_ip);

// The runner's fence events, passed on; but where the fence says its etcd
// is gone, a c10d run's rendezvous died with the node that hosted it: that
// node is gone, and the run's verdict (which no etcd can carry now) is
// that, at once. Loop thread, as the fence's events are.
class C10dHostWatch final : public RunFenceEvents {
 public:
  C10dHostWatch(RunFenceEvents& runner, std::function<int()> attempt, int host_node,
                std::string endpoint)
      : runner_(runner),
        attempt_(std::move(attempt)),
        host_node_(host_node),
        endpoint_(std::move(endpoint)) {}
  void OnRunCause(int attempt, RootCause cause) override {
    runner_.OnRunCause(attempt, std::move(cause));
  }
  void OnRunVerdict(int attempt, NodeReport verdict, std::string note,
                    std::vector<NodeReport> reports) override {
    runner_.OnRunVerdict(attempt, std::move(verdict), std::move(note), std::move(reports));
  }
  void OnNodes(std::vector<NodeStatus> nodes) override { runner_.OnNodes(std::move(nodes)); }
  void OnFenceNotice(std::string line) override;

 private:
  RunFenceEvents& runner_;
  std::function<int()> attempt_;
  const int host_node_;
  const std::string endpoint_;
  bool told_ = false;
};

}  // namespace ltd
