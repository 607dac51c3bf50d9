// The parts of a torchrun command line that touch the machine: what
// --nproc-per-node gpu|cpu counts, torchrun's per-rank log directories
// (--log-dir, --redirects, --tee), and hosting a c10d rendezvous.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "c10d_host.h"
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
