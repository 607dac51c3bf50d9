#include "shim_record.h"

#include <nlohmann/json.hpp>

namespace ltd {
namespace {

namespace pb = shim::v1;

// The proto's enums number as model/job.h's: a cast each way, checked.
static_assert(pb::JOB_PENDING == static_cast<int>(JobState::kPending) &&
              pb::JOB_LOST == static_cast<int>(JobState::kLost) &&
              pb::JOB_STARTING == static_cast<int>(JobState::kStarting) &&
              pb::JOB_TIMEOUT == static_cast<int>(JobState::kTimeout) &&
              pb::JOB_OUT_OF_MEMORY == static_cast<int>(JobState::kOutOfMemory) &&
              pb::JOB_NODE_FAIL == static_cast<int>(JobState::kNodeFail));
static_assert(pb::RANK_PENDING == static_cast<int>(RankState::kPending) &&
              pb::RANK_LOST == static_cast<int>(RankState::kLost));
static_assert(pb::CAUSE_EXITED == static_cast<int>(CauseReason::kExited) &&
              pb::CAUSE_SUPERVISOR_LOST == static_cast<int>(CauseReason::kSupervisorLost) &&
              pb::CAUSE_OOM == static_cast<int>(CauseReason::kOom));
static_assert(pb::HEARTBEAT_NONE == static_cast<int>(HeartbeatMode::kNone) &&
              pb::HEARTBEAT_AUTOMATIC == static_cast<int>(HeartbeatMode::kAutomatic));
static_assert(pb::STACK_UNKNOWN == static_cast<int>(StackStatus::kUnknown) &&
              pb::STACK_FAILED == static_cast<int>(StackStatus::kFailed));

// A value of a later release's enum reads as `unknown`, as the JSON
// reader reads a word it does not know.
template <typename E>
E EnumOf(int value, E last, E unknown) {
  return value >= 0 && value <= static_cast<int>(last) ? static_cast<E>(value) : unknown;
}

int64_t Nanos(WallTime t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
WallTime TimeOf(int64_t ns) {
  return WallTime(std::chrono::duration_cast<WallTime::duration>(std::chrono::nanoseconds(ns)));
}

void CauseToProto(const RootCause& c, pb::Record::Cause* out) {
  out->set_rank(c.rank);
  out->set_node(c.node);
  out->set_reason(static_cast<pb::CauseReason>(c.reason));
  out->set_exit_code(c.exit_code);
  out->set_signal(c.signal);
  out->set_at_ns(Nanos(c.at));
  out->set_message(c.message);
  if (c.deadline_at) out->set_deadline_at_ns(Nanos(*c.deadline_at));
  out->set_cancelled_by(c.cancelled_by);
  if (c.remote_reason) out->set_remote_reason(static_cast<pb::CauseReason>(*c.remote_reason));
}

RootCause CauseOf(const pb::Record::Cause& c) {
  RootCause out;
  out.rank = c.rank();
  out.node = c.node();
  out.reason = EnumOf(c.reason(), CauseReason::kOom, CauseReason::kDaemonLost);
  out.exit_code = c.exit_code();
  out.signal = c.signal();
  out.at = TimeOf(c.at_ns());
  out.message = c.message();
  if (c.has_deadline_at_ns()) out.deadline_at = TimeOf(c.deadline_at_ns());
  out.cancelled_by = c.cancelled_by();
  if (c.has_remote_reason()) {
    out.remote_reason = EnumOf(c.remote_reason(), CauseReason::kOom, CauseReason::kDaemonLost);
  }
  return out;
}

// The record without the command line (`argv` false) or environment
// (`env` false), which a record sent each second need not carry again.
void Fill(const Job& job, pb::Record* out, bool argv, bool env) {
  const JobSpec& s = job.spec;
  out->set_id(job.id);
  out->set_name(s.name);
  out->set_user(job.user);
  out->set_uid(s.uid);
  out->set_gid(s.gid);
  out->set_state(static_cast<pb::JobState>(job.state));
  if (job.exit_code) out->set_exit_code(*job.exit_code);
  out->set_devices(s.devices);
  for (int slot : job.device_slots) out->add_device_slots(slot);
  out->set_cuda_visible_devices(job.cuda_visible_devices);
  out->set_isolate_gpus(job.isolate_gpus);
  for (uint32_t minor : job.gpu_minors) out->add_gpu_minors(minor);
  out->set_gpu_isolation(job.gpu_isolation);
  out->set_master_port(job.master_port);
  out->set_restart_count(job.restart_count);
  out->set_max_restarts(s.max_restarts);
  out->set_containment(job.containment);
  out->set_submitted_at_ns(Nanos(job.submitted_at));
  if (job.started_at) out->set_started_at_ns(Nanos(*job.started_at));
  if (job.ended_at) out->set_ended_at_ns(Nanos(*job.ended_at));
  if (job.teardown_at) out->set_teardown_at_ns(Nanos(*job.teardown_at));
  if (job.root_cause) CauseToProto(*job.root_cause, out->mutable_root_cause());
  if (job.hang_report) {
    const HangReport& h = *job.hang_report;
    pb::Record::HangReport* hr = out->mutable_hang_report();
    hr->set_at_ns(Nanos(h.at));
    for (int r : h.stalled_ranks) hr->add_stalled_ranks(r);
    for (int r : h.straggler_ranks) hr->add_straggler_ranks(r);
    for (const HangReportRank& r : h.ranks) {
      pb::Record::HangRank* o = hr->add_ranks();
      o->set_rank(r.rank);
      o->set_last_step(r.last_step);
      if (r.last_heartbeat_at) o->set_last_heartbeat_at_ns(Nanos(*r.last_heartbeat_at));
      o->set_stalled(r.stalled);
      o->set_straggler(r.straggler);
      o->set_in_collective(r.in_collective);
      o->set_process_state(r.process_state);
      o->set_stack(r.stack);
      o->set_stack_status(static_cast<pb::StackStatus>(r.stack_status));
      o->set_stack_note(r.stack_note);
      if (r.node >= 0) o->set_node(r.node);
    }
    for (const MissingNode& m : h.missing_nodes) {
      pb::Record::MissingNode* o = hr->add_missing_nodes();
      o->set_node(m.node);
      o->set_why(m.why);
    }
  }
  out->mutable_ranks()->Reserve(static_cast<int>(job.ranks.size()));
  for (const Rank& r : job.ranks) {
    pb::Record::Rank* o = out->add_ranks();
    o->set_rank(r.rank);
    o->set_pid(r.pid);
    o->set_state(static_cast<pb::RankState>(r.state));
    if (r.exit_code) o->set_exit_code(*r.exit_code);
    if (r.signal) o->set_signal(*r.signal);
    o->set_last_step(r.last_step);
    if (r.last_heartbeat_at) o->set_last_heartbeat_at_ns(Nanos(*r.last_heartbeat_at));
    if (r.started_at) o->set_started_at_ns(Nanos(*r.started_at));
    o->set_error(r.error_message);
    o->set_steps_per_second(r.steps_per_second);
    o->set_straggler(r.straggler);
  }
  for (const Attempt& a : job.attempts) {
    pb::Record::Attempt* o = out->add_attempts();
    o->set_restart_count(a.restart_count);
    o->set_master_port(a.master_port);
    o->set_started_at_ns(Nanos(a.started_at));
    if (a.ended_at) o->set_ended_at_ns(Nanos(*a.ended_at));
    if (a.root_cause) CauseToProto(*a.root_cause, o->mutable_root_cause());
    if (a.cpu) o->set_cpu_us(a.cpu->count());
  }
  if (argv) {
    for (const std::string& arg : s.argv) out->add_argv(arg);
  }
  out->set_cwd(s.cwd);
  out->set_heartbeat_timeout_ms(s.heartbeat_timeout.count());
  out->set_startup_timeout_ms(s.startup_timeout.count());
  out->set_grace_ms(s.grace.count());
  out->set_auto_heartbeat(s.auto_heartbeat);
  for (const std::string& id : s.after) out->add_after(id);
  for (const std::string& id : s.after_any) out->add_after_any(id);
  for (const std::string& id : s.after_notok) out->add_after_notok(id);
  out->set_singleton(s.singleton);
  out->set_heartbeat_mode(static_cast<pb::HeartbeatMode>(job.heartbeat_mode));
  out->set_hang_timeout_ms(job.hang_timeout.count());
  out->set_nnodes(s.nodes.nnodes);
  out->set_node_rank(s.nodes.node_rank);
  out->set_master_addr(s.nodes.master_addr);
  out->set_requested_master_port(s.nodes.master_port);
  out->set_run_id(s.nodes.run_id);
  out->set_rdzv(s.nodes.rdzv);
  out->set_rdzv_timeout_ms(s.nodes.rdzv_timeout.count());
  out->set_rdzv_lease_ms(s.nodes.rdzv_lease.count());
  out->set_rdzv_auth(s.nodes.rdzv_auth);
  out->set_munge_socket(s.nodes.munge_socket);
  out->set_rdzv_refused(job.rdzv_refused);
  out->set_rdzv_refused_last(job.rdzv_refused_last);
  out->set_etcd_ca(s.nodes.etcd_ca);
  out->set_etcd_cert(s.nodes.etcd_cert);
  out->set_etcd_key(s.nodes.etcd_key);
  out->set_etcd_auth_file(s.nodes.etcd_auth_file);
  for (const NodeStatus& n : job.nodes) {
    pb::Record::Node* o = out->add_nodes();
    o->set_node_rank(n.node_rank);
    o->set_host(n.host);
    o->set_state(n.state);
    if (n.root_cause) CauseToProto(*n.root_cause, o->mutable_root_cause());
  }
  // As job.json: the environment only while the job may still (re)start.
  if (env && !IsFinal(job.state)) {
    for (const std::string& kv : s.env) out->add_env(kv);
  }
  for (const ResourceLimit& l : s.rlimits) {
    pb::Record::Limit* o = out->add_rlimits();
    o->set_resource(std::string(ResourceName(l.resource)));
    o->set_soft(l.soft);
    o->set_hard(l.hard);
  }
  out->set_time_limit_ms(s.time_limit.count());
  out->set_hold_on_hang_ms(s.hold_on_hang.count());
  if (job.held_until) out->set_held_until_ns(Nanos(*job.held_until));
  out->set_warn_signal(s.warn_signal.signal);
  out->set_warn_signal_before_ms(s.warn_signal.before.count());
  if (job.warn_signal_sent_at) out->set_warn_signal_sent_ns(Nanos(*job.warn_signal_sent_at));
  out->set_warn_signal_why(job.warn_signal_why);
  out->set_mem_bytes(s.limits.memory_bytes);
  out->set_mem_per_rank_bytes(s.limits.memory_per_rank_bytes);
  out->set_cpu_millis(s.limits.cpu_millis);
  out->set_output(s.output);
  out->set_error(s.error);
  out->set_output_patterns(s.output_patterns);
  out->set_umask(s.umask);
  out->set_submit_token(s.submit_token);
  out->set_label(s.label);
  if (!s.array.job_id.empty()) {
    out->set_array_job_id(s.array.job_id);
    out->set_array_task(s.array.task);
    out->set_array_count(s.array.count);
    out->set_array_throttle(s.array.throttle);
  }
  for (const UnkillableProcess& p : job.unkillable) {
    pb::Record::Unkillable* o = out->add_unkillable();
    o->set_rank(p.rank);
    o->set_pid(p.pid);
    o->set_descendant(p.descendant);
    o->set_start_time(p.start_time);
    o->set_state(p.state);
    o->set_wchan(p.wchan);
    o->set_stack(p.stack);
    o->set_found_at_ns(Nanos(p.found_at));
    if (p.gone_at) o->set_gone_at_ns(Nanos(*p.gone_at));
  }
  if (job.errors != ErrorsDir{}) {
    pb::Record::ErrorsDir* e = out->mutable_errors();
    e->set_max_bytes(job.errors.max_bytes);
    e->set_max_files(job.errors.max_files);
    e->set_bytes(job.errors.bytes);
    e->set_files(job.errors.files);
    e->set_full(job.errors.full);
    for (const CutFile& c : job.errors.cut) {
      pb::Record::ErrorsDir::Cut* o = e->add_cut();
      o->set_name(c.name);
      o->set_kept(c.kept);
      o->set_size(c.size);
    }
    e->set_cut_files(job.errors.cut_files);
  }
}

// job.json's form, as the releases before Record sent it.
std::string JsonRecord(const Job& job, bool slim) {
  nlohmann::json j;
  if (slim) {
    Job copy = job;
    copy.spec.argv.clear();
    j = ToJson(copy);
    j.erase("argv");
  } else {
    j = ToJson(job);
  }
  j.erase("env");
  return j.dump();
}

std::optional<Job> JobOfJson(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return JobFromJson(j);
}

}  // namespace

void ToProto(const Job& job, pb::Record* out) { Fill(job, out, true, true); }

std::optional<Job> FromProto(const pb::Record& r) {
  if (r.id().empty()) return std::nullopt;
  Job job;
  job.id = r.id();
  // Numbered with gaps (model/job.h): a state this release has a name for.
  job.state = ToString(static_cast<JobState>(r.state())) != "UNKNOWN"
                  ? static_cast<JobState>(r.state())
                  : JobState::kLost;
  JobSpec& s = job.spec;
  s.name = r.name();
  job.user = r.user();
  s.uid = r.uid();
  s.gid = r.gid();
  if (r.has_exit_code()) job.exit_code = r.exit_code();
  s.devices = r.devices();
  job.device_slots.assign(r.device_slots().begin(), r.device_slots().end());
  job.cuda_visible_devices = r.cuda_visible_devices();
  job.isolate_gpus = r.isolate_gpus();
  job.gpu_minors.assign(r.gpu_minors().begin(), r.gpu_minors().end());
  job.gpu_isolation = r.gpu_isolation();
  job.master_port = r.master_port();
  job.restart_count = r.restart_count();
  s.max_restarts = r.max_restarts();
  job.containment = r.containment();
  job.submitted_at = TimeOf(r.submitted_at_ns());
  if (r.has_started_at_ns()) job.started_at = TimeOf(r.started_at_ns());
  if (r.has_ended_at_ns()) job.ended_at = TimeOf(r.ended_at_ns());
  if (r.has_teardown_at_ns()) job.teardown_at = TimeOf(r.teardown_at_ns());
  if (r.has_root_cause()) job.root_cause = CauseOf(r.root_cause());
  if (r.has_hang_report()) {
    const pb::Record::HangReport& hr = r.hang_report();
    HangReport h;
    h.at = TimeOf(hr.at_ns());
    h.stalled_ranks.assign(hr.stalled_ranks().begin(), hr.stalled_ranks().end());
    h.straggler_ranks.assign(hr.straggler_ranks().begin(), hr.straggler_ranks().end());
    for (const pb::Record::HangRank& o : hr.ranks()) {
      HangReportRank rr;
      rr.rank = o.rank();
      rr.last_step = o.last_step();
      if (o.has_last_heartbeat_at_ns()) rr.last_heartbeat_at = TimeOf(o.last_heartbeat_at_ns());
      rr.stalled = o.stalled();
      rr.straggler = o.straggler();
      rr.in_collective = o.in_collective();
      rr.process_state = o.process_state();
      rr.stack = o.stack();
      rr.stack_status = EnumOf(o.stack_status(), StackStatus::kFailed, StackStatus::kUnknown);
      rr.stack_note = o.stack_note();
      rr.node = o.has_node() ? o.node() : -1;
      h.ranks.push_back(std::move(rr));
    }
    for (const pb::Record::MissingNode& o : hr.missing_nodes()) {
      h.missing_nodes.push_back({o.node(), o.why()});
    }
    job.hang_report = std::move(h);
  }
  job.ranks.reserve(static_cast<size_t>(r.ranks_size()));
  for (const pb::Record::Rank& o : r.ranks()) {
    Rank rank;
    rank.rank = o.rank();
    rank.pid = o.pid();
    rank.state = EnumOf(o.state(), RankState::kLost, RankState::kLost);
    if (o.has_exit_code()) rank.exit_code = o.exit_code();
    if (o.has_signal()) rank.signal = o.signal();
    rank.last_step = o.last_step();
    if (o.has_last_heartbeat_at_ns()) rank.last_heartbeat_at = TimeOf(o.last_heartbeat_at_ns());
    if (o.has_started_at_ns()) rank.started_at = TimeOf(o.started_at_ns());
    rank.error_message = o.error();
    rank.steps_per_second = o.steps_per_second();
    rank.straggler = o.straggler();
    job.ranks.push_back(std::move(rank));
  }
  for (const pb::Record::Attempt& o : r.attempts()) {
    Attempt a;
    a.restart_count = o.restart_count();
    a.master_port = o.master_port();
    a.started_at = TimeOf(o.started_at_ns());
    if (o.has_ended_at_ns()) a.ended_at = TimeOf(o.ended_at_ns());
    if (o.has_root_cause()) a.root_cause = CauseOf(o.root_cause());
    if (o.has_cpu_us() && o.cpu_us() >= 0) a.cpu = std::chrono::microseconds(o.cpu_us());
    job.attempts.push_back(std::move(a));
  }
  s.argv.assign(r.argv().begin(), r.argv().end());
  s.cwd = r.cwd();
  s.heartbeat_timeout = std::chrono::milliseconds(r.heartbeat_timeout_ms());
  s.startup_timeout = std::chrono::milliseconds(r.startup_timeout_ms());
  s.grace = std::chrono::milliseconds(r.grace_ms());
  s.auto_heartbeat = r.auto_heartbeat();
  s.after.assign(r.after().begin(), r.after().end());
  s.after_any.assign(r.after_any().begin(), r.after_any().end());
  s.after_notok.assign(r.after_notok().begin(), r.after_notok().end());
  s.singleton = r.singleton();
  job.heartbeat_mode = EnumOf(r.heartbeat_mode(), HeartbeatMode::kAutomatic, HeartbeatMode::kNone);
  job.hang_timeout = std::chrono::milliseconds(r.hang_timeout_ms());
  NodeSpec& n = s.nodes;
  n.nnodes = r.nnodes();
  n.node_rank = r.node_rank();
  n.master_addr = r.master_addr();
  n.master_port = r.requested_master_port();
  n.run_id = r.run_id();
  n.rdzv = r.rdzv();
  n.rdzv_timeout = std::chrono::milliseconds(r.rdzv_timeout_ms());
  if (r.rdzv_lease_ms() != 0) n.rdzv_lease = std::chrono::milliseconds(r.rdzv_lease_ms());
  n.rdzv_auth = r.rdzv_auth();
  n.munge_socket = r.munge_socket();
  job.rdzv_refused = r.rdzv_refused();
  job.rdzv_refused_last = r.rdzv_refused_last();
  n.etcd_ca = r.etcd_ca();
  n.etcd_cert = r.etcd_cert();
  n.etcd_key = r.etcd_key();
  n.etcd_auth_file = r.etcd_auth_file();
  for (const pb::Record::Node& o : r.nodes()) {
    NodeStatus ns;
    ns.node_rank = o.node_rank();
    ns.host = o.host();
    ns.state = o.state();
    if (o.has_root_cause()) ns.root_cause = CauseOf(o.root_cause());
    job.nodes.push_back(std::move(ns));
  }
  s.env.assign(r.env().begin(), r.env().end());
  for (const pb::Record::Limit& o : r.rlimits()) {
    auto resource = ResourceByName(o.resource());
    if (resource && o.soft() <= o.hard()) {
      s.rlimits.push_back(ResourceLimit{*resource, o.soft(), o.hard()});
    }
  }
  s.time_limit = std::chrono::milliseconds(r.time_limit_ms());
  s.hold_on_hang = std::chrono::milliseconds(r.hold_on_hang_ms());
  if (r.has_held_until_ns()) job.held_until = TimeOf(r.held_until_ns());
  s.warn_signal.signal = r.warn_signal();
  s.warn_signal.before = std::chrono::milliseconds(r.warn_signal_before_ms());
  if (r.has_warn_signal_sent_ns()) job.warn_signal_sent_at = TimeOf(r.warn_signal_sent_ns());
  job.warn_signal_why = r.warn_signal_why();
  s.limits.memory_bytes = r.mem_bytes();
  s.limits.memory_per_rank_bytes = r.mem_per_rank_bytes();
  s.limits.cpu_millis = r.cpu_millis();
  s.output = r.output();
  s.error = r.error();
  s.umask = r.has_umask() ? r.umask() & 0777 : kDefaultJobUmask;
  s.output_patterns = r.output_patterns() >= kSbatchPatterns ? kSbatchPatterns : kLegacyPatterns;
  if (r.submit_token().size() <= kMaxSubmitTokenBytes) s.submit_token = r.submit_token();
  if (r.label().size() <= kMaxLabelBytes) s.label = r.label();
  if (!r.array_job_id().empty()) {
    s.array = CheckedArrayTask(
        ArrayTask{r.array_job_id(), r.array_task(), r.array_count(), r.array_throttle()});
  }
  for (const pb::Record::Unkillable& o : r.unkillable()) {
    UnkillableProcess p;
    p.rank = o.rank();
    p.pid = o.pid();
    p.descendant = o.descendant();
    p.start_time = o.start_time();
    p.state = o.state();
    p.wchan = o.wchan();
    p.stack = o.stack();
    p.found_at = TimeOf(o.found_at_ns());
    if (o.has_gone_at_ns()) p.gone_at = TimeOf(o.gone_at_ns());
    job.unkillable.push_back(std::move(p));
  }
  if (r.has_errors()) {
    job.errors.max_bytes = r.errors().max_bytes();
    job.errors.max_files = r.errors().max_files();
    job.errors.bytes = r.errors().bytes();
    job.errors.files = r.errors().files();
    job.errors.full = r.errors().full();
    for (const auto& c : r.errors().cut()) {
      if (job.errors.cut.size() >= ErrorsDir::kMaxCutListed) break;
      job.errors.cut.push_back({c.name(), c.kept(), c.size()});
    }
    job.errors.cut_files = r.errors().cut_files();
  }
  return job;
}

pb::Event RecordEventOf(const Job& job, bool final_record, RecordForm form) {
  pb::Event event;
  if (!form.typed) {
    std::string json = JsonRecord(job, form.slim);
    if (final_record) {
      event.set_ended(std::move(json));
    } else {
      event.set_job(std::move(json));
    }
    return event;
  }
  pb::RecordEvent* record = event.mutable_record();
  Fill(job, record->mutable_record(), !form.slim, /*env=*/false);
  record->set_final(final_record);
  record->set_not_saved(job.record_error);
  return event;
}

std::optional<ReceivedRecord> RecordOf(const pb::Event& event) {
  std::optional<Job> job;
  bool final_record = false;
  switch (event.event_case()) {
    case pb::Event::kRecord:
      job = FromProto(event.record().record());
      final_record = event.record().final();
      if (job) job->record_error = event.record().not_saved();
      break;
    case pb::Event::kJob:
      job = JobOfJson(event.job());
      break;
    case pb::Event::kEnded:
      job = JobOfJson(event.ended());
      final_record = true;
      break;
    default:
      return std::nullopt;
  }
  if (!job) return std::nullopt;
  return ReceivedRecord{std::move(*job), final_record};
}

}  // namespace ltd
