// Starting lt-shim, a job's supervisor: its command line, its connection
// to ltd (fd 3), and for a spare the socket its jobs come down (fd 4),
// each with its connection (process/spare_wire.h).
#pragma once

#include <sys/types.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "fd.h"

namespace ltd {

struct ShimConfig {
  std::string shim_binary;  // lt-shim
  // lt-shim-etcd: a multi-node run's, and a job's whose groups must be
  // looked up (NSS), which lt-shim, linked statically, never does.
  std::string shim_etcd_binary;
  std::string exec_binary;  // lt-exec
  std::string containment;  // the mode every supervisor uses
  // ltd's cgroup2 cgroup, where it attached a device program at its start
  // (empty: it did not): its supervisors, there too, need not probe again.
  std::string device_program_proven;
  std::string log_level = "info";
  std::chrono::milliseconds restore_window{10 * 60 * 1000};
  std::chrono::milliseconds stack_budget{5000};
  std::chrono::milliseconds restart_backoff{1000};
  uint64_t job_max_log_bytes = 1ull << 30;
  std::string auto_heartbeat_dir;  // empty: no automatic heartbeats
  std::chrono::milliseconds auto_heartbeat_timeout{5 * 60 * 1000};
};

// An lt-shim this ltd started: fd 3 of it is the other end of `channel`
// (a spare's: of the channel its job came with). Not reaped until ltd
// says so (through `pidfd`).
struct SpawnedShim {
  pid_t pid = 0;
  Fd pidfd;
  Fd channel;
};

// A supervisor's connection to ltd: ltd's end, the supervisor's.
absl::StatusOr<std::pair<Fd, Fd>> ShimConnection();

// Starts lt-shim for `job_id` on `state_dir`, or a spare (empty id) that
// takes its jobs from the other end of `*assign` (its `channel` empty);
// lt-shim-etcd instead with `etcd_build`. In its own session.
absl::StatusOr<SpawnedShim> SpawnShim(const ShimConfig& config, const std::string& state_dir,
                                      const std::string& job_id, Fd* assign,
                                      bool etcd_build = false);

// How a reaped supervisor ended, for the log: "exited with code 1".
std::string ExitText(const siginfo_t& info);

}  // namespace ltd
