// What no job may ask for, whoever sends it: ltd checks every submit with
// this (any client can speak the protocol), ltrun its command line.
#include <signal.h>

#include <algorithm>
#include <cctype>

#include "bytes.h"
#include "duration.h"
#include "job.h"
#include "str_util.h"

namespace ltd {
namespace {

using Millis = std::chrono::milliseconds;
constexpr Millis kMaxTimeout = std::chrono::hours(24 * 365);
// etcd refuses a lease shorter than 1.5 election timeouts (2 s as it
// rounds, by default); past a few minutes a dead node holds the run's
// record, and the other nodes' verdict, for as long.
constexpr Millis kMinRdzvLease = std::chrono::seconds(2);
constexpr Millis kMaxRdzvLease = std::chrono::minutes(5);
constexpr Millis kMaxGrace = std::chrono::hours(24);
constexpr Millis kMaxTime = std::chrono::hours(24 * 365);
// execve takes about this much argv and environment together.
constexpr size_t kMaxArgvAndEnv = 2u << 20;
// An array's records are made in one submit, on ltd's loop, each with the
// whole command line and environment: at most this many bytes of them.
constexpr size_t kMaxArrayBytes = 64u << 20;
// And at most this many strings of them: each costs ltd a string (32 bytes
// and more) for as long as the job is kept, and 300,000 empty ones fit the
// bytes above (measured: 16.6 MB per pending job). Real environments hold
// a few hundred.
constexpr size_t kMaxArgvAndEnvStrings = 16384;
// Beyond the largest clusters; keeps RANK and WORLD_SIZE far from overflow.
constexpr int kMaxNodes = 65536;
constexpr int64_t kMaxWorldSize = 1 << 24;

bool HostChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
         c == ':';
}

// A host name or an IP address as a rank's MASTER_ADDR, nothing else.
absl::Status CheckHost(const char* flag, const std::string& host) {
  if (host.empty() || host.size() > 253 || !std::all_of(host.begin(), host.end(), HostChar)) {
    return absl::InvalidArgumentError(Cat(flag, " '",
                                          DisplayEscapeElided(host, 64, Controls::kEscape),
                                          "' is not a host name or IP address"));
  }
  return absl::OkStatus();
}

absl::Status ValidateNodes(const NodeSpec& n, int devices, int max_restarts) {
  if (n.nnodes < 1 || n.nnodes > kMaxNodes) {
    return absl::InvalidArgumentError(Cat("--nnodes ", n.nnodes, " is outside 1..", kMaxNodes));
  }
  if (int64_t{n.nnodes} * devices > kMaxWorldSize) {
    return absl::InvalidArgumentError(Cat("--nnodes ", n.nnodes, " x --devices ", devices,
                                          " ranks is more than ", kMaxWorldSize,
                                          "; ask for fewer"));
  }
  const bool rdzv = !n.rdzv.empty();
  if (n.node_rank < -1 || n.node_rank >= n.nnodes) {
    return absl::InvalidArgumentError(Cat("--node-rank ", n.node_rank, " is outside 0..",
                                          n.nnodes - 1, " (--nnodes ", n.nnodes, ")"));
  }
  if (n.node_rank == -1 && n.nnodes > 1 && !rdzv) {
    return absl::InvalidArgumentError(Cat("--nnodes ", n.nnodes, " needs --node-rank (0..",
                                          n.nnodes - 1,
                                          ", a different one on each node) or --rdzv"));
  }
  if (n.master_port < 0 || n.master_port > 65535) {
    return absl::InvalidArgumentError(Cat("--master-port ", n.master_port, " is outside 1..65535"));
  }
  if (!n.master_addr.empty()) {
    if (auto s = CheckHost("--master-addr", n.master_addr); !s.ok()) return s;
  }
  if (n.nnodes > 1 && !rdzv && (n.master_addr.empty() || n.master_port == 0)) {
    return absl::InvalidArgumentError(
        "a static multi-node job needs --master-addr and --master-port, the same on every node "
        "(node 0's host and a free port there), or --rdzv");
  }
  if (n.nnodes > 1 && !rdzv && max_restarts > 0) {
    return absl::InvalidArgumentError(
        "--max-restarts of a multi-node job needs --rdzv (every node must restart together)");
  }
  if (n.run_id.size() > 128 || !std::all_of(n.run_id.begin(), n.run_id.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
      })) {
    return absl::InvalidArgumentError(
        Cat("--run-id '", DisplayEscapeElided(n.run_id, 64, Controls::kEscape),
            "' must be at most 128 letters, digits, '-', '_' or '.'"));
  }
  if (rdzv) {
    // etcds://: etcd over TLS (rdzv/etcd_client.h).
    const std::string_view scheme = n.rdzv.starts_with("etcds://") ? "etcds://" : "etcd://";
    const std::string_view rest =
        std::string_view(n.rdzv).substr(n.rdzv.starts_with(scheme) ? scheme.size() : 0);
    const bool ok = n.rdzv.starts_with(scheme) && !rest.empty() && rest.size() <= 1024 &&
                    std::all_of(rest.begin(), rest.end(), [](char c) {
                      return HostChar(c) || c == '[' || c == ']' || c == ',';
                    });
    if (!ok) {
      return absl::InvalidArgumentError(Cat("--rdzv '",
                                            DisplayEscapeElided(n.rdzv, 64, Controls::kEscape),
                                            "' is not etcd://HOST:PORT or etcds://HOST:PORT"));
    }
    if (n.rdzv_timeout.count() <= 0 || n.rdzv_timeout > kMaxTimeout) {
      return absl::InvalidArgumentError(
          Cat("--rdzv-timeout must be between 1ms and ", FormatDuration(kMaxTimeout)));
    }
    if (n.rdzv_lease < kMinRdzvLease || n.rdzv_lease > kMaxRdzvLease ||
        n.rdzv_lease.count() % 1000 != 0) {
      return absl::InvalidArgumentError(Cat("--rdzv-lease must be whole seconds from ",
                                            FormatDuration(kMinRdzvLease), " to ",
                                            FormatDuration(kMaxRdzvLease), " (etcd's lease TTL)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateLimits(const JobLimits& l, const SpecLimits& here) {
  for (const auto& [flag, bytes] :
       {std::pair{"--mem", l.memory_bytes}, std::pair{"--mem-per-rank", l.memory_per_rank_bytes}}) {
    if (bytes != 0 && bytes < kMinJobMemory) {
      return absl::InvalidArgumentError(Cat(flag, " ", bytes,
                                            " bytes is too little to run anything; ask for ",
                                            kMinJobMemoryText, " at least"));
    }
    if (bytes != 0 && !here.no_memory_limit.empty()) {
      return absl::FailedPreconditionError(
          Cat(flag, " cannot be had on this host: ", here.no_memory_limit));
    }
  }
  if (l.memory_bytes != 0 && l.memory_per_rank_bytes > l.memory_bytes) {
    return absl::InvalidArgumentError("--mem-per-rank is more than --mem; ask for at most --mem");
  }
  if (l.cpu_millis != 0) {
    if (l.cpu_millis < 10) {
      return absl::InvalidArgumentError("--cpus must be at least 0.01");
    }
    if (here.cpus > 0 && l.cpu_millis > static_cast<uint64_t>(here.cpus) * 1000) {
      return absl::InvalidArgumentError(Cat("--cpus ", FormatCpus(l.cpu_millis),
                                            " is more than the ", here.cpus,
                                            " CPUs of this host; ask for at most ", here.cpus));
    }
    if (!here.no_cpu_limit.empty()) {
      return absl::FailedPreconditionError(
          Cat("--cpus cannot be had on this host: ", here.no_cpu_limit));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckStringCount(size_t argv, size_t env) {
  if (argv + env <= kMaxArgvAndEnvStrings) return absl::OkStatus();
  return absl::InvalidArgumentError(
      Cat("the program has ", argv, " arguments and ", env,
          " environment strings; ltd takes at most ", kMaxArgvAndEnvStrings,
          " together: unset what the job does not need (env -i, or a file of arguments)"));
}

absl::Status ValidateSpec(const JobSpec& spec, const SpecLimits& limits) {
  const int slots = limits.slots;
  if (spec.devices < 1) return absl::InvalidArgumentError("--devices must be at least 1");
  if (spec.devices > slots) {
    return absl::InvalidArgumentError(Cat("--devices ", spec.devices, " is more than the ", slots,
                                          " this ltd has; ask for at most ", slots));
  }
  if (spec.argv.empty() || spec.argv.front().empty()) {
    return absl::InvalidArgumentError(
        "no program given; usage: ltctl submit --devices N [options] PROGRAM [ARGS...]");
  }
  if (spec.name.size() > 128) {
    return absl::InvalidArgumentError("--name is longer than 128 characters; choose a shorter one");
  }
  if (!spec.name.empty()) {
    if (std::all_of(spec.name.begin(), spec.name.end(), ::isdigit)) {
      return absl::InvalidArgumentError("--name must not be all digits (those are job ids)");
    }
    for (char c : spec.name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
        return absl::InvalidArgumentError(Cat("--name '",
                                              DisplayEscape(spec.name, Controls::kEscape),
                                              "' may only use letters, digits, '-', '_' and '.'"));
      }
    }
  }
  if (spec.cwd.empty() || spec.cwd.front() != '/') {
    return absl::InvalidArgumentError("the working directory must be an absolute path");
  }
  size_t bytes = spec.cwd.size();
  for (const auto* list : {&spec.argv, &spec.env}) {
    for (const std::string& s : *list) bytes += s.size() + 1;
  }
  if (auto s = CheckStringCount(spec.argv.size(), spec.env.size()); !s.ok()) return s;
  if (bytes > kMaxArgvAndEnv) {
    return absl::InvalidArgumentError(Cat("the program's arguments and environment are ", bytes,
                                          " bytes; a program can be started with at most ",
                                          kMaxArgvAndEnv, ": pass less (a file of arguments)"));
  }
  if (const size_t tasks = spec.array_tasks.size(); tasks > 1 && bytes * tasks > kMaxArrayBytes) {
    return absl::InvalidArgumentError(Cat(
        "an array of ", tasks, " tasks of ", bytes, " bytes of arguments and environment each is ",
        bytes * tasks, " bytes of records; one submit makes at most ", kMaxArrayBytes,
        ": submit fewer tasks at once, or pass less (a file of arguments)"));
  }
  struct Range {
    const char* flag;
    Millis value, max;
  };
  for (const Range& r :
       {Range{"--heartbeat-timeout", spec.heartbeat_timeout, kMaxTimeout},
        Range{"--startup-timeout", spec.startup_timeout, kMaxTimeout},
        Range{"--grace", spec.grace, kMaxGrace}, Range{"--time", spec.time_limit, kMaxTime},
        Range{"--hold-on-hang", spec.hold_on_hang, kMaxTimeout}}) {
    if (r.value.count() < 0)
      return absl::InvalidArgumentError(Cat(r.flag, " must not be negative"));
    if (r.value > r.max) {
      return absl::InvalidArgumentError(Cat(r.flag, " ", r.value.count(), "ms is more than ",
                                            FormatDuration(r.max), "; use a shorter one"));
    }
  }
  if (limits.max_time.count() > 0 && spec.time_limit > limits.max_time) {
    // Refused as Slurm's MaxTime refuses, not cut: a job never ends earlier than it asked.
    return absl::InvalidArgumentError(
        Cat("--time ", FormatDuration(spec.time_limit), " is more than this ltd's --max-time ",
            FormatDuration(limits.max_time), "; ask for at most that"));
  }
  if (spec.warn_signal.signal < 0 || spec.warn_signal.signal >= NSIG ||
      (spec.warn_signal.signal != 0 && spec.warn_signal.before.count() <= 0)) {
    return absl::InvalidArgumentError(
        "--signal needs a signal and a time before the end; use SIG@DUR, e.g. USR1@90s");
  }
  if (spec.warn_signal.signal != 0 && spec.time_limit.count() > 0 &&
      spec.warn_signal.before >= spec.time_limit) {
    return absl::InvalidArgumentError(Cat("--signal ", FormatWarnSignal(spec.warn_signal), ": ",
                                          FormatDuration(spec.warn_signal.before),
                                          " is not shorter than --time ",
                                          FormatDuration(spec.time_limit), "; ask for less"));
  }
  if (spec.max_restarts < 0 || spec.max_restarts > limits.max_restarts) {
    return absl::InvalidArgumentError(Cat("--max-restarts ", spec.max_restarts, " is outside 0..",
                                          limits.max_restarts,
                                          ", the limit of this ltd (--max-restarts-limit)"));
  }
  if (auto s = ValidateLimits(spec.limits, limits); !s.ok()) return s;
  return ValidateNodes(spec.nodes, spec.devices, spec.max_restarts);
}

}  // namespace ltd
