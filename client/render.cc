#include "render.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include "array_view.h"
#include "byte_size.h"
#include "bytes.h"
#include "duration.h"
#include "hang_render.h"
#include "job_limits.h"
#include "str_util.h"
#include "table.h"
#include "warn_signal.h"

namespace ltd {
namespace {

using google::protobuf::Timestamp;

using render::Line;
using render::Opt;
using render::Time;

std::string Human(int64_t secs) {
  char buf[32];
  if (secs < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(secs));
  } else if (secs < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(secs / 60),
                  static_cast<long long>(secs % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(secs / 3600),
                  static_cast<long long>(secs % 3600 / 60));
  }
  return buf;
}

// How long the job ran (or has run so far).
std::string Elapsed(const v1::Job& job) {
  if (!job.has_started_at()) return "-";
  const int64_t stop = job.has_ended_at() ? job.ended_at().seconds() : std::time(nullptr);
  return Human(std::max<int64_t>(0, stop - job.started_at().seconds()));
}

// What is left of a running job's --time, " (1h05m left)"; "" when none.
std::string TimeLeft(const v1::Job& job) {
  // From when it holds its devices: a STARTING node's rendezvous counts.
  const bool live = job.state() == v1::Job::RUNNING || job.state() == v1::Job::STARTING;
  if (!live || job.time_limit_ms() <= 0 || !job.has_started_at()) return "";
  const int64_t end = job.started_at().seconds() + job.time_limit_ms() / 1000;
  return " (" + Human(std::max<int64_t>(0, end - std::time(nullptr))) + " left)";
}

// The state as ps and show print it: a hung job held for a look is
// "HUNG (held 14m00s left)".
std::string StateText(const v1::Job& job) {
  if (job.state() == v1::Job::RUNNING && job.has_held_until()) {
    const int64_t left = std::max<int64_t>(0, job.held_until().seconds() - std::time(nullptr));
    return "HUNG (held " + Human(left) + " left)";
  }
  return v1::Job::State_Name(job.state());
}

std::string Progress(const v1::Job& job) {
  int64_t step = -1;
  double rate = 0;
  bool straggler = false;
  for (const auto& r : job.ranks()) {
    if (r.has_last_step()) step = step < 0 ? r.last_step() : std::min(step, r.last_step());
    rate = std::max(rate, r.steps_per_second());
    straggler = straggler || r.straggler();
  }
  if (step < 0) return "-";
  if (job.state() != v1::Job::RUNNING) return std::to_string(step);  // a rate only while it runs
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld @ %.1f/s%s", static_cast<long long>(step), rate,
                straggler ? " !" : "");
  return buf;
}

// What ltd puts in place of a field of another user's job it hid.
constexpr const char* kHiddenNote = "(hidden: not your job)";

// Whether ltd hid `path` of the job from this caller (v1::Job::hidden).
bool Hidden(const v1::Job& job, std::string_view path) {
  return std::find(job.hidden().begin(), job.hidden().end(), path) != job.hidden().end();
}

std::string Argv(const v1::Job& job) {
  std::string cmd;
  for (const auto& a : job.argv()) cmd += (cmd.empty() ? "" : " ") + a;
  cmd = DisplayEscape(cmd, Controls::kEscape);
  if (Hidden(job, "argv")) cmd += std::string(" ... arguments ") + kHiddenNote;
  return cmd;
}

// The command as the client labelled it (ltd.launch's "launch train(...)"),
// else its argv.
std::string Command(const v1::Job& job) {
  return job.label().empty() ? Argv(job) : DisplayEscape(job.label(), Controls::kEscape);
}

bool MultiNode(const v1::Job& j) { return j.nnodes() > 1 || !j.rdzv().empty(); }

// "0/2": this node's rank of the run's nodes ("?" until a rendezvous gives
// it); "-" for a single-node job.
std::string NodeOf(const v1::Job& j) {
  if (!MultiNode(j)) return "-";
  return (j.has_node_rank() ? std::to_string(j.node_rank()) : "?") + "/" +
         std::to_string(j.nnodes());
}

// How this node came to be part of the run, and where its ranks meet.
std::string NodesLine(const v1::Job& j) {
  std::string line = "node " + NodeOf(j) + " (" +
                     (j.rdzv().empty() ? std::string("static") : "rendezvous " + Line(j.rdzv())) +
                     "), run " + Line(j.run_id()) + ", master " + Line(j.master_addr()) + ":" +
                     std::to_string(j.master_port());
  if (!j.rdzv().empty() && !j.rdzv_auth().empty()) {
    line +=
        j.rdzv_auth() == "munge" ? ", records sealed with MUNGE" : ", records not authenticated";
  }
  return line;
}

}  // namespace

std::string DescribeCause(const v1::RootCause& c) {
  // A rank of another node is "node 1 rank 0" (ranks are local to their node).
  const std::string rank = c.has_rank() ? std::to_string(c.rank()) : "?";
  const std::string who = c.has_node() && c.reason() != v1::RootCause::remote_failure
                              ? "node " + std::to_string(c.node()) + " rank " + rank
                              : "rank " + rank;
  std::string what;
  switch (c.reason()) {
    case v1::RootCause::exited:
      what = who + " exited with code " + std::to_string(c.exit_code());
      break;
    case v1::RootCause::signaled:
      what = who + " died of signal " + std::to_string(c.signal());
      break;
    case v1::RootCause::hang:
    case v1::RootCause::startup_timeout:
      // No rank when the evidence singled none out: the message says what
      // is known and what was missing.
      what = c.has_rank()                        ? who + " hung"
             : c.reason() == v1::RootCause::hang ? "hang"
                                                 : "start-up timeout";
      break;
    case v1::RootCause::spawn_failed:
      what = "the program could not start";
      break;
    case v1::RootCause::cancelled:
      // By a user ("cancelled by alice"); ltd's shutdown says so in its message.
      what = c.cancelled_by().empty() || c.cancelled_by().find(' ') != std::string::npos
                 ? std::string("cancelled")
                 : "cancelled by " + DisplayEscape(c.cancelled_by(), Controls::kEscape);
      break;
    case v1::RootCause::daemon_lost:
      what = "lost while ltd was away";
      break;
    case v1::RootCause::dependency_failed:
      what = "never ran";
      break;
    case v1::RootCause::time_limit:
      what = "time limit";
      break;
    case v1::RootCause::supervisor_lost:
      what = "lost when its supervisor died";
      break;
    case v1::RootCause::oom:  // the message names the limit
      what = c.message().empty() ? who + " was killed by the OOM killer"
                                 : DisplayEscape(c.message(), Controls::kEscape);
      break;
    case v1::RootCause::remote_failure:
      what = "torn down: node " + (c.has_node() ? std::to_string(c.node()) : std::string("?")) +
             " of the run failed";
      break;
    default:
      what = v1::RootCause::Reason_Name(c.reason());
      break;
  }
  const std::string message = DisplayEscape(c.message(), Controls::kEscape);
  if (!message.empty() && message.find(what) == std::string::npos) what += ": " + message;
  return what;
}

// Which mode watched the job for hangs, and with which timeout.
std::string HeartbeatMode(const v1::Job& j) {
  const std::string timeout =
      j.hang_timeout_ms() > 0 ? FormatDuration(Millis(j.hang_timeout_ms())) : "";
  switch (j.heartbeat_mode()) {
    case v1::Job::EXPLICIT:
      return "explicit (the ranks' own), " +
             (timeout.empty() ? std::string("timeout set by the ranks") : "timeout " + timeout);
    case v1::Job::AUTOMATIC:
      return "automatic, hung when no rank progresses for " + timeout;
    default:
      return std::string("none") +
             (j.auto_heartbeat() ? "" : " (automatic heartbeats off: --no-auto-heartbeat)");
  }
}

std::vector<std::string> HangSummary(const v1::Job& j) {
  if (!j.has_hang_report()) return {};
  const auto& h = j.hang_report();
  const v1::HangReport::Rank* culprit = nullptr;
  for (const auto& r : h.ranks()) {
    if (r.stalled() && !r.in_collective() && !r.stack().empty()) culprit = &r;
    if (culprit != nullptr) break;
  }
  for (const auto& r : h.ranks()) {
    if (culprit == nullptr && r.stalled()) culprit = &r;
  }
  std::vector<std::string> lines;
  if (culprit != nullptr) {
    const std::string who = culprit->has_node()
                                ? Cat("node ", culprit->node(), " rank ", culprit->rank())
                                : Cat("rank ", culprit->rank());
    std::string how = culprit->in_collective() ? "waits in a collective" : "outside any collective";
    if (!culprit->process_state().empty()) how += ", " + Line(culprit->process_state());
    lines.push_back(Cat("hang report: ", who, " stalled first, ", how));
    // The top of its stack: its first frame, not the header before it.
    std::string_view stack = culprit->stack();
    for (size_t at = 0; at < stack.size();) {
      size_t nl = stack.find('\n', at);
      if (nl == std::string_view::npos) nl = stack.size();
      std::string_view frame = stack.substr(at, nl - at);
      at = nl + 1;
      while (!frame.empty() && frame.front() == ' ') frame.remove_prefix(1);
      if (frame.empty() || frame.starts_with("Thread ") || frame.starts_with("Current thread") ||
          frame.starts_with("Stack (most recent")) {
        continue;
      }
      lines.push_back(Cat("  top of its stack: ", Line(std::string(frame.substr(0, 300)))));
      break;
    }
  } else {
    lines.push_back(Cat("hang report: stalled first: ", RankList(h.stalled_ranks())));
  }
  lines.push_back(Cat("the whole report: `ltctl show ", Line(j.id()), "`"));
  return lines;
}

std::string TimeText(const google::protobuf::Timestamp& t) {
  google::protobuf::Timestamp shown = t;
  shown.set_nanos(t.nanos() / 1000 * 1000);  // microseconds at most, whatever ltd sent
  return google::protobuf::util::TimeUtil::ToString(shown);
}

std::string CommandText(const v1::Job& job) { return Command(job); }

void PrintJobTable(const std::vector<v1::Job>& jobs, FILE* out, bool truncate) {
  Table t({"ID", "NAME", "USER", "STATE", "DEVICES", "NODE", "STEP", "ELAPSED", "EXIT", "COMMAND"});
  for (const auto& j : jobs) {
    std::string cmd = Command(j);
    size_t consumed = 0;
    std::string shown = DisplayEscapePrefix(cmd, 37, &consumed);
    if (truncate && consumed < cmd.size()) cmd = shown + "...";
    std::string state = StateText(j);
    if (!j.pending_reason().empty()) state += " (" + Line(j.pending_reason()) + ")";
    t.Add({Line(ShownId(j)), Line(j.name()), Line(j.user()), state, std::to_string(j.devices()),
           NodeOf(j), Progress(j), Elapsed(j) + TimeLeft(j), Opt(j.has_exit_code(), j.exit_code()),
           cmd});
  }
  t.Print(out);
}

std::string Mib(uint64_t mib) {
  if (mib < 1024) return std::to_string(mib) + " MiB";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(mib) / 1024.0);
  return buf;
}

std::string Use(const v1::GpuUse& u) {
  std::string s = Mib(u.memory_used_mib()) + " of " + Mib(u.memory_total_mib());
  if (u.has_utilization()) s += ", " + std::to_string(u.utilization()) + "% busy";
  return s;
}

namespace {

// "rank 1 pid 4242 in D state at request_wait_answer (wchan ...), since
// 2026-12-03 14:22:10": which process, where in the kernel, since when
// ltd found it there.
std::string UnkillableText(const v1::Unkillable& u) {
  std::string line =
      !u.descendant() ? "rank " + std::to_string(u.rank()) + " pid " + std::to_string(u.pid())
      : u.rank() >= 0
          ? "pid " + std::to_string(u.pid()) + " (of rank " + std::to_string(u.rank()) + ")"
          : "pid " + std::to_string(u.pid()) + " (of the job)";
  line += " in " + (u.state().empty() ? std::string("?") : Line(u.state())) + " state";
  // The kernel stack's top frame (root reads it), else the wchan.
  std::string top = u.stack().substr(0, u.stack().find('\n'));
  if (const size_t close = top.find("] "); top.starts_with("[<") && close != std::string::npos) {
    top = top.substr(close + 2);
  }
  top = top.substr(0, top.find('+'));
  if (!top.empty()) line += " at " + Line(top);
  if (!u.wchan().empty() && u.wchan() != top) line += " (wchan " + Line(u.wchan()) + ")";
  line += ", since " + Time(u.has_found_at(), u.found_at());
  return line;
}

}  // namespace

void PrintSlots(const v1::GpusReply& reply, FILE* out) {
  Table t({"SLOT", "GPU", "MINOR", "STATE", "JOB", "USER", "MEMORY", "DETAIL"});
  auto holder = [](const v1::GpuHolder& h) {
    return "pid " + std::to_string(h.pid()) + " (" +
           (h.user().empty() ? std::string("gone") : Line(h.user())) + ") holds " +
           (h.has_memory_mib() ? Mib(h.memory_mib()) : std::string("memory"));
  };
  for (const auto& s : reply.slots()) {
    std::string detail = "-";
    if (s.state() != v1::Slot::QUARANTINED && !s.processes().empty()) {
      detail.clear();
      for (const auto& h : s.processes()) detail += (detail.empty() ? "" : "; ") + holder(h);
      if (s.processes_unlisted() > 0) detail += Cat("; ", s.processes_unlisted(), " more");
    }
    if (s.state() == v1::Slot::QUARANTINED) {
      detail.clear();
      for (const auto& h : s.holders()) detail += (detail.empty() ? "" : "; ") + holder(h);
      if (detail.empty() && !s.job_id().empty()) {
        detail = "job " + Line(s.job_id()) + "'s process that would not die: ";
        for (int i = 0; i < s.unkillable_size(); ++i) {
          detail += (i > 0 ? "; " : "") + UnkillableText(s.unkillable(i));
        }
        if (s.unkillable().empty()) detail += "ltctl show " + Line(s.job_id());
      } else {
        if (detail.empty()) detail = "NVML cannot read it";
        detail += ", since " + Time(s.has_quarantined_since(), s.quarantined_since());
      }
    }
    t.Add({std::to_string(s.slot()), Line(s.gpu()), s.has_minor() ? std::to_string(s.minor()) : "-",
           v1::Slot::State_Name(s.state()), Line(s.job_id()), Line(s.user()),
           s.has_usage() ? Use(s.usage()) : "-", detail});
  }
  t.Print(out);
  if (!reply.gpu_checks()) {
    std::fprintf(out, "GPU checks are off (no NVML): GPUs are reused without a look\n");
  }
  if (!reply.gpu_isolation().empty()) {
    std::fprintf(out, "GPU isolation: %s\n", Line(reply.gpu_isolation()).c_str());
  }
}

namespace {

// CPU microseconds as seconds, to the millisecond.
std::string Seconds(int64_t us) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3fs", static_cast<double>(us) / 1e6);
  return text;
}

// The CPU time of the job's processes over its ended attempts, and which
// were not counted; "" when none was.
std::string CpuTimeText(const v1::Job& j) {
  int64_t total = 0;
  int counted = 0;
  int ended = 0;
  for (const auto& a : j.attempts()) {
    if (!a.has_ended_at()) continue;
    ++ended;
    if (!a.has_cpu_us()) continue;
    ++counted;
    if (__builtin_add_overflow(total, a.cpu_us(), &total)) total = INT64_MAX;
  }
  if (counted == 0) return "";
  std::string text = Seconds(total) + " (its processes' own, from their cgroup)";
  if (counted < ended) {
    text += Cat("; ", ended - counted, " of ", ended, " attempts were not counted");
  }
  return text;
}

}  // namespace

void PrintJob(const v1::Job& j, FILE* out) {
  auto field = [&](const char* label, const std::string& value) {
    std::fprintf(out, "%-14s %s\n", label, value.c_str());
  };
  field("Job:", Line(j.id()) + (j.name().empty() ? "" : " (" + Line(j.name()) + ")"));
  PrintArrayField(j, out);
  field("User:", Line(j.user()));
  field("State:", StateText(j));
  if (j.has_held_until()) {
    std::string pids;
    for (const auto& r : j.ranks()) {
      if (r.state() != v1::Rank::RUNNING) continue;
      pids += (pids.empty() ? "" : ", ") + std::to_string(r.pid());
    }
    field("Held:", "pids " + pids + "; look with `ltctl stack " + Line(j.id()) +
                       "` or `gdb -p PID`; `ltctl kill " + Line(j.id()) + "` ends the hold");
  }
  if (j.time_limit_ms() > 0)
    field("Time limit:", FormatDuration(Millis(j.time_limit_ms())) + TimeLeft(j));
  if (j.warn_signal() != 0) {
    const std::string sig =
        FormatWarnSignal(WarnSignal{j.warn_signal(), Millis(j.warn_signal_before_ms())});
    field("Signal:", j.has_warn_signal_sent_at()
                         ? Cat(sig, ", sent ", Time(true, j.warn_signal_sent_at()), " (",
                               Line(j.warn_signal_why()), ")")
                         : Cat(sig, ", not sent yet"));
  }
  if (!j.pending_reason().empty()) field("Waiting:", Line(j.pending_reason()));
  // Its dependencies, as sbatch spells them: "afterok:3:4,afterany:5".
  std::string deps;
  for (auto [kind, ids] : {std::pair{"afterok", &j.after()}, std::pair{"afterany", &j.after_any()},
                           std::pair{"afternotok", &j.after_notok()}}) {
    if (ids->empty()) continue;
    deps += Cat(deps.empty() ? "" : ",", kind);
    for (const auto& id : *ids) deps += ":" + Line(id);
  }
  if (j.singleton()) deps += deps.empty() ? "singleton" : ",singleton";
  if (!deps.empty()) field("After:", deps);
  field("Exit code:", Opt(j.has_exit_code(), j.exit_code()));
  field("Command:", Command(j));
  if (!j.label().empty()) field("Runs:", Argv(j));
  field("Devices:", std::to_string(j.devices()) +
                        (j.cuda_visible_devices().empty()
                             ? ""
                             : " (CUDA_VISIBLE_DEVICES=" + Line(j.cuda_visible_devices()) + ")"));
  for (const auto& g : j.gpus()) field(("  GPU " + Line(g.gpu()) + ":").c_str(), Use(g));
  if (!j.gpu_isolation().empty()) field("GPU access:", Line(j.gpu_isolation()));
  field("Master port:", std::to_string(j.master_port()));
  if (MultiNode(j)) field("Nodes:", NodesLine(j));
  if (j.rdzv_refused() > 0) {
    const std::string last =
        Hidden(j, "rdzv_refused_last") ? kHiddenNote : Line(j.rdzv_refused_last());
    field("Refused:",
          std::to_string(j.rdzv_refused()) + " record(s) of the run in etcd (last: " + last + ")");
  }
  field("Containment:", Line(j.containment()));
  if (j.mem_bytes() != 0 || j.mem_per_rank_bytes() != 0 || j.cpu_millis() != 0) {
    std::string limits;
    auto add = [&](const std::string& part) { limits += (limits.empty() ? "" : ", ") + part; };
    if (j.mem_bytes() != 0) add("memory " + FormatByteSize(j.mem_bytes()));
    if (j.mem_per_rank_bytes() != 0)
      add("memory per rank " + FormatByteSize(j.mem_per_rank_bytes()));
    if (j.cpu_millis() != 0) add(FormatCpus(j.cpu_millis()) + " CPUs");
    field("Limits:", limits);
  }
  field("Restarts:", std::to_string(j.restart_count()) + " of " + std::to_string(j.max_restarts()));
  field("Heartbeats:", HeartbeatMode(j));
  field("Submitted:", Time(j.has_submitted_at(), j.submitted_at()));
  field("Started:", Time(j.has_started_at(), j.started_at()));
  field("Ended:", Time(j.has_ended_at(), j.ended_at()));
  field("Elapsed:", Elapsed(j));
  if (const std::string cpu = CpuTimeText(j); !cpu.empty()) field("CPU time:", cpu);
  if (j.has_root_cause()) {
    const auto& c = j.root_cause();
    field("Root cause:", DescribeCause(c));
    field("  reason:", v1::RootCause::Reason_Name(c.reason()));
    if (c.has_node()) field("  node:", std::to_string(c.node()));
    field("  rank:", Opt(c.has_rank(), c.rank()));
    field("  at:", Time(c.has_at(), c.at()));
    if (Hidden(j, "root_cause.message")) field("  message:", kHiddenNote);
  }
  for (const auto& u : j.unkillable()) {
    std::string line = UnkillableText(u);
    line += u.has_gone_at() ? "; gone since " + Time(true, u.gone_at())
                            : "; its devices stay out of use until it is gone";
    std::fprintf(out, "unkillable: %s\n", line.c_str());
  }
  if (j.errors().full()) {
    // Only what is known: the ranks filled it, so a write past it failed.
    const auto& e = j.errors();
    std::fprintf(out,
                 "errors/: full (%s in %llu files of at most %s and %llu files, its part of "
                 "ltd's --job-max-log-bytes); a rank's writes past it failed\n",
                 FormatByteSize(e.bytes()).c_str(), static_cast<unsigned long long>(e.files()),
                 FormatByteSize(e.max_bytes()).c_str(),
                 static_cast<unsigned long long>(e.max_files()));
  }
  for (const auto& c : j.errors().cut()) {
    const std::string what =
        c.kept() == 0 ? "not kept" : "cut to its first " + FormatByteSize(c.kept());
    std::fprintf(
        out,
        "errors/: %s (%s long) %s: the copies hold data, not holes, and no more than "
        "errors/'s %s in all\n",
        (Hidden(j, "errors.cut.name") ? std::string("a file ") + kHiddenNote : Line(c.name()))
            .c_str(),
        FormatByteSize(c.size()).c_str(), what.c_str(),
        FormatByteSize(j.errors().max_bytes()).c_str());
  }
  if (j.errors().cut_files() > static_cast<uint64_t>(j.errors().cut_size())) {
    std::fprintf(out, "errors/: %llu more files cut\n",
                 static_cast<unsigned long long>(j.errors().cut_files() - j.errors().cut_size()));
  }
  if (j.nodes_size() > 0) {
    std::fprintf(out, "\n");
    Table nodes({"NODE", "HOST", "STATE", "ROOT CAUSE"});
    for (const auto& n : j.nodes()) {
      nodes.Add({std::to_string(n.node_rank()), Line(n.host()), Line(n.state()),
                 n.has_root_cause() ? DescribeCause(n.root_cause()) : "-"});
    }
    nodes.Print(out);
    if (j.nodes_not_shown() > 0) {
      std::fprintf(out, "... and %d more nodes, not shown (ltd shows 1 MiB of a run's nodes)\n",
                   j.nodes_not_shown());
    }
  }
  std::fprintf(out, "\n");
  // A multi-node job's ranks are this node's: LOCAL_RANK, and RANK beside it.
  const bool multi = MultiNode(j);
  const int first_global = j.has_node_rank() ? j.node_rank() * j.devices() : -1;
  Table ranks(multi ? std::vector<std::string>{"RANK", "GLOBAL", "PID", "STATE", "EXIT", "SIGNAL",
                                               "STEP", "STEPS/S", "LAST HEARTBEAT", ""}
                    : std::vector<std::string>{"RANK", "PID", "STATE", "EXIT", "SIGNAL", "STEP",
                                               "STEPS/S", "LAST HEARTBEAT", ""});
  for (const auto& r : j.ranks()) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.2f", r.steps_per_second());
    std::vector<std::string> row = {std::to_string(r.rank())};
    if (multi) row.push_back(first_global >= 0 ? std::to_string(first_global + r.rank()) : "?");
    for (std::string cell : {std::to_string(r.pid()), v1::Rank::State_Name(r.state()),
                             Opt(r.has_exit_code(), r.exit_code()), Opt(r.has_signal(), r.signal()),
                             Opt(r.has_last_step(), r.last_step()), std::string(rate),
                             Time(r.has_last_heartbeat_at(), r.last_heartbeat_at()),
                             std::string(r.straggler() ? "straggler" : "")}) {
      row.push_back(std::move(cell));
    }
    ranks.Add(std::move(row));
  }
  ranks.Print(out);
  if (j.attempts_size() > 1) {
    std::fprintf(out, "\nAttempts:\n");
    Table t({"RESTART", "PORT", "STARTED", "ENDED", "CPU", "ROOT CAUSE"});
    for (const auto& a : j.attempts()) {
      t.Add({std::to_string(a.restart_count()), std::to_string(a.master_port()),
             Time(a.has_started_at(), a.started_at()), Time(a.has_ended_at(), a.ended_at()),
             a.has_cpu_us() ? Seconds(a.cpu_us()) : "-",
             a.has_root_cause() ? DescribeCause(a.root_cause()) : "-"});
    }
    t.Print(out);
  }
  if (!j.hidden().empty()) {
    std::string what;
    for (const auto& path : j.hidden()) what += (what.empty() ? "" : ", ") + Line(path);
    std::fprintf(out, "\nHidden: %s %s\n", what.c_str(), kHiddenNote);
  }
  if (j.has_hang_report()) PrintHangReport(j, out);
}

namespace render {

std::string Line(const std::string& text) {
  return text.empty() ? "-" : DisplayEscape(text, Controls::kEscape);
}

std::string Time(bool has, const google::protobuf::Timestamp& t) { return has ? TimeText(t) : "-"; }

}  // namespace render
}  // namespace ltd
