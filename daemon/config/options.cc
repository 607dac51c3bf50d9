#include "options.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "byte_size.h"
#include "bytes.h"
#include "config_file.h"

namespace ltd {
namespace {

// The options that are keys: all but those about the file itself.
bool IsKey(const CLI::Option* o) {
  if (o->get_lnames().empty()) return false;
  const std::string& name = o->get_lnames().front();
  return name != "help" && name != "config" && name != "print-config" && name != "version";
}

std::vector<const CLI::Option*> Keys(const CLI::App& app) {
  std::vector<const CLI::Option*> keys;
  for (const CLI::Option* o : app.get_options()) {
    if (IsKey(o)) keys.push_back(o);
  }
  return keys;
}

bool Bare(const std::string& v) {
  if (v == "true" || v == "false") return true;
  return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos &&
         (v == "0" || v[0] != '0');
}

std::string Toml(const std::string& v) {
  if (Bare(v)) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

absl::StatusOr<uint64_t> StateBound(const std::string& value, const std::string& state_dir) {
  if (value != "auto") {
    auto bytes = ParseByteSize(value);
    if (!bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--max-state-bytes '", value, "' is not a size; use e.g. 100G, 0 (no bound) or auto"));
    }
    return *bytes;
  }
  struct statvfs fs {};
  std::string dir = state_dir;
  while (statvfs(dir.c_str(), &fs) != 0) {
    const size_t slash = dir.find_last_of('/');
    if (errno != ENOENT || slash == std::string::npos || dir == "/") return uint64_t{0};
    dir = slash == 0 ? "/" : dir.substr(0, slash);
  }
  return static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize / 2;
}

void AddOptions(CLI::App& app, Options& opt) {
  app.add_option("--socket", opt.socket, "Unix socket to listen on")->capture_default_str();
  app.add_option("--state-dir", opt.state_dir, "job records and rank logs")->capture_default_str();
  auto* devices = app.add_option("--devices", opt.devices,
                                 "N logical device slots (default: the GPUs, else the CPUs)")
                      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--gpus", opt.gpus,
                 "GPU indices jobs are placed on, e.g. 0,1,2,3 (default: every GPU)")
      ->excludes(devices);
  app.add_option("--log-level", opt.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  app.add_option("--containment", opt.containment, "auto, cgroup, subreaper or process-group")
      ->check(CLI::IsMember({"auto", "cgroup", "subreaper", "process-group"}))
      ->capture_default_str();
  app.add_option("--keep-jobs", opt.keep_jobs, "finished jobs whose records and logs are kept")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--admin-group", opt.admin_group,
                 "members of this group may drain and resume ltd, as root may (default: none)");
  app.add_option("--private-data", opt.private_data,
                 "jobs: another user's job shows its owner, name, state, devices, times and "
                 "root-cause kind only (its cwd, arguments, output paths, error text and stacks "
                 "are its owner's, root's and --admin-group's); no: everyone sees them")
      ->check(CLI::IsMember({"jobs", "no"}))
      ->capture_default_str();
  app.add_option("--fd-relay", opt.fd_relay,
                 "auto: file descriptors a client sends over ltd's socket are refused where the "
                 "kernel can (Linux 6.16), else ltd relays its clients' connections and closes "
                 "any sent in a child process; yes: relay always; no: never (on an older "
                 "kernel a local user can then hold a thread of ltd's)")
      ->check(CLI::IsMember({"auto", "yes", "no"}))
      ->capture_default_str();
  app.add_option("--stack-budget", opt.stack_budget,
                 "time a hung job's stacks may take before its teardown; 0: take none")
      ->capture_default_str();
  app.add_option("--user-max-running-jobs", opt.user_max_running_jobs,
                 "jobs one user may run at once; 0: as many as the devices allow")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--user-max-pending-jobs", opt.user_max_pending_jobs,
                 "jobs one user may have waiting; more submits are refused; 0: no limit")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--user-max-connections", opt.user_max_connections,
                 "connections one user may hold open to ltd")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--user-max-connects", opt.user_max_connects,
                 "connections one user may open a second (bursts of twice that); more are "
                 "closed at once; 0: no bound")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--user-max-streams", opt.user_max_streams,
                 "streams (attach, logs, wait, list, attached submit) one user may hold open")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--connection-max-streams", opt.connection_max_streams,
                 "calls one connection may have in progress at once")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--idle-timeout", opt.idle_timeout,
                 "a connection with no call in progress for this long is closed")
      ->capture_default_str();
  app.add_option("--max-state-bytes", opt.max_state_bytes,
                 "the state dir's bound (SIZE, 0: none, auto: half its file system); past it "
                 "the oldest finished jobs go first")
      ->capture_default_str();
  app.add_option("--job-max-log-bytes", opt.job_max_log_bytes,
                 "output kept per job; past it the head and the tail are kept")
      ->capture_default_str();
  app.add_option("--max-restarts-limit", opt.max_restarts_limit,
                 "the largest --max-restarts a job may ask for")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-time", opt.max_time,
                 "the longest --time a job may ask for (longer is refused); a job without "
                 "--time gets this; 0: any")
      ->capture_default_str();
  app.add_option("--restart-backoff", opt.restart_backoff,
                 "wait before a job's first restart, doubling for each next one up to 5m")
      ->capture_default_str();
  app.add_option("--restore-window", opt.restore_window,
                 "how long running jobs outlive ltd (a restart, an upgrade) before their "
                 "supervisors tear them down; 0: every job ends with ltd")
      ->capture_default_str();
  // "true", not CLI11's "1": the default is printed as a TOML value.
  app.add_option("--auto-heartbeat", opt.auto_heartbeat,
                 "watch Python ranks for hangs without code changes (jobs may opt out)")
      ->default_str("true");
  app.add_option("--auto-heartbeat-timeout", opt.auto_heartbeat_timeout,
                 "automatic heartbeats: a job is hung when no rank progresses for this long, "
                 "unless it was submitted with --heartbeat-timeout")
      ->capture_default_str();
  app.add_option("--auto-heartbeat-dir", opt.auto_heartbeat_dir,
                 "the directory of ltd's sitecustomize.py for Python ranks (root's, writable by "
                 "no one else); default: python/autoload beside ltd, else under share/ltd");
  app.add_option("--nvml-library", opt.nvml_library,
                 "NVML to load for GPU checks (tests load a fake one)")
      ->capture_default_str();
  app.add_option("--gpu-leftover-mib", opt.gpu_leftover_mib,
                 "a GPU whose job ended is reused only once no process outside a running job "
                 "holds more than this on it")
      ->capture_default_str();
  app.add_option("--gpu-isolation", opt.gpu_isolation,
                 "a job's processes can open only the GPUs it was given (a cgroup device "
                 "program or v1 devices rules); false lets every job open every GPU")
      ->default_str("true");
  app.add_option("--gpu-sample-interval", opt.gpu_sample_interval,
                 "how often each GPU's memory and utilisation are sampled for `show`")
      ->capture_default_str();
  app.add_option("--unkillable-program", opt.unkillable_program,
                 "run this (absolute path, as root) when a job ends with ranks that did not die "
                 "of SIGKILL, as Slurm's UnkillableStepProgram; off by default");
  app.add_option("--unkillable-program-timeout", opt.unkillable_program_timeout,
                 "the --unkillable-program is killed if it still runs after this")
      ->capture_default_str();
  app.add_option("--rdzv-auth", opt.rdzv_auth,
                 "multi-node runs at etcd: munge (every record a MUNGE credential of its "
                 "writer; a node believes only its owner's), none, or auto (munge where "
                 "--munge-socket exists)")
      ->capture_default_str();
  app.add_option("--munge-socket", opt.munge_socket, "munged's socket, for --rdzv-auth munge")
      ->capture_default_str();
  app.add_option("--etcd-ca", opt.etcd_ca,
                 "etcds:// runs: the CA that signed etcd's certificate (PEM; default: the "
                 "system's)");
  app.add_option("--etcd-cert", opt.etcd_cert,
                 "etcds:// runs: the client certificate ltd's nodes show etcd (PEM)");
  app.add_option("--etcd-key", opt.etcd_key, "its private key (PEM; root's, mode 0600)");
  app.add_option("--etcd-auth-file", opt.etcd_auth_file,
                 "USER:PASSWORD of the etcd user ltd's nodes authenticate as (root's, mode "
                 "0600), so that etcd lets only them write ltd's prefix");
  app.add_option("--metrics-listen", opt.metrics_listen,
                 "serve Prometheus metrics on ADDR (e.g. 127.0.0.1:9464); off by default");
}

std::string ConfigSources::Describe() const {
  return read ? absl::StrCat("configuration from ", path)
              : absl::StrCat("no configuration file (", path,
                             " does not exist): defaults and flags");
}

absl::Status ApplyConfigFile(CLI::App& app, const std::string& path, bool required,
                             ConfigSources* sources) {
  sources->path = path;
  std::vector<std::string> known;
  for (const CLI::Option* o : Keys(app)) {
    const std::string& key = o->get_lnames().front();
    known.push_back(key);
    if (o->count() > 0) sources->source[key] = "flag --" + key;
  }
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 && errno == ENOENT && !required) return absl::OkStatus();
  auto entries = ReadConfigFile(path);
  if (!entries.ok()) {
    if (absl::IsNotFound(entries.status())) {
      return absl::NotFoundError(
          absl::StrCat("config file ", path, " does not exist; fix --config"));
    }
    return entries.status();
  }
  sources->read = true;
  for (const ConfigEntry& e : *entries) {
    const std::string where = absl::StrCat(path, ":", e.line);
    CLI::Option* o = app.get_option_no_throw("--" + e.key);
    if (o == nullptr || !IsKey(o)) {
      const std::string near = NearestKey(e.key, known);
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown key '", DisplayEscapeElided(e.key, 64), "'",
                       near.empty() ? "; see `ltd --help` for the keys"
                                    : absl::StrCat("; did you mean '", near, "'?")));
    }
    if (sources->source.contains(e.key)) continue;  // the flag wins
    try {
      o->add_result(e.value);
      o->run_callback();
    } catch (const CLI::Error& err) {
      // The option's words quote the value: one line, bounded.
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": ", e.key, ": ", DisplayEscapeElided(err.what(), 256, Controls::kEscape)));
    }
    sources->source[e.key] = "file " + where;
  }
  const bool devices = sources->source.contains("devices");
  if (devices && sources->source.contains("gpus")) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": devices and gpus exclude each other; keep one (",
                     sources->source.at("devices"), ", ", sources->source.at("gpus"), ")"));
  }
  return absl::OkStatus();
}

std::string EffectiveConfig(const CLI::App& app, const ConfigSources& sources) {
  std::string out =
      absl::StrCat("# ltd's effective configuration; ",
                   sources.read ? "read " + sources.path : sources.path + " does not exist", "\n");
  for (const CLI::Option* o : Keys(app)) {
    const std::string& key = o->get_lnames().front();
    auto it = sources.source.find(key);
    const std::string value =
        it != sources.source.end() ? absl::StrJoin(o->results(), ",") : o->get_default_str();
    const std::string from = it != sources.source.end() ? it->second : "default";
    if (value.empty() && it == sources.source.end()) {
      absl::StrAppend(&out, "# ", key, " =  (not set)  # default\n");
    } else {
      absl::StrAppend(&out, key, " = ", Toml(value), "  # ", from, "\n");
    }
  }
  return out;
}

}  // namespace ltd
