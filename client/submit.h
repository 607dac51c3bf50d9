// `ltctl submit`: the request from the command line, sent with a token of
// ltctl's own so that a submit that meets an ltd restart (an upgrade, a
// crash) waits for ltd and submits again without making a second job.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "connection.h"

namespace ltd {

struct SubmitArgs {
  int devices = 0;
  std::string name;
  bool detach = false;
  bool no_auto_heartbeat = false;
  std::string heartbeat_timeout, startup_timeout, grace = "10s";
  std::string time_limit, hold_on_hang;
  std::vector<std::string> env;
  int max_restarts = 0;
  // A multi-node run (torchrun's flags); see SubmitRequest.
  int nnodes = 1;
  std::optional<int> node_rank;
  std::string master_addr, run_id, rdzv, rdzv_timeout, rdzv_lease, rdzv_auth;
  int master_port = 0;
  std::vector<std::string> after;
  std::string dependency;     // --dependency, as typed (ltd parses it)
  std::string output, error;  // --output, --error patterns
  std::string mem, mem_per_rank, cpus;
  std::string warn_signal;  // --signal SIG@DUR
  std::string array;        // --array SPEC (job_array.h); "": one job
  std::vector<std::string> command;
};

// Submits the job; detached, prints its id; attached, follows it to its
// end. Returns ltctl's exit code.
int Submit(const Globals& g, const SubmitArgs& a);

}  // namespace ltd
