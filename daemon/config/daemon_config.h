// ltd's configuration as it runs with it: the options (options.h) as
// typed, checked values. FromFlags touches nothing on the machine, so a
// refused value is refused the same way everywhere, and its unit test
// needs no daemon; what needs the machine (helpers, the socket, the state
// dir, NVML) is checked by the daemon as it starts.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "options.h"
#include "spdlog/common.h"

namespace ltd {

struct DaemonConfig {
  std::string socket;
  std::string state_dir;
  std::string log_level;  // as given (lt-shim gets the same), known to spdlog
  spdlog::level::level_enum level = spdlog::level::info;
  std::string containment;

  // Device slots: the GPUs of --gpus, else --devices logical slots, else
  // (both empty) whatever the machine has.
  std::vector<std::string> gpu_ids;
  int devices = 0;

  std::chrono::milliseconds stack_budget{0};
  std::chrono::milliseconds idle_timeout{0};
  std::chrono::milliseconds restart_backoff{0};
  std::chrono::milliseconds restore_window{0};
  std::chrono::milliseconds auto_heartbeat_timeout{0};
  std::chrono::milliseconds gpu_sample_interval{0};
  std::chrono::milliseconds max_time{0};  // the longest --time; 0: any
  uint64_t job_max_log_bytes = 0;

  size_t keep_jobs = 0;
  int max_restarts_limit = 0;
  int user_max_running_jobs = 0;
  int user_max_pending_jobs = 0;
  int user_max_connections = 0;
  int user_max_streams = 0;
  double user_max_connects = 0;
  int connection_max_streams = 0;

  bool auto_heartbeat = true;
  bool gpu_isolation = true;       // jobs may open only their GPUs' device nodes
  std::string auto_heartbeat_dir;  // empty: ltd's own module, where it finds it
  std::string metrics_listen;      // empty: no metrics
  std::string admin_group;         // may drain and resume ltd, as root may
  // --private-data jobs: another user's job's details are hidden (JobPrivacy).
  bool private_jobs = true;
  // --fd-relay: "auto", "yes" or "no" (Listener's FdRelay).
  std::string fd_relay = "auto";
  uint64_t max_state_bytes = 0;  // the state dir's bound; 0: none
  std::string nvml_library;
  uint64_t gpu_leftover_mib = 0;
  // Run (as root) when a job ends with ranks that would not die; empty:
  // none. An absolute path.
  std::string unkillable_program;
  std::chrono::milliseconds unkillable_program_timeout{0};
  // --rdzv-auth as given ("auto", "munge", "none"; the daemon settles
  // "auto" as it starts) and munged's socket.
  std::string rdzv_auth;
  std::string munge_socket;
  std::string etcd_ca, etcd_cert, etcd_key, etcd_auth_file;  // absolute paths, or ""
};

// The options as a configuration; a value no option checked (a duration,
// a size, GPU indices, the log level) that is wrong is an error naming the
// option, the value and what to give instead, on one line.
absl::StatusOr<DaemonConfig> FromFlags(const Options& opt);

}  // namespace ltd
