#include "torchrun_args.h"

#include <signal.h>

#include <algorithm>
#include <charconv>

#include "bytes.h"
#include "str_util.h"
#include "warn_signal.h"

namespace ltd {
namespace {

// ltrun's options first, then torchrun's (run.py's order). torchrun's
// PET_ name is its option's longest spelling, '-' as '_', upper case.
constexpr ArgDef kTable[] = {
    // ltrun's own.
    {"devices", "nproc-per-node", 'n', ArgType::kValue, "PET_NPROC_PER_NODE", "N|gpu|cpu|auto",
     "ranks to start on this node: a number, gpu (one per GPU), cpu (one per CPU) or auto (gpu "
     "where there are GPUs, else cpu); default 1"},
    {"name", "", 0, ArgType::kValue, "", "NAME", "a name for the job"},
    {"heartbeat-timeout", "", 0, ArgType::kValue, "", "DUR",
     "a rank whose own heartbeats (ltworker, LT_HEARTBEAT_FD) stop this long is hung; 0 "
     "(default): no such deadline, and Python ranks are still watched automatically, hung when "
     "no rank progresses for 5m (see --no-auto-heartbeat)"},
    {"startup-timeout", "", 0, ArgType::kValue, "", "DUR",
     "a rank's first heartbeat must come within this; 0 (default): no deadline"},
    {"grace", "", 0, ArgType::kValue, "", "DUR", "SIGTERM to SIGKILL at teardown; default 10s"},
    {"time", "", 0, ArgType::kValue, "", "DUR",
     "torn down after running this long (exit code 124); 0 (default): no limit"},
    {"hold-on-hang", "", 0, ArgType::kValue, "", "DUR",
     "after a hang report, leave the ranks as they are this long for eu-stack or gdb, then tear "
     "down (Ctrl-C ends it early); 0 (default): tear down at once"},
    {"signal", "", 0, ArgType::kValue, "", "SIG@DUR",
     "send SIG to each rank's main process DUR before --time runs out, e.g. USR1@90s"},
    {"stack-budget", "", 0, ArgType::kValue, "", "DUR",
     "time a hung job's stacks may take before its teardown; default 5s"},
    {"max-restarts", "", 0, ArgType::kValue, "PET_MAX_RESTARTS", "N",
     "restart the whole job after a failure up to N times; default 0"},
    {"mem", "", 0, ArgType::kValue, "", "SIZE",
     "memory of the whole job (512M, 4G); OOM-killed past it"},
    {"mem-per-rank", "", 0, ArgType::kValue, "", "SIZE", "memory of each rank with its children"},
    {"cpus", "", 0, ArgType::kValue, "", "N", "CPU time of the whole job, in CPUs (4, 1.5)"},
    {"env", "", 0, ArgType::kRepeated, "", "KEY=VALUE", "set for every rank (repeatable)"},
    {"output", "", 'o', ArgType::kValue, "", "PATTERN",
     "also write every rank's output to this file: %j job id, %x name, %t rank, %n node, %N host, "
     "%u user"},
    {"error", "", 'e', ArgType::kValue, "", "PATTERN", "stderr to this file instead (as --output)"},
    {"report", "", 0, ArgType::kValue, "", "FILE", "write the job's final record (JSON) here"},
    {"state-dir", "", 0, ArgType::kValue, "", "DIR",
     "keep the job's record and log here (default: a temporary dir, removed)"},
    {"containment", "", 0, ArgType::kValue, "", "MODE",
     "auto (default), cgroup, subreaper or process-group"},
    {"no-auto-heartbeat", "", 0, ArgType::kFlag, "", "",
     "do not watch Python ranks for hangs automatically"},
    {"nnodes", "", 0, ArgType::kValue, "PET_NNODES", "N|N:N", "nodes of the run; default 1"},
    {"node-rank", "", 0, ArgType::kValue, "PET_NODE_RANK", "R",
     "this node's rank among them, 0..NNODES-1 (--rdzv-backend static)"},
    {"master-addr", "", 0, ArgType::kValue, "PET_MASTER_ADDR", "HOST",
     "node 0's host, the same on every node (--rdzv-backend static)"},
    {"master-port", "", 0, ArgType::kValue, "PET_MASTER_PORT", "PORT",
     "the run's port on node 0 (--rdzv-backend static)"},
    {"run-id", "", 0, ArgType::kValue, "", "ID", "TORCHELASTIC_RUN_ID, the same on every node"},
    {"rdzv", "", 0, ArgType::kValue, "", "URL", "meet the other nodes at etcd://HOST:PORT"},
    {"no-slurm", "", 0, ArgType::kFlag, "", "",
     "ignore Slurm's variables (by default a job step's nodes are the run's)"},
    {"rdzv-timeout", "", 0, ArgType::kValue, "", "DUR",
     "fail when the nodes have not met within this; default 10m"},
    {"rdzv-lease", "", 0, ArgType::kValue, "", "DUR",
     "a node that dies is known gone this long after (etcd lease TTL); default 5s"},
    {"rdzv-auth", "", 0, ArgType::kValue, "", "MODE",
     "munge: every record in etcd a MUNGE credential, and only yours believed; none; auto "
     "(default): munge where --munge-socket exists"},
    {"munge-socket", "", 0, ArgType::kValue, "", "PATH",
     "munged's socket; default /run/munge/munge.socket.2"},
    {"etcd-ca", "", 0, ArgType::kValue, "", "PEM", "etcds://: the CA of etcd's certificate"},
    {"etcd-cert", "", 0, ArgType::kValue, "", "PEM", "etcds://: a client certificate"},
    {"etcd-key", "", 0, ArgType::kValue, "", "PEM", "its private key (yours, mode 0600)"},
    {"etcd-auth-file", "", 0, ArgType::kValue, "", "PATH",
     "USER:PASSWORD of your etcd user (yours, mode 0600)"},
    {"log-level", "", 0, ArgType::kValue, "", "LEVEL",
     "ltrun's own messages: info, warn, error (default)"},
    {"die-with-parent", "", 0, ArgType::kFlag, "", "",
     "tear the job down when the process that started ltrun dies"},
    {"help", "", 'h', ArgType::kFlag, "", "", "print this and exit"},
    {"version", "", 0, ArgType::kFlag, "", "", "print the version and exit"},
    // Hidden: parse the command line and stop (tests/docs/ checks the
    // docs' examples with it).
    {"check-args", "", 0, ArgType::kFlag, "", "", ""},
    // torchrun's.
    {"rdzv-backend", "", 0, ArgType::kValue, "PET_RDZV_BACKEND", "static|etcd|etcd-v2|c10d",
     "torchrun's: how the nodes meet: static (--master-addr, default), etcd or etcd-v2 (an etcd "
     "at --rdzv-endpoint), c10d (the node at --rdzv-endpoint hosts it)"},
    {"rdzv-endpoint", "", 0, ArgType::kValue, "PET_RDZV_ENDPOINT", "HOST:PORT",
     "torchrun's: where the nodes meet"},
    {"rdzv-id", "", 0, ArgType::kValue, "PET_RDZV_ID", "ID",
     "torchrun's: the run's id (as --run-id), the same on every node"},
    {"rdzv-conf", "", 0, ArgType::kValue, "PET_RDZV_CONF", "K=V,...",
     "torchrun's: join_timeout=SECONDS is --rdzv-timeout, is_host=1|0 says which node hosts a "
     "c10d rendezvous; the other keys have no effect"},
    {"standalone", "", 0, ArgType::kFlag, "PET_STANDALONE", "",
     "torchrun's: one node, no rendezvous; --rdzv-* are ignored"},
    {"monitor-interval", "", 0, ArgType::kValue, "PET_MONITOR_INTERVAL", "SECONDS",
     "torchrun's; no effect: ltd learns of a rank's end at once"},
    {"start-method", "", 0, ArgType::kValue, "PET_START_METHOD", "spawn|fork|forkserver",
     "torchrun's; no effect: each rank is a process of its own"},
    {"event-log-handler", "", 0, ArgType::kValue, "PET_EVENT_LOG_HANDLER", "NAME",
     "torchrun's; no effect"},
    {"role", "", 0, ArgType::kValue, "PET_ROLE", "ROLE", "torchrun's; no effect"},
    {"module", "", 'm', ArgType::kFlag, "PET_MODULE", "",
     "torchrun's: PROGRAM is a Python module: each rank runs python3 -u -m PROGRAM"},
    {"no-python", "", 0, ArgType::kFlag, "PET_NO_PYTHON", "",
     "torchrun's: run PROGRAM itself, never with Python"},
    {"run-path", "", 0, ArgType::kFlag, "PET_RUN_PATH", "",
     "torchrun's: PROGRAM is a Python script (run with python3 -u)"},
    {"log-dir", "", 0, ArgType::kValue, "PET_LOG_DIR", "DIR",
     "torchrun's: per-rank log files under DIR/RUN_ID/attempt_0/LOCAL_RANK/ (with --redirects or "
     "--tee)"},
    {"redirects", "", 'r', ArgType::kValue, "PET_REDIRECTS", "0-3|R:S,...",
     "torchrun's: ranks' streams to their log files only (1 stdout, 2 stderr, 3 both; per local "
     "rank as 0:1,1:2)"},
    {"tee", "", 't', ArgType::kValue, "PET_TEE", "0-3|R:S,...",
     "torchrun's: ranks' streams to their log files and the console (as --redirects); -t with a "
     "duration is --time"},
    {"local-ranks-filter", "", 0, ArgType::kValue, "PET_LOCAL_RANKS_FILTER", "R,...",
     "torchrun's: only these local ranks' lines on the console"},
    {"duplicate-stdout-filters", "", 0, ArgType::kValue, "PET_DUPLICATE_STDOUT_FILTERS", "TEXT",
     "torchrun's; no effect"},
    {"duplicate-stderr-filters", "", 0, ArgType::kValue, "PET_DUPLICATE_STDERR_FILTERS", "TEXT",
     "torchrun's; no effect"},
    {"local-addr", "", 0, ArgType::kValue, "PET_LOCAL_ADDR", "HOST",
     "torchrun's: this node's address for the others at a rendezvous"},
    {"logs-specs", "", 0, ArgType::kValue, "", "NAME", "torchrun's; no effect"},
    {"numa-binding", "", 0, ArgType::kValue, "", "MODE", "torchrun's; no effect"},
    {"signals-to-handle", "", 0, ArgType::kValue, "PET_SIGNALS_TO_HANDLE", "SIG,...",
     "torchrun's: more signals that tear the job down (SIGINT, SIGTERM, SIGHUP always do)"},
    {"shutdown-timeout", "", 0, ArgType::kValue, "PET_SHUTDOWN_TIMEOUT", "SECONDS",
     "torchrun's: --grace in seconds"},
    {"virtual-local-rank", "", 0, ArgType::kFlag, "PET_VIRTUAL_LOCAL_RANK", "",
     "torchrun's; no effect: ltd gives each rank its GPU as CUDA_VISIBLE_DEVICES"},
};

std::string Shown(std::string_view text) {
  return DisplayEscapeElided(std::string(text), 80, Controls::kEscape);
}

absl::Status Bad(const ParsedArgs& p, std::string_view name, std::string_view value,
                 std::string_view what) {
  return absl::InvalidArgumentError(
      Cat(p.Spelled(name), " does not take '", Shown(value), "'", what.empty() ? "" : "; ", what));
}

std::optional<long> Integer(std::string_view text) {
  long v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

absl::StatusOr<int> IntIn(const ParsedArgs& p, std::string_view name, long lo, long hi,
                          std::string_view what = "") {
  const std::string& text = *p.Get(name);
  auto v = Integer(text);
  if (!v || *v < lo || *v > hi) return Bad(p, name, text, what);
  return static_cast<int>(*v);
}

// --nproc-per-node: a number of ranks, or what torchrun counts.
absl::StatusOr<int> Devices(const ParsedArgs& p, const MachineFacts& facts) {
  const std::string& text = *p.Get("devices");
  if (text == "gpu" || (text == "auto" && facts.gpus > 0)) {
    if (facts.gpus < 1) {
      return absl::InvalidArgumentError(
          Cat(p.Spelled("devices"), " gpu: ltrun sees no GPU here (/dev/nvidiaN); give a number"));
    }
    return facts.gpus;
  }
  if (text == "cpu" || text == "auto") return std::max(1, facts.cpus);
  if (text == "xpu") {
    return absl::InvalidArgumentError(
        Cat(p.Spelled("devices"), " xpu: ltd runs NVIDIA GPUs; give a number"));
  }
  return IntIn(p, "devices", 1, 1 << 16, "give a number, gpu, cpu or auto");
}

// --nnodes N or N:N; torchrun's elastic MIN:MAX with MIN < MAX is not ltd's.
absl::StatusOr<int> Nodes(const ParsedArgs& p) {
  const std::string& text = *p.Get("nnodes");
  const std::vector<std::string_view> parts = Split(text, ':');
  auto lo = Integer(parts[0]);
  auto hi = parts.size() == 2 ? Integer(parts[1]) : lo;
  if (parts.size() > 2 || !lo || !hi || *lo < 1 || *hi < 1 || *hi > 1 << 16 || *lo > *hi) {
    return Bad(p, "nnodes", text, "give N or N:N, N at least 1");
  }
  if (*lo < *hi) {
    return absl::InvalidArgumentError(
        Cat(p.Spelled("nnodes"), " ", Shown(text), " asks for an elastic run of ", *lo, " to ", *hi,
            " nodes; ltd runs a fixed number of nodes and restarts the run whole after a failure "
            "(--max-restarts): give --nnodes ",
            *hi));
  }
  return static_cast<int>(*lo);
}

// HOST:PORT of a rendezvous (http:// and a trailing '/' taken off), with
// `default_port` where none is given.
absl::StatusOr<std::string> Endpoint(const ParsedArgs& p, std::string text, int default_port) {
  for (const char* scheme : {"http://", "https://"}) {
    if (text.starts_with(scheme)) text = text.substr(std::string_view(scheme).size());
  }
  if (text.ends_with('/')) text.pop_back();
  if (text.find(',') != std::string::npos) {
    return Bad(p, "rdzv-endpoint", text, "give one HOST:PORT");
  }
  const size_t colon = text.rfind(':');
  const bool bracketed = text.starts_with('[');
  if (colon == std::string::npos || (bracketed && text.rfind(']') > colon)) {
    if (text.empty()) return Bad(p, "rdzv-endpoint", text, "give HOST:PORT");
    return Cat(text, ":", default_port);
  }
  auto port = Integer(std::string_view(text).substr(colon + 1));
  if (colon == 0 || !port || *port < 0 || *port > 65535) {
    return Bad(p, "rdzv-endpoint", text, "give HOST:PORT");
  }
  return text;
}

// The port of what Endpoint returned (which has one, 0..65535).
int PortOf(std::string_view host_port) {
  return static_cast<int>(Integer(host_port.substr(host_port.rfind(':') + 1)).value_or(0));
}

bool Truthy(std::string_view v) {
  return v == "1" || v == "true" || v == "True" || v == "yes" || v == "y" || v == "on";
}

absl::Status ReadRdzvConf(const ParsedArgs& p, LaunchArgs& out) {
  const std::string* conf = p.Get("rdzv-conf");
  if (conf == nullptr || conf->empty()) return absl::OkStatus();
  for (std::string_view kv : Split(*conf, ',')) {
    if (kv.empty()) continue;
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return Bad(p, "rdzv-conf", *conf, "give KEY=VALUE,...");
    }
    const std::string_view key = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (key == "join_timeout") {
      auto s = Integer(value);
      if (!s || *s < 1) return Bad(p, "rdzv-conf", *conf, "join_timeout is in seconds");
      out.rdzv_timeout = Cat(*s, "s");
    } else if (key == "is_host") {
      out.c10d_is_host = Truthy(value);
    } else {
      out.no_effect.push_back(Cat(p.Spelled("rdzv-conf"), " ", Shown(key)));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadRendezvous(const ParsedArgs& p, LaunchArgs& out) {
  if (auto s = ReadRdzvConf(p, out); !s.ok()) return s;
  if (p.Has("standalone")) {
    // torchrun: a c10d store of its own on a free port. Here: nothing to
    // meet, one node.
    if (out.nnodes.value_or(1) > 1) {
      return absl::InvalidArgumentError(Cat(p.Spelled("standalone"), " runs one node, not ",
                                            *out.nnodes, "; drop --nnodes or --standalone"));
    }
    out.nnodes = 1;
    return absl::OkStatus();
  }
  const std::string backend = p.Get("rdzv-backend") ? *p.Get("rdzv-backend") : "static";
  const std::string* endpoint = p.Get("rdzv-endpoint");
  if (p.Has("rdzv-id") && !out.run_id) out.run_id = *p.Get("rdzv-id");
  if (backend == "static") {
    // torchrun: the endpoint, when given, is node 0's address and port.
    if (endpoint != nullptr && !endpoint->empty()) {
      auto at = Endpoint(p, *endpoint, 29500);
      if (!at.ok()) return at.status();
      const size_t colon = at->rfind(':');
      if (!out.master_addr) out.master_addr = at->substr(0, colon);
      // Port 0 is torchrun's "any free port": one is picked, as when none
      // is given (a run of several nodes needs node 0's own: the job's
      // spec says so).
      if (const int port = PortOf(*at); !out.master_port && port != 0) out.master_port = port;
    }
    return absl::OkStatus();
  }
  if (backend != "etcd" && backend != "etcd-v2" && backend != "c10d") {
    return Bad(p, "rdzv-backend", backend, "give static, etcd, etcd-v2 or c10d");
  }
  if (endpoint == nullptr || endpoint->empty()) {
    if (backend == "c10d" && out.nnodes.value_or(1) == 1) return absl::OkStatus();
    return absl::InvalidArgumentError(Cat(p.Spelled("rdzv-backend"), " ", backend, " needs ",
                                          "--rdzv-endpoint HOST:PORT, the same on every node"));
  }
  auto at = Endpoint(p, *endpoint, backend == "c10d" ? 29400 : 2379);
  if (!at.ok()) return at.status();
  if (!out.rdzv.empty()) {
    return absl::InvalidArgumentError(
        Cat("--rdzv and ", p.Spelled("rdzv-backend"), " both say where to meet; give one"));
  }
  // One node meets nobody: nothing to host (torchrun's --standalone is
  // c10d at localhost:0).
  if (backend == "c10d" && out.nnodes.value_or(1) == 1) return absl::OkStatus();
  // Every node meets there: "any free port" is no place to meet.
  if (PortOf(*at) == 0) {
    return Bad(p, "rdzv-endpoint", *endpoint, "give HOST:PORT with the port every node meets at");
  }
  if (backend == "c10d") out.c10d_endpoint = *at;
  out.rdzv = Cat("etcd://", *at);
  if (!out.run_id) out.run_id = "none";  // torchrun's --rdzv-id default
  return absl::OkStatus();
}

// The program each rank runs: torchrun runs a script with Python
// (`python -u SCRIPT`), a module with `python -u -m`; ltrun also runs a
// program as it is (an executable, `python3 train.py`), as it always has.
std::vector<std::string> Command(const ParsedArgs& p, const MachineFacts& facts) {
  std::vector<std::string> command = p.program;
  if (command.empty() || p.Has("no-python")) return command;
  const std::string python = facts.python_exec.empty() ? "python3" : facts.python_exec;
  if (p.Has("module")) {
    command.insert(command.begin(), {python, "-u", "-m"});
    return command;
  }
  const std::string& first = command.front();
  if (p.Has("run-path") || first.ends_with(".py") ||
      (facts.plain_file && facts.plain_file(first))) {
    command.insert(command.begin(), {python, "-u"});
  }
  return command;
}

absl::Status ReadLogs(const ParsedArgs& p, LaunchArgs& out) {
  if (const std::string* dir = p.Get("log-dir")) out.log_dir = *dir;
  for (auto [name, field] : {std::pair{"redirects", &out.redirects}, std::pair{"tee", &out.tee}}) {
    const std::string* text = p.Get(name);
    if (text == nullptr) continue;
    auto streams = ParseStdStreams(p.Spelled(name), *text);
    if (!streams.ok()) {
      // -t is ltrun's --time where its value is a duration.
      if (std::string_view(name) == "tee" && p.Spelled(name) == "-t" && !p.Has("time")) {
        out.time_limit = *text;
        continue;
      }
      return streams.status();
    }
    *field = *streams;
  }
  if (const std::string* filter = p.Get("local-ranks-filter"); filter && !filter->empty()) {
    for (std::string_view r : Split(*filter, ',')) {
      auto v = Integer(r);
      if (!v || *v < 0 || *v > 1 << 16) {
        return Bad(p, "local-ranks-filter", *filter, "give local ranks as 0,1,2");
      }
      out.local_ranks_filter.insert(static_cast<int>(*v));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadSignals(const ParsedArgs& p, LaunchArgs& out) {
  if (const std::string* text = p.Get("signals-to-handle")) {
    for (std::string_view name : Split(*text, ',')) {
      std::optional<int> sig = SignalNumber(name);
      if (!sig || *sig == SIGKILL || *sig == SIGSTOP) {
        return Bad(p, "signals-to-handle", *text, "give signal names such as SIGTERM,SIGUSR1");
      }
      out.stop_signals.push_back(*sig);
    }
  }
  if (p.Has("shutdown-timeout") && !p.Has("grace")) {
    auto s = IntIn(p, "shutdown-timeout", 0, 1 << 30, "give whole seconds");
    if (!s.ok()) return s.status();
    out.grace = Cat(*s, "s");
  }
  return absl::OkStatus();
}

}  // namespace

std::span<const ArgDef> LtrunArgTable() { return kTable; }

int StdStreams::For(int local_rank) const {
  auto it = by_rank.find(local_rank);
  return it != by_rank.end() ? it->second : all;
}

bool StdStreams::Any() const {
  if (all != 0) return true;
  for (const auto& [rank, s] : by_rank) {
    if (s != 0) return true;
  }
  return false;
}

absl::StatusOr<StdStreams> ParseStdStreams(std::string_view flag, std::string_view text) {
  StdStreams out;
  auto bad = [&] {
    return absl::InvalidArgumentError(
        Cat(flag, " does not take '", Shown(text),
            "'; give 0-3 (1 stdout, 2 stderr, 3 both) or RANK:N,..."));
  };
  auto stream = [](std::string_view s) -> std::optional<int> {
    auto v = Integer(s);
    if (!v || *v < 0 || *v > 3) return std::nullopt;
    return static_cast<int>(*v);
  };
  if (text.find(':') == std::string_view::npos) {
    auto s = stream(text);
    if (!s) return bad();
    out.all = *s;
    return out;
  }
  for (std::string_view item : Split(text, ',')) {
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos) return bad();
    auto rank = Integer(item.substr(0, colon));
    auto s = stream(item.substr(colon + 1));
    if (!rank || *rank < 0 || *rank > 1 << 16 || !s) return bad();
    out.by_rank[static_cast<int>(*rank)] = *s;
  }
  return out;
}

absl::StatusOr<LaunchArgs> ReadLaunchArgs(std::span<const std::string> words, const EnvLookup& env,
                                          const MachineFacts& facts) {
  auto parsed = ParseArgs(kTable, words, env);
  if (!parsed.ok()) return parsed.status();
  const ParsedArgs& p = *parsed;
  LaunchArgs out;
  out.help = p.Has("help");
  out.version = p.Has("version");
  out.check_args = p.Has("check-args");
  if (out.help || out.version) return out;
  auto text = [&](std::string_view name, std::string& field) {
    if (const std::string* v = p.Get(name)) field = *v;
  };
  text("name", out.name);
  text("heartbeat-timeout", out.heartbeat_timeout);
  text("startup-timeout", out.startup_timeout);
  text("grace", out.grace);
  text("time", out.time_limit);
  text("hold-on-hang", out.hold_on_hang);
  text("signal", out.warn_signal);
  text("stack-budget", out.stack_budget);
  text("mem", out.mem);
  text("mem-per-rank", out.mem_per_rank);
  text("cpus", out.cpus);
  text("output", out.output);
  text("error", out.error);
  text("report", out.report);
  text("state-dir", out.state_dir);
  text("containment", out.containment);
  text("log-level", out.log_level);
  text("rdzv", out.rdzv);
  text("rdzv-timeout", out.rdzv_timeout);
  text("rdzv-lease", out.rdzv_lease);
  text("rdzv-auth", out.rdzv_auth);
  text("munge-socket", out.munge_socket);
  text("etcd-ca", out.etcd_ca);
  text("etcd-cert", out.etcd_cert);
  text("etcd-key", out.etcd_key);
  text("etcd-auth-file", out.etcd_auth_file);
  text("local-addr", out.local_addr);
  if (auto it = p.values.find("env"); it != p.values.end()) out.env = it->second;
  out.auto_heartbeat = !p.Has("no-auto-heartbeat");
  out.slurm = !p.Has("no-slurm");
  out.die_with_parent = p.Has("die-with-parent");
  if (out.containment != "auto" && out.containment != "cgroup" && out.containment != "subreaper" &&
      out.containment != "process-group") {
    return Bad(p, "containment", out.containment, "give auto, cgroup, subreaper or process-group");
  }
  if (p.Has("devices")) {
    auto d = Devices(p, facts);
    if (!d.ok()) return d.status();
    out.devices = *d;
  }
  if (p.Has("max-restarts")) {
    auto r = IntIn(p, "max-restarts", 0, 1 << 20);
    if (!r.ok()) return r.status();
    out.max_restarts = *r;
  }
  if (p.Has("nnodes")) {
    auto n = Nodes(p);
    if (!n.ok()) return n.status();
    out.nnodes = *n;
  }
  if (p.Has("node-rank")) {
    auto r = IntIn(p, "node-rank", 0, 1 << 16);
    if (!r.ok()) return r.status();
    out.node_rank = *r;
  }
  if (p.Has("master-port")) {
    auto r = IntIn(p, "master-port", 1, 65535);
    if (!r.ok()) return r.status();
    out.master_port = *r;
  }
  if (const std::string* a = p.Get("master-addr")) out.master_addr = *a;
  if (const std::string* r = p.Get("run-id")) out.run_id = *r;
  if (const std::string* m = p.Get("start-method");
      m && *m != "spawn" && *m != "fork" && *m != "forkserver") {
    return Bad(p, "start-method", *m, "give spawn, fork or forkserver");
  }
  if (auto s = ReadRendezvous(p, out); !s.ok()) return s;
  if (auto s = ReadLogs(p, out); !s.ok()) return s;
  if (auto s = ReadSignals(p, out); !s.ok()) return s;
  for (const char* name :
       {"monitor-interval", "start-method", "event-log-handler", "role", "duplicate-stdout-filters",
        "duplicate-stderr-filters", "logs-specs", "numa-binding", "virtual-local-rank"}) {
    if (p.Has(name)) out.no_effect.push_back(p.Spelled(name));
  }
  if (p.Has("standalone")) {
    for (const char* name : {"rdzv-backend", "rdzv-endpoint", "rdzv-id"}) {
      if (p.Has(name)) out.no_effect.push_back(Cat(p.Spelled(name), " (with --standalone)"));
    }
  }
  out.command = Command(p, facts);
  return out;
}

std::string NoEffectLine(const LaunchArgs& args) {
  if (args.no_effect.empty()) return "";
  return Cat(Join(args.no_effect, ", "), args.no_effect.size() == 1 ? " has" : " have",
             " no effect under ltrun (torchrun's; see ltrun(1))");
}

}  // namespace ltd
