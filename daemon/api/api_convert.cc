#include "api_convert.h"

#include <algorithm>
#include <climits>
#include <tuple>
#include <unordered_map>

#include "absl/strings/ascii.h"
#include "bytes.h"
#include "dependency.h"
#include "duration.h"
#include "flag_values.h"
#include "hang_report.h"
#include "job_array.h"
#include "output_pattern.h"
#include "resource_limits.h"
#include "str_util.h"
#include "straggler.h"

namespace ltd {
namespace {

// Linux's MAX_ARG_STRLEN: execve refuses any longer argument or
// environment string (E2BIG).
constexpr size_t kMaxArgBytes = 32 * 4096;
// A job id or name (names are at most 128 bytes).
constexpr size_t kMaxRefBytes = 128;
// --master-addr, --run-id, --rdzv: host names and ids, never long.
constexpr size_t kMaxRdzvBytes = 1024;
constexpr int kMaxAfter = 64;  // --after per job
// Durations beyond this are a mistake (or an overflow waiting to happen);
// ltctl's own duration parser stops at the same bound.

}  // namespace

void SetTime(WallTime t, google::protobuf::Timestamp* out) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch());
  int64_t secs = us.count() / 1'000'000;
  int64_t micros = us.count() % 1'000'000;
  if (micros < 0) {  // before 1970: Timestamp's nanos are never negative
    --secs;
    micros += 1'000'000;
  }
  out->set_seconds(secs);
  out->set_nanos(static_cast<int32_t>(micros * 1000));
}

namespace {

using ::ltd::SetTime;  // beside the overload below, not hidden by it

template <typename Setter>
void SetTime(const std::optional<WallTime>& t, Setter mutable_field) {
  if (t) SetTime(*t, mutable_field());
}

// The proto's enum values are named as the model's names its values
// (model/job.cc), in capitals or not: that table is the only one, and
// each proto value is found by name once. A name the proto lacks is its
// 0, *_UNSPECIFIED (api_convert_test checks there is none).
template <typename P, typename E>
P ByName(E value, bool (*parse)(const std::string&, P*)) {
  static const std::vector<P> table = [parse] {
    std::vector<P> t;
    // The model's values are below 64, with gaps (JobState's sbatch
    // states); where it has none, its table says UNKNOWN.
    for (int i = 0; i < 64; ++i) {
      const std::string name(ToString(static_cast<E>(i)));
      P p{};
      if (name == "UNKNOWN" || (!parse(name, &p) && !parse(absl::AsciiStrToUpper(name), &p))) {
        p = P{};
      }
      t.push_back(p);
    }
    return t;
  }();
  const auto i = static_cast<size_t>(value);
  return i < table.size() ? table[i] : P{};
}

}  // namespace

v1::Rank::State ToProto(RankState s) { return ByName(s, &v1::Rank::State_Parse); }
v1::HangReport::Rank::StackStatus ToProto(StackStatus s) {
  return ByName(s, &v1::HangReport::Rank::StackStatus_Parse);
}
v1::RootCause::Reason ToProto(CauseReason r) { return ByName(r, &v1::RootCause::Reason_Parse); }
v1::Job::HeartbeatMode ToProto(HeartbeatMode m) { return ByName(m, &v1::Job::HeartbeatMode_Parse); }

namespace {

// The command as display text within `limit` bytes; a cut one ends in the
// mark as an element of its own, so that no argument reads as if it said so.
// `cut`: bytes after `argv` that a summary left out.
void SetArgv(const std::vector<std::string>& argv, uint64_t cut, size_t limit, v1::Job* out) {
  size_t budget = limit;
  for (size_t i = 0; i < argv.size(); ++i) {
    size_t consumed = 0;
    std::string text = DisplayEscapePrefix(argv[i], budget, &consumed);
    if (consumed == argv[i].size()) {
      budget -= text.size();
      out->add_argv(std::move(text));
      continue;
    }
    uint64_t omitted = argv[i].size() - consumed + cut;
    for (size_t j = i + 1; j < argv.size(); ++j) omitted += argv[j].size();
    if (!text.empty()) out->add_argv(std::move(text));
    out->add_argv(ElisionMark(omitted));
    out->set_argv_truncated(true);
    return;
  }
  if (cut > 0) {
    out->add_argv(ElisionMark(cut));
    out->set_argv_truncated(true);
  }
}

// What CheckPosixString takes, without building its words.
bool PosixStringOk(std::string_view value) {
  return value.size() <= kMaxArgBytes && value.find('\0') == std::string_view::npos;
}

// NUL ends a C string: the kernel would cut the value there without a word.
absl::Status CheckPosixString(std::string_view value, const std::string& what, const char* kind) {
  if (value.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        Cat(what, " contains a NUL byte; ", kind, " cannot (remove it)"));
  }
  if (value.size() > kMaxArgBytes) {
    return absl::InvalidArgumentError(Cat(what, " is ", value.size(),
                                          " bytes; Linux passes at most ", kMaxArgBytes,
                                          " bytes per argument or variable"));
  }
  return absl::OkStatus();
}

}  // namespace

v1::Job::State ToProto(JobState s) { return ByName(s, &v1::Job::State_Parse); }

void ToProto(const RootCause& c, size_t text_limit, v1::RootCause* out) {
  if (c.rank >= 0) out->set_rank(c.rank);
  if (c.node >= 0) out->set_node(c.node);
  out->set_reason(ToProto(c.reason));
  out->set_exit_code(c.exit_code);
  out->set_signal(c.signal);
  SetTime(c.at, out->mutable_at());
  out->set_message(DisplayEscapeElided(c.message, text_limit));
  out->set_cancelled_by(DisplayEscapeElided(c.cancelled_by, text_limit));
}

namespace {

void ToProto(const UnkillableProcess& p, size_t text_limit, v1::Unkillable* u) {
  u->set_rank(p.rank);
  u->set_pid(p.pid);
  u->set_descendant(p.descendant);
  u->set_state(DisplayEscapeElided(p.state, text_limit));
  u->set_wchan(DisplayEscapeElided(p.wchan, text_limit));
  u->set_stack(DisplayEscapeElided(p.stack, text_limit));
  SetTime(p.found_at, u->mutable_found_at());
  SetTime(p.gone_at, [&] { return u->mutable_gone_at(); });
}

void ToProto(const GpuSample& s, v1::GpuUse* out) {
  out->set_gpu(DisplayEscape(s.gpu));
  out->set_memory_used_mib(s.used_mib);
  out->set_memory_total_mib(s.total_mib);
  if (s.utilization) out->set_utilization(*s.utilization);
  SetTime(s.at, out->mutable_sampled_at());
}

}  // namespace

void ToProto(const Job& job, const ViewLimits& limits, v1::Job* out) {
  const JobSpec& s = job.spec;
  out->set_id(DisplayEscape(job.id));
  out->set_name(DisplayEscapeElided(s.name, limits.text));
  out->set_user(DisplayEscapeElided(job.user, limits.text));
  out->set_uid(s.uid);
  out->set_gid(s.gid);
  out->set_state(ToProto(job.state));
  if (job.exit_code) out->set_exit_code(*job.exit_code);
  out->set_devices(s.devices);
  for (int slot : job.device_slots) out->add_device_slots(slot);
  out->set_cuda_visible_devices(DisplayEscapeElided(job.cuda_visible_devices, limits.text));
  out->set_gpu_isolation(DisplayEscapeElided(job.gpu_isolation, limits.text));
  out->set_master_port(job.master_port);
  out->set_restart_count(job.restart_count);
  out->set_max_restarts(s.max_restarts);
  out->set_containment(DisplayEscapeElided(job.containment, limits.text));
  out->set_mem_bytes(s.limits.memory_bytes);
  out->set_mem_per_rank_bytes(s.limits.memory_per_rank_bytes);
  out->set_cpu_millis(s.limits.cpu_millis);
  for (const UnkillableProcess& p : job.unkillable) ToProto(p, limits.text, out->add_unkillable());
  if (job.errors != ErrorsDir{}) {
    v1::ErrorsDir* e = out->mutable_errors();
    e->set_max_bytes(job.errors.max_bytes);
    e->set_max_files(job.errors.max_files);
    e->set_bytes(job.errors.bytes);
    e->set_files(job.errors.files);
    e->set_full(job.errors.full);
    for (const CutFile& c : job.errors.cut) {
      v1::ErrorsDir::Cut* o = e->add_cut();
      o->set_name(DisplayEscapeElided(c.name, limits.text));
      o->set_kept(c.kept);
      o->set_size(c.size);
    }
    e->set_cut_files(job.errors.cut_files);
  }
  SetTime(job.submitted_at, out->mutable_submitted_at());
  SetTime(job.started_at, [&] { return out->mutable_started_at(); });
  SetTime(job.ended_at, [&] { return out->mutable_ended_at(); });
  SetTime(job.teardown_at, [&] { return out->mutable_teardown_at(); });
  SetTime(job.held_until, [&] { return out->mutable_held_until(); });
  SetTime(job.warn_signal_sent_at, [&] { return out->mutable_warn_signal_sent_at(); });
  out->set_warn_signal_why(DisplayEscapeElided(job.warn_signal_why, limits.text));
  if (job.root_cause) ToProto(*job.root_cause, limits.text, out->mutable_root_cause());
  if (job.hang_report) {
    const HangReport& h = *job.hang_report;
    auto* hr = out->mutable_hang_report();
    SetTime(h.at, hr->mutable_at());
    for (int r : h.stalled_ranks) hr->add_stalled_ranks(r);
    for (int r : h.straggler_ranks) hr->add_straggler_ranks(r);
    for (const HangReportRank& r : h.ranks) {
      auto* pr = hr->add_ranks();
      pr->set_rank(r.rank);
      if (r.last_step >= 0) pr->set_last_step(r.last_step);
      SetTime(r.last_heartbeat_at, [&] { return pr->mutable_last_heartbeat_at(); });
      pr->set_stalled(r.stalled);
      pr->set_straggler(r.straggler);
      pr->set_in_collective(r.in_collective);
      pr->set_process_state(DisplayEscapeElided(r.process_state, limits.text));
      pr->set_stack(DisplayEscapeElided(r.stack, limits.text));
      pr->set_stack_status(ToProto(r.stack_status));
      pr->set_stack_note(DisplayEscapeElided(r.stack_note, limits.text));
      if (r.node >= 0) pr->set_node(r.node);
    }
    for (const MissingNode& m : h.missing_nodes) {
      auto* pm = hr->add_missing_nodes();
      pm->set_node(m.node);
      pm->set_why(DisplayEscapeElided(m.why, limits.text));
    }
  }
  // Progress marks are live: a straggler only while the job runs, a rate
  // only while the rank does.
  const std::vector<bool> stragglers = Stragglers(job.ranks, job.heartbeat_mode);
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    const Rank& r = job.ranks[i];
    auto* pr = out->add_ranks();
    pr->set_rank(r.rank);
    pr->set_pid(r.pid);
    pr->set_state(ToProto(r.state));
    if (r.exit_code) pr->set_exit_code(*r.exit_code);
    if (r.signal) pr->set_signal(*r.signal);
    if (r.last_step >= 0) pr->set_last_step(r.last_step);
    SetTime(r.last_heartbeat_at, [&] { return pr->mutable_last_heartbeat_at(); });
    SetTime(r.started_at, [&] { return pr->mutable_started_at(); });
    pr->set_steps_per_second(r.state == RankState::kRunning ? r.steps_per_second
                                                            : AverageStepsPerSecond(r));
    pr->set_straggler(job.state == JobState::kRunning && stragglers[i]);
    pr->set_error(DisplayEscapeElided(r.error_message, limits.text));
  }
  for (const Attempt& a : job.attempts) {
    auto* pa = out->add_attempts();
    pa->set_restart_count(a.restart_count);
    pa->set_master_port(a.master_port);
    SetTime(a.started_at, pa->mutable_started_at());
    SetTime(a.ended_at, [&] { return pa->mutable_ended_at(); });
    if (a.root_cause) ToProto(*a.root_cause, limits.text, pa->mutable_root_cause());
    if (a.cpu) pa->set_cpu_us(a.cpu->count());
  }
  SetArgv(s.argv, job.table.argv_cut, limits.argv_text, out);
  out->set_cwd(DisplayEscapeElided(s.cwd, limits.text));
  out->set_heartbeat_timeout_ms(s.heartbeat_timeout.count());
  out->set_startup_timeout_ms(s.startup_timeout.count());
  out->set_grace_ms(s.grace.count());
  out->set_time_limit_ms(s.time_limit.count());
  out->set_hold_on_hang_ms(s.hold_on_hang.count());
  out->set_warn_signal(s.warn_signal.signal);
  out->set_warn_signal_before_ms(s.warn_signal.before.count());
  out->set_heartbeat_mode(ToProto(job.heartbeat_mode));
  out->set_hang_timeout_ms(job.hang_timeout.count());
  out->set_auto_heartbeat(s.auto_heartbeat);
  const NodeSpec& n = s.nodes;
  out->set_nnodes(n.nnodes);
  if (const int node = NodeRankOf(n); node >= 0) out->set_node_rank(node);
  out->set_master_addr(
      DisplayEscapeElided(n.master_addr.empty() ? "127.0.0.1" : n.master_addr, limits.text));
  out->set_run_id(DisplayEscapeElided(n.run_id.empty() ? job.id : n.run_id, limits.text));
  out->set_rdzv(DisplayEscapeElided(n.rdzv, limits.text));
  out->set_rdzv_timeout_ms(n.rdzv.empty() ? 0 : n.rdzv_timeout.count());
  if (!n.rdzv.empty()) out->set_rdzv_auth(n.rdzv_auth);
  out->set_rdzv_refused(job.rdzv_refused);
  out->set_rdzv_refused_last(DisplayEscapeElided(job.rdzv_refused_last, limits.text));
  // A run's nodes up to the view's bytes for them (a run may have 65,536),
  // then how many more there are.
  size_t nodes_bytes = 0;
  for (size_t i = 0; i < job.nodes.size(); ++i) {
    if (nodes_bytes >= limits.nodes) {
      out->set_nodes_not_shown(static_cast<int32_t>(job.nodes.size() - i));
      break;
    }
    const NodeStatus& node = job.nodes[i];
    auto* pn = out->add_nodes();
    pn->set_node_rank(node.node_rank);
    pn->set_host(DisplayEscapeElided(node.host, limits.text));
    pn->set_state(DisplayEscapeElided(node.state, limits.text));
    if (node.root_cause) ToProto(*node.root_cause, limits.text, pn->mutable_root_cause());
    nodes_bytes += pn->ByteSizeLong();
  }
  for (const std::string& id : s.after) out->add_after(DisplayEscape(id));
  for (const std::string& id : s.after_any) out->add_after_any(DisplayEscape(id));
  for (const std::string& id : s.after_notok) out->add_after_notok(DisplayEscape(id));
  out->set_singleton(s.singleton);
  out->set_output(DisplayEscapeElided(s.output, limits.text));
  out->set_label(DisplayEscapeElided(s.label, limits.text));
  out->set_error(DisplayEscapeElided(s.error, limits.text));
  if (job.state == JobState::kRunning) {
    for (const GpuSample& g : job.table.gpu_usage) ToProto(g, out->add_gpus());
  }
  if (!s.array.job_id.empty()) {
    out->set_array_job_id(DisplayEscape(s.array.job_id));
    out->set_array_task_id(s.array.task);
    out->set_array_task_count(s.array.count);
    out->set_array_throttle(s.array.throttle);
  }
}

void ToProto(const SlotView& slot, v1::Slot* out) {
  out->set_slot(slot.slot);
  out->set_gpu(DisplayEscape(slot.gpu));
  switch (slot.state) {
    case SlotView::State::kFree:
      out->set_state(v1::Slot::FREE);
      break;
    case SlotView::State::kBusy:
      out->set_state(v1::Slot::BUSY);
      out->set_job_id(DisplayEscape(slot.job_id));
      out->set_user(DisplayEscapeElided(slot.user, kListLimits.text));
      break;
    case SlotView::State::kQuarantined:
      out->set_state(v1::Slot::QUARANTINED);
      // Held by what a job left (UnkillableWatch): whose, as for a busy one.
      out->set_job_id(DisplayEscape(slot.job_id));
      out->set_user(DisplayEscapeElided(slot.user, kListLimits.text));
      break;
  }
  auto holder = [](const GpuHolder& h, v1::GpuHolder* out) {
    out->set_pid(h.pid);
    out->set_user(DisplayEscapeElided(h.user, kListLimits.text));
    if (h.used_mib) out->set_memory_mib(*h.used_mib);
  };
  if (slot.quarantine) {
    SetTime(slot.quarantine->since, out->mutable_quarantined_since());
    for (const GpuHolder& h : slot.quarantine->holders) holder(h, out->add_holders());
  }
  if (slot.minor) out->set_minor(*slot.minor);
  for (const GpuHolder& h : slot.processes) holder(h, out->add_processes());
  out->set_processes_unlisted(static_cast<uint32_t>(slot.processes_unlisted));
  // Anyone sees the slots: of the kernel stack (root's to read), where
  // it is now only, as world-readable wchan says.
  for (UnkillableProcess p : slot.unkillable) {
    p.stack = KernelTopFrame(p.stack);
    ToProto(p, kListLimits.text, out->add_unkillable());
  }
  if (slot.usage) ToProto(*slot.usage, out->mutable_usage());
}

void FillEnded(const Job& job, v1::Ended* out) {
  out->set_job_id(DisplayEscape(job.id));
  out->set_state(ToProto(job.state));
  out->set_exit_code(job.exit_code.value_or(1));
  if (job.root_cause) ToProto(*job.root_cause, kShowLimits.text, out->mutable_root_cause());
}

double AverageStepsPerSecond(const Rank& r) {
  if (r.last_step <= 0 || !r.started_at || !r.last_heartbeat_at) return 0;
  const double seconds =
      std::chrono::duration<double>(*r.last_heartbeat_at - *r.started_at).count();
  return seconds > 0 ? static_cast<double>(r.last_step) / seconds : 0;
}

absl::StatusOr<JobSpec> SpecFromRequest(const v1::SubmitRequest& req,
                                        const std::vector<ResourceLimit>& limits) {
  JobSpec spec;
  spec.devices = req.devices();
  spec.name = req.name();
  if (spec.name.size() > kMaxRefBytes) {
    return absl::InvalidArgumentError(
        Cat("--name is ", spec.name.size(), " bytes; choose one of at most ", kMaxRefBytes));
  }
  // Each string is looked at below, and an --env replaces its key: more
  // strings than any job may have are refused first (the count of --env
  // too, which only add or replace).
  if (auto s = CheckStringCount(static_cast<size_t>(req.argv_size()),
                                static_cast<size_t>(req.env_size()));
      !s.ok()) {
    return s;
  }
  for (int i = 0; i < req.argv_size(); ++i) {
    if (!PosixStringOk(req.argv(i))) {
      const std::string what = i == 0 ? "argv[0] (PROGRAM)" : Cat("argv[", i, "]");
      return CheckPosixString(req.argv(i), what, "POSIX arguments");
    }
  }
  spec.argv.assign(req.argv().begin(), req.argv().end());
  if (auto s = CheckPosixString(req.cwd(), "the working directory", "paths"); !s.ok()) return s;
  if (req.cwd().size() >= PATH_MAX) {
    return absl::InvalidArgumentError(Cat("the working directory is ", req.cwd().size(),
                                          " bytes; Linux paths are shorter than ", PATH_MAX,
                                          "; submit from a shorter one"));
  }
  spec.cwd = req.cwd();
  for (int i = 0; i < req.env_size(); ++i) {
    if (!PosixStringOk(req.env(i))) {
      return CheckPosixString(req.env(i), Cat("env[", i, "] (the client's environment)"),
                              "environment strings");
    }
  }
  spec.env.assign(req.env().begin(), req.env().end());
  // Each --env replaces its key in the environment: a bound keeps that
  // linear in what a request may carry.
  constexpr int kMaxExtraEnv = 1024;
  if (req.extra_env_size() > kMaxExtraEnv) {
    return absl::InvalidArgumentError(Cat(req.extra_env_size(), " --env options; at most ",
                                          kMaxExtraEnv,
                                          " are taken: put the rest in the "
                                          "environment ltctl is run with"));
  }
  // Each --env's key ("K="), and the last --env of each: the one kept.
  std::unordered_map<std::string_view, int> last;
  for (int i = 0; i < req.extra_env_size(); ++i) {
    const std::string& kv = req.extra_env(i);
    if (absl::Status s = EnvFlag(kv); !s.ok()) return s;
    const auto eq = kv.find('=');
    if (!PosixStringOk(kv)) {
      return CheckPosixString(
          kv, Cat("--env ", DisplayEscapeElided(kv.substr(0, eq), 64, Controls::kEscape)),
          "environment strings");
    }
    last[std::string_view(kv).substr(0, eq + 1)] = i;
  }
  // One pass, whatever the counts: the environment's strings of a key an
  // --env sets go, and each key's last --env is added, in their order.
  if (!last.empty()) {
    std::erase_if(spec.env, [&](const std::string& e) {
      const auto eq = e.find('=');
      return eq != std::string::npos && last.contains(std::string_view(e).substr(0, eq + 1));
    });
    for (int i = 0; i < req.extra_env_size(); ++i) {
      const std::string& kv = req.extra_env(i);
      if (last.at(std::string_view(kv).substr(0, kv.find('=') + 1)) == i) spec.env.push_back(kv);
    }
  }
  // The submitter's limits, each no higher than the admin's for them.
  constexpr int kMaxLimits = 64;
  if (req.rlimits_size() > kMaxLimits) {
    return absl::InvalidArgumentError(
        Cat(req.rlimits_size(), " resource limits; at most ", kMaxLimits, " are taken"));
  }
  std::vector<AskedLimit> asked;
  for (const v1::ResourceLimit& l : req.rlimits())
    asked.push_back({l.resource(), l.soft(), l.hard()});
  auto ranks = RankLimits(asked, limits);
  if (!ranks.ok()) return ranks.status();
  spec.rlimits = std::move(*ranks);
  // Ranges are the job model's to judge (JobManager::Submit), whoever asks.
  spec.heartbeat_timeout = Millis(req.heartbeat_timeout_ms());
  spec.startup_timeout = Millis(req.startup_timeout_ms());
  spec.auto_heartbeat = !req.no_auto_heartbeat();
  spec.grace = Millis(req.grace_ms());
  spec.time_limit = Millis(req.time_limit_ms());
  spec.hold_on_hang = Millis(req.hold_on_hang_ms());
  spec.warn_signal = WarnSignal{req.warn_signal(), Millis(req.warn_signal_before_ms())};
  spec.max_restarts = req.max_restarts();
  spec.limits.memory_bytes = req.mem_bytes();
  spec.limits.memory_per_rank_bytes = req.mem_per_rank_bytes();
  spec.limits.cpu_millis = req.cpu_millis();
  // Ranges and forms are ValidateSpec's; only what would not fit is here.
  NodeSpec& n = spec.nodes;
  n.nnodes = req.nnodes() == 0 ? 1 : req.nnodes();
  n.node_rank = req.has_node_rank() ? req.node_rank() : -1;
  if (req.has_node_rank() && req.node_rank() < 0) {
    return absl::InvalidArgumentError(Cat("--node-rank ", req.node_rank(), " must be >= 0"));
  }
  for (const auto& [flag, value] :
       {std::pair{"--master-addr", &req.master_addr()}, std::pair{"--run-id", &req.run_id()},
        std::pair{"--rdzv", &req.rdzv()}}) {
    if (value->size() > kMaxRdzvBytes) {
      return absl::InvalidArgumentError(
          Cat(flag, " is ", value->size(), " bytes; at most ", kMaxRdzvBytes, " are allowed"));
    }
  }
  n.master_addr = req.master_addr();
  n.master_port = req.master_port();
  n.run_id = req.run_id();
  n.rdzv = req.rdzv();
  if (req.rdzv_timeout_ms() != 0) n.rdzv_timeout = Millis(req.rdzv_timeout_ms());
  if (req.rdzv_lease_ms() != 0) n.rdzv_lease = Millis(req.rdzv_lease_ms());
  if (req.rdzv_auth() != "" && req.rdzv_auth() != "munge" && req.rdzv_auth() != "none") {
    return absl::InvalidArgumentError("--rdzv-auth is not munge or none; give one of them");
  }
  n.rdzv_auth = req.rdzv_auth();  // "": ltd's, settled at submit
  if (req.after_size() > kMaxAfter) {
    return absl::InvalidArgumentError(Cat("--after is given ", req.after_size(),
                                          " times; a job may wait for at most ", kMaxAfter));
  }
  for (const std::string& ref : req.after()) {
    if (auto s = CheckJobRef(ref); !s.ok()) {
      return absl::InvalidArgumentError(Cat("--after: ", s.message()));
    }
  }
  spec.after.assign(req.after().begin(), req.after().end());
  if (!req.dependency().empty()) {
    auto deps = ParseDependency(req.dependency());
    if (!deps.ok()) return deps.status();
    for (const DependencyRef& d : deps->refs) {
      if (auto s = CheckJobRef(d.job); !s.ok()) {
        return absl::InvalidArgumentError(
            Cat("--dependency ", ToString(d.kind), ": ", s.message()));
      }
      (d.kind == DependencyKind::kAfterOk    ? spec.after
       : d.kind == DependencyKind::kAfterAny ? spec.after_any
                                             : spec.after_notok)
          .push_back(d.job);
    }
    spec.singleton = deps->singleton;
    const size_t n = spec.after.size() + spec.after_any.size() + spec.after_notok.size();
    if (n > static_cast<size_t>(kMaxAfter)) {
      return absl::InvalidArgumentError(Cat("--after and --dependency name ", n,
                                            " jobs; a job may wait for at most ", kMaxAfter));
    }
  }
  for (auto [flag, pattern, field] : {std::tuple{"--output", &req.output(), &spec.output},
                                      std::tuple{"--error", &req.error(), &spec.error}}) {
    if (pattern->empty()) continue;
    if (auto s = CheckOutputPattern(flag, *pattern); !s.ok()) return s;
    *field = pattern->front() == '/' ? *pattern : Cat(spec.cwd, "/", *pattern);
  }
  if (req.has_umask()) {
    if (req.umask() > 0777) {
      return absl::InvalidArgumentError(
          Cat("umask ", req.umask(), " is no umask; send a mode of 0 to 0777"));
    }
    spec.umask = static_cast<mode_t>(req.umask());
  }
  if (req.submit_token().size() > kMaxSubmitTokenBytes) {
    return absl::InvalidArgumentError(Cat("submit_token is ", req.submit_token().size(),
                                          " bytes; send at most ", kMaxSubmitTokenBytes));
  }
  spec.submit_token = req.submit_token();
  if (req.label().size() > kMaxLabelBytes || req.label().find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(Cat("label is ", req.label().size(),
                                          " bytes or has a NUL byte; send at most ", kMaxLabelBytes,
                                          " bytes of text"));
  }
  spec.label = req.label();
  if (!req.array().empty()) {
    auto array = ParseArraySpec(req.array());
    if (!array.ok()) return array.status();
    // A task is a job on this node; the nodes of a run would each make
    // an array of their own, and no rendezvous knows tasks.
    if (spec.nodes.nnodes > 1 || !spec.nodes.rdzv.empty()) {
      return absl::InvalidArgumentError(
          "--array makes single-node jobs; drop --nnodes and --rdzv, or --array");
    }
    spec.array_tasks = std::move(array->tasks);
    spec.array.throttle = array->throttle;
  }
  // %a is a task's id: a job that is none has nothing to fill in.
  for (auto [flag, pattern] :
       {std::pair{"--output", &spec.output}, std::pair{"--error", &spec.error}}) {
    if (pattern->empty() || !spec.array_tasks.empty()) continue;
    auto parsed = ParseOutputPattern(flag, *pattern);
    if (parsed.ok() && PatternHasArrayTask(*parsed)) {
      return absl::InvalidArgumentError(Cat(
          flag, ": %a is an array task's id, and this job is no array; give --array or drop %a"));
    }
  }
  return spec;
}

absl::Status CheckJobRef(std::string_view ref) {
  if (ref.empty()) return absl::InvalidArgumentError("no job given; give a job id or name");
  if (ref.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        "JOB contains a NUL byte; give a job id or name (`ltctl ps -a` lists them)");
  }
  if (ref.size() > kMaxRefBytes) {
    return absl::InvalidArgumentError(Cat("JOB is ", ref.size(),
                                          " bytes; a job id or name is at most ", kMaxRefBytes,
                                          " (`ltctl ps -a` lists them)"));
  }
  return absl::OkStatus();
}

}  // namespace ltd
