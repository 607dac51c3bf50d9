#include "daemon_config.h"

#include <sstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "flag_values.h"
#include "spdlog/spdlog.h"

namespace ltd {

absl::StatusOr<DaemonConfig> FromFlags(const Options& opt) {
  DaemonConfig c;
  c.socket = opt.socket;
  c.state_dir = opt.state_dir;
  c.log_level = opt.log_level;
  c.level = spdlog::level::from_str(opt.log_level);
  if (c.level == spdlog::level::off && opt.log_level != "off") {
    return absl::InvalidArgumentError(absl::StrCat("unknown --log-level '", opt.log_level,
                                                   "'; use trace, debug, info, warn or error"));
  }
  c.containment = opt.containment;

  for (auto [flag, text, out] : {
           std::tuple{"--stack-budget", &opt.stack_budget, &c.stack_budget},
           std::tuple{"--idle-timeout", &opt.idle_timeout, &c.idle_timeout},
           std::tuple{"--restart-backoff", &opt.restart_backoff, &c.restart_backoff},
           std::tuple{"--restore-window", &opt.restore_window, &c.restore_window},
           std::tuple{"--auto-heartbeat-timeout", &opt.auto_heartbeat_timeout,
                      &c.auto_heartbeat_timeout},
           std::tuple{"--gpu-sample-interval", &opt.gpu_sample_interval, &c.gpu_sample_interval},
           std::tuple{"--max-time", &opt.max_time, &c.max_time},
           std::tuple{"--unkillable-program-timeout", &opt.unkillable_program_timeout,
                      &c.unkillable_program_timeout},
       }) {
    auto d = DurationFlag(flag, *text);
    if (!d.ok()) return d.status();
    *out = *d;
  }
  if (c.gpu_sample_interval < std::chrono::milliseconds(100)) {
    return absl::InvalidArgumentError("--gpu-sample-interval must be at least 100ms");
  }
  if (c.auto_heartbeat_timeout.count() <= 0) {
    return absl::InvalidArgumentError(
        "--auto-heartbeat-timeout must be positive; use --auto-heartbeat=false to turn it off");
  }
  auto log_bytes = ByteSizeFlag("--job-max-log-bytes", opt.job_max_log_bytes, 1u << 20, "1M");
  if (!log_bytes.ok()) return log_bytes.status();
  c.job_max_log_bytes = *log_bytes;

  if (!opt.gpus.empty()) {
    std::stringstream ss(opt.gpus);
    for (std::string id; std::getline(ss, id, ',');) {
      if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("--gpus takes GPU indices such as 0,1,2,3; got '", opt.gpus, "'"));
      }
      c.gpu_ids.push_back(id);
    }
  }
  c.devices = opt.devices;

  c.keep_jobs = opt.keep_jobs;
  auto bound = StateBound(opt.max_state_bytes, opt.state_dir);
  if (!bound.ok()) return bound.status();
  c.max_state_bytes = *bound;
  c.admin_group = opt.admin_group;
  c.private_jobs = opt.private_data != "no";
  c.fd_relay = opt.fd_relay;
  c.max_restarts_limit = opt.max_restarts_limit;
  c.user_max_running_jobs = opt.user_max_running_jobs;
  c.user_max_pending_jobs = opt.user_max_pending_jobs;
  c.user_max_connections = opt.user_max_connections;
  c.user_max_streams = opt.user_max_streams;
  c.user_max_connects = opt.user_max_connects;
  c.connection_max_streams = opt.connection_max_streams;
  c.auto_heartbeat = opt.auto_heartbeat;
  c.gpu_isolation = opt.gpu_isolation;
  c.auto_heartbeat_dir = opt.auto_heartbeat_dir;
  c.metrics_listen = opt.metrics_listen;
  c.nvml_library = opt.nvml_library;
  c.gpu_leftover_mib = opt.gpu_leftover_mib;
  if (!opt.unkillable_program.empty() && opt.unkillable_program.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("--unkillable-program '", opt.unkillable_program,
                     "' is not an absolute path; give its full path"));
  }
  c.unkillable_program = opt.unkillable_program;
  if (opt.rdzv_auth != "auto" && opt.rdzv_auth != "munge" && opt.rdzv_auth != "none") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv-auth '", opt.rdzv_auth, "' is not munge, none or auto; give one of them"));
  }
  c.rdzv_auth = opt.rdzv_auth;
  if (opt.munge_socket.empty() || opt.munge_socket.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "--munge-socket '", opt.munge_socket, "' is not an absolute path; give munged's socket"));
  }
  c.munge_socket = opt.munge_socket;
  for (auto [flag, value, field] :
       {std::tuple{"--etcd-ca", &opt.etcd_ca, &c.etcd_ca},
        std::tuple{"--etcd-cert", &opt.etcd_cert, &c.etcd_cert},
        std::tuple{"--etcd-key", &opt.etcd_key, &c.etcd_key},
        std::tuple{"--etcd-auth-file", &opt.etcd_auth_file, &c.etcd_auth_file}}) {
    if (!value->empty() && value->front() != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " '", *value, "' is not an absolute path; give its full path"));
    }
    *field = *value;
  }
  if (c.etcd_cert.empty() != c.etcd_key.empty()) {
    return absl::InvalidArgumentError("--etcd-cert and --etcd-key go together; give both or none");
  }
  return c;
}

}  // namespace ltd
