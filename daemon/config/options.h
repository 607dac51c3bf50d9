// ltd's options: one list for the command line and the configuration file
// (whose keys are the long option names without `--`), where each value
// came from, and the effective configuration as `ltd --print-config`
// prints it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ltd {

struct Options {
  std::string socket = "/run/ltd/ltd.sock";
  std::string state_dir = "/var/lib/ltd";
  int devices = 0;
  std::string gpus;
  std::string log_level = "info";
  std::string containment = "auto";
  std::string stack_budget = "5s";
  size_t keep_jobs = 10000;
  std::string admin_group;  // may drain and resume ltd, as root may
  // "jobs": another user's job shows its owner, name, state, devices,
  // times and root-cause kind only; "no": everything (but the environment).
  std::string private_data = "jobs";
  // Descriptors sent over ltd's socket: "auto", "yes" (relay), "no".
  std::string fd_relay = "auto";
  // Per-user bounds, so that no user can take the server from the others.
  int user_max_running_jobs = 0;
  int user_max_pending_jobs = 1000;
  int user_max_connections = 64;
  int user_max_streams = 64;
  double user_max_connects = 200;
  int connection_max_streams = 16;
  std::string idle_timeout = "10m";
  std::string job_max_log_bytes = "1G";
  std::string max_state_bytes = "auto";  // half the state dir's file system
  int max_restarts_limit = 100;
  std::string max_time = "0";  // the longest --time a job may ask for; 0: any
  std::string restart_backoff = "1s";
  std::string restore_window = "10m";
  // Automatic heartbeats for Python ranks (docs/user-guide.md).
  bool auto_heartbeat = true;
  bool gpu_isolation = true;
  std::string auto_heartbeat_timeout = "5m";
  std::string auto_heartbeat_dir;  // empty: beside ltd (build tree), else installed
  std::string metrics_listen;      // empty: no metrics
  std::string nvml_library = "libnvidia-ml.so.1";
  uint64_t gpu_leftover_mib = 0;
  std::string gpu_sample_interval = "10s";
  std::string unkillable_program;  // empty: none
  std::string unkillable_program_timeout = "60s";
  // Multi-node runs at etcd: "munge" (every record a MUNGE credential),
  // "none", "auto" (munge where --munge-socket exists).
  std::string rdzv_auth = "auto";
  std::string munge_socket = "/run/munge/munge.socket.2";
  // etcd over TLS (etcds://) and etcd's users: files lt-shim reads as root.
  std::string etcd_ca, etcd_cert, etcd_key, etcd_auth_file;
};

// --max-state-bytes as bytes: a SIZE, 0 (no bound), or "auto": half the
// file system that holds `state_dir` (or, before it exists, its parent).
absl::StatusOr<uint64_t> StateBound(const std::string& value, const std::string& state_dir);

// Adds every option of `opt` to `app`; each is also a key of the file.
void AddOptions(CLI::App& app, Options& opt);

// Where the file was looked for, whether it was read, and each key's source.
struct ConfigSources {
  std::string path;
  bool read = false;
  std::map<std::string, std::string> source;  // key -> "file PATH:LINE" or "flag --KEY"

  // For the start-up log: the file read, or that there was none.
  std::string Describe() const;
};

// Reads the file at `path` into the options of `app` that the command line
// (already parsed into `app`) did not set: flags win over the file. A
// missing file is no error unless `required` (given with --config). An
// unknown key, a value its option refuses or a malformed line is an error
// naming the file, the line and, for a key, the nearest valid one.
absl::Status ApplyConfigFile(CLI::App& app, const std::string& path, bool required,
                             ConfigSources* sources);

// The effective configuration as TOML, each key with where its value came
// from (default, file, flag).
std::string EffectiveConfig(const CLI::App& app, const ConfigSources& sources);

}  // namespace ltd
