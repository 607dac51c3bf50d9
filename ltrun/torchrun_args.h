// ltrun's command line: its own options and every option of torchrun
// (PyTorch 2.6 to 2.11's torch/distributed/run.py), in one table
// (arg_table.h), so that a script that says `torchrun ...` runs with
// `ltrun` in its place. Each torchrun option is taken (it means what it
// means there), mapped onto ltd's own (--shutdown-timeout is --grace), or
// taken and said to have no effect (--monitor-interval: ltd watches the
// ranks itself). torchrun's PET_* variables are the defaults, as there.
//
// Pure: what ltrun needs to know of the machine comes in MachineFacts, so
// the whole reading is unit-tested and fuzzed without one.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "arg_table.h"

namespace ltd {

// ltrun's options and torchrun's, with both spellings and PET_ defaults.
std::span<const ArgDef> LtrunArgTable();

// torchrun's --redirects/--tee: which of a local rank's streams go to its
// log files: 0 none, 1 stdout, 2 stderr, 3 both; for every rank ("3") or
// rank by rank ("0:1,1:2").
struct StdStreams {
  int all = 0;
  std::map<int, int> by_rank;
  int For(int local_rank) const;
  bool Any() const;
};
absl::StatusOr<StdStreams> ParseStdStreams(std::string_view flag, std::string_view text);

struct MachineFacts {
  int gpus = 0;  // what --nproc-per-node gpu counts
  int cpus = 1;  // what --nproc-per-node cpu counts
  // Whether PATH names a file that is not executable (a script to run with
  // Python, as torchrun runs any script).
  std::function<bool(const std::string&)> plain_file;
  // $PYTHON_EXEC (torchrun's choice of interpreter), else "".
  std::string python_exec;
};

// Everything a launch asks for, read and checked.
struct LaunchArgs {
  // ltrun's own, as text its flag readers (flag_values.h) check.
  int devices = 1;
  std::string name;
  std::string heartbeat_timeout = "0", startup_timeout = "0", grace = "10s";
  std::string time_limit = "0", hold_on_hang = "0";
  std::string warn_signal;
  std::string stack_budget = "5s";
  int max_restarts = 0;
  std::string mem, mem_per_rank, cpus;
  std::vector<std::string> env;
  std::string output, error;
  std::string report, state_dir;
  std::string containment = "auto";
  std::string log_level = "error";
  bool auto_heartbeat = true;
  bool slurm = true;
  // Tear the job down when ltrun's parent dies (a notebook kernel that
  // crashed or was shut down), as a SIGTERM to ltrun would.
  bool die_with_parent = false;
  bool help = false, version = false, check_args = false;
  // The run's nodes; unset comes from Slurm's variables, else one node.
  std::optional<int> nnodes, node_rank, master_port;
  std::optional<std::string> master_addr, run_id;
  std::string rdzv;  // etcd://HOST:PORT
  std::string rdzv_timeout = "10m", rdzv_lease = "5s";
  // --rdzv-auth and munged's socket (rdzv/record_auth.h); etcd's own TLS
  // and users (rdzv/etcd_security.h).
  std::string rdzv_auth = "auto", munge_socket = "/run/munge/munge.socket.2";
  std::string etcd_ca, etcd_cert, etcd_key, etcd_auth_file;
  // --rdzv-backend c10d across nodes: the HOST:PORT whose node hosts the
  // run's etcd; is_host from --rdzv-conf is_host=, else unset (decided by
  // the address).
  std::string c10d_endpoint;
  std::optional<bool> c10d_is_host;
  std::string local_addr;  // this node's address for the others
  // torchrun's per-rank logs: LOG_DIR/RUN_ID/attempt_0/LOCAL_RANK/{stdout,stderr}.log.
  std::string log_dir;
  StdStreams redirects, tee;
  std::set<int> local_ranks_filter;  // ranks shown on the console; empty: all
  std::vector<int> stop_signals;     // tear the job down on these too (INT, TERM, HUP always)
  // Options given that change nothing under ltrun, as the user spelled them.
  std::vector<std::string> no_effect;
  std::vector<std::string> command;  // what each rank runs
};

// The command line (the words after "ltrun") and the environment's PET_*
// variables, read into a launch; one line in ltd's words when refused.
absl::StatusOr<LaunchArgs> ReadLaunchArgs(std::span<const std::string> words, const EnvLookup& env,
                                          const MachineFacts& facts);

// The line ltrun says once on stderr about the options that have no effect
// ("" when none).
std::string NoEffectLine(const LaunchArgs& args);

}  // namespace ltd
