// The job record's JSON (job.h: ToJson, JobFromJson), as the state dir
// keeps it and `--json` prints it; what another release wrote reads back.
#include <limits.h>

#include <algorithm>
#include <cctype>
#include <type_traits>
#include <utility>

#include "bytes.h"
#include "job.h"
#include "str_util.h"

namespace ltd {
namespace {

nlohmann::json OptTime(const std::optional<WallTime>& t) {
  return t ? nlohmann::json(FormatTime(*t)) : nlohmann::json(nullptr);
}

template <typename T>
nlohmann::json Opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::optional<WallTime> TimeField(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return ParseTime(it->get<std::string>());
}

template <typename T>
constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <typename T>
constexpr bool kIsIntegerList = false;
template <typename T>
constexpr bool kIsIntegerList<std::vector<T>> = kIsInteger<T>;

// Where an integer is meant, an integer it must be: nlohmann turns a
// float into one with a cast, undefined past the integer's range.
template <typename T>
bool IntegersWhereMeant(const nlohmann::json& v) {
  if constexpr (kIsInteger<T>) {
    return v.is_number_integer();
  } else if constexpr (kIsIntegerList<T>) {
    return v.is_array() &&
           std::all_of(v.begin(), v.end(), [](const auto& e) { return e.is_number_integer(); });
  }
  return true;
}

template <typename T>
std::optional<T> Field(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null() || !IntegersWhereMeant<T>(*it)) return std::nullopt;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// A bytes field in either of BytesToJson's forms.
std::optional<std::string> BytesField(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  return BytesFromJson(*it);
}

// A list of supplementary groups: each a gid (an unsigned number below
// (gid_t)-1), at most the kernel's NGROUPS_MAX of them; anything else is
// no list at all, never a wrong one.
std::optional<std::vector<gid_t>> GroupsField(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() > NGROUPS_MAX) return std::nullopt;
  std::vector<gid_t> out;
  out.reserve(it->size());
  for (const auto& g : *it) {
    if (!g.is_number_integer() || (!g.is_number_unsigned() && g.get<int64_t>() < 0) ||
        g.get<uint64_t>() >= static_cast<gid_t>(-1)) {
      return std::nullopt;
    }
    out.push_back(static_cast<gid_t>(g.get<uint64_t>()));
  }
  return out;
}

nlohmann::json BytesList(const std::vector<std::string>& items) {
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& item : items) out.push_back(BytesToJson(item));
  return out;
}

std::vector<std::string> BytesListField(const nlohmann::json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& item : *it) {
    if (auto bytes = BytesFromJson(item)) out.push_back(std::move(*bytes));
  }
  return out;
}

std::optional<RootCause> CauseFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  RootCause c;
  c.rank = Field<int>(j, "rank").value_or(-1);
  c.node = Field<int>(j, "node").value_or(-1);
  c.reason = ParseCauseReason(Field<std::string>(j, "reason").value_or(""))
                 .value_or(CauseReason::kDaemonLost);
  c.exit_code = Field<int>(j, "exit_code").value_or(0);
  c.signal = Field<int>(j, "signal").value_or(0);
  c.at = TimeField(j, "at").value_or(WallTime{});
  c.message = BytesField(j, "message").value_or("");
  c.deadline_at = TimeField(j, "deadline_at");
  c.cancelled_by = BytesField(j, "cancelled_by").value_or("");
  if (auto r = Field<std::string>(j, "remote_reason")) c.remote_reason = ParseCauseReason(*r);
  return c;
}

}  // namespace

nlohmann::json ToJson(const RootCause& c) {
  nlohmann::json out = {
      {"rank", c.rank >= 0 ? nlohmann::json(c.rank) : nlohmann::json(nullptr)},
      {"node", c.node >= 0 ? nlohmann::json(c.node) : nlohmann::json(nullptr)},
      {"reason", ToString(c.reason)},
      {"exit_code", c.exit_code},
      {"signal", c.signal},
      {"at", FormatTime(c.at)},
      {"message", BytesToJson(c.message)},
  };
  if (c.deadline_at) out["deadline_at"] = FormatTime(*c.deadline_at);
  if (!c.cancelled_by.empty()) out["cancelled_by"] = BytesToJson(c.cancelled_by);
  if (c.remote_reason) out["remote_reason"] = ToString(*c.remote_reason);
  return out;
}

nlohmann::json ToJson(const Job& job) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const Rank& r : job.ranks) {
    ranks.push_back({
        {"rank", r.rank},
        {"pid", r.pid},
        {"state", ToString(r.state)},
        {"exit_code", Opt(r.exit_code)},
        {"signal", Opt(r.signal)},
        {"last_step", r.last_step >= 0 ? nlohmann::json(r.last_step) : nlohmann::json(nullptr)},
        {"last_heartbeat_at", OptTime(r.last_heartbeat_at)},
        {"started_at", OptTime(r.started_at)},
        {"steps_per_second", r.steps_per_second},
        {"straggler", r.straggler},
        {"error", BytesToJson(r.error_message)},
    });
  }
  nlohmann::json attempts = nlohmann::json::array();
  for (const Attempt& a : job.attempts) {
    attempts.push_back({
        {"restart_count", a.restart_count},
        {"master_port", a.master_port},
        {"started_at", FormatTime(a.started_at)},
        {"ended_at", OptTime(a.ended_at)},
        {"root_cause", a.root_cause ? ToJson(*a.root_cause) : nlohmann::json(nullptr)},
        {"cpu_us", a.cpu ? nlohmann::json(a.cpu->count()) : nlohmann::json(nullptr)},
    });
  }
  nlohmann::json nodes = nlohmann::json::array();
  for (const NodeStatus& n : job.nodes) {
    nodes.push_back({
        {"node_rank", n.node_rank},
        {"host", BytesToJson(n.host)},
        {"state", BytesToJson(n.state)},
        {"root_cause", n.root_cause ? ToJson(*n.root_cause) : nlohmann::json(nullptr)},
    });
  }
  nlohmann::json hang = nullptr;
  if (job.hang_report) {
    const HangReport& h = *job.hang_report;
    nlohmann::json hr = nlohmann::json::array();
    for (const HangReportRank& r : h.ranks) {
      hr.push_back({
          {"rank", r.rank},
          {"node", r.node >= 0 ? nlohmann::json(r.node) : nlohmann::json(nullptr)},
          {"last_step", r.last_step >= 0 ? nlohmann::json(r.last_step) : nlohmann::json(nullptr)},
          {"last_heartbeat_at", OptTime(r.last_heartbeat_at)},
          {"stalled", r.stalled},
          {"straggler", r.straggler},
          {"in_collective", r.in_collective},
          {"process_state", BytesToJson(r.process_state)},
          {"stack", BytesToJson(r.stack)},
          {"stack_status", ToString(r.stack_status)},
          {"stack_note", BytesToJson(r.stack_note)},
      });
    }
    nlohmann::json missing = nlohmann::json::array();
    for (const MissingNode& m : h.missing_nodes) {
      missing.push_back({{"node", m.node}, {"why", BytesToJson(m.why)}});
    }
    hang = {{"at", FormatTime(h.at)},
            {"stalled_ranks", h.stalled_ranks},
            {"straggler_ranks", h.straggler_ranks},
            {"ranks", hr},
            {"missing_nodes", missing}};
  }
  const JobSpec& s = job.spec;
  nlohmann::json out = {
      {"id", job.id},
      {"name", BytesToJson(s.name)},
      {"user", BytesToJson(job.user)},
      {"uid", s.uid},
      {"gid", s.gid},
      {"state", ToString(job.state)},
      {"exit_code", Opt(job.exit_code)},
      {"devices", s.devices},
      {"device_slots", job.device_slots},
      {"cuda_visible_devices", BytesToJson(job.cuda_visible_devices)},
      {"isolate_gpus", job.isolate_gpus},
      {"gpu_minors", job.gpu_minors},
      {"gpu_isolation", BytesToJson(job.gpu_isolation)},
      {"master_port", job.master_port},
      {"restart_count", job.restart_count},
      {"max_restarts", s.max_restarts},
      {"containment", BytesToJson(job.containment)},
      {"submitted_at", FormatTime(job.submitted_at)},
      {"started_at", OptTime(job.started_at)},
      {"ended_at", OptTime(job.ended_at)},
      {"teardown_at", OptTime(job.teardown_at)},
      {"held_until", OptTime(job.held_until)},
      {"warn_signal_sent_at", OptTime(job.warn_signal_sent_at)},
      {"warn_signal_why", BytesToJson(job.warn_signal_why)},
      {"root_cause", job.root_cause ? ToJson(*job.root_cause) : nlohmann::json(nullptr)},
      {"hang_report", hang},
      {"ranks", ranks},
      {"attempts", attempts},
      {"argv", BytesList(s.argv)},
      {"cwd", BytesToJson(s.cwd)},
      {"heartbeat_timeout_ms", s.heartbeat_timeout.count()},
      {"startup_timeout_ms", s.startup_timeout.count()},
      {"grace_ms", s.grace.count()},
      {"time_limit_ms", s.time_limit.count()},
      {"hold_on_hang_ms", s.hold_on_hang.count()},
      {"warn_signal", s.warn_signal.signal},
      {"warn_signal_before_ms", s.warn_signal.before.count()},
      {"auto_heartbeat", s.auto_heartbeat},
      {"after", s.after},
      {"after_any", s.after_any},
      {"after_notok", s.after_notok},
      {"singleton", s.singleton},
      {"output", BytesToJson(s.output)},
      {"error", BytesToJson(s.error)},
      {"output_patterns", s.output_patterns},
      {"umask", s.umask},
      {"heartbeat_mode", ToString(job.heartbeat_mode)},
      {"hang_timeout_ms", job.hang_timeout.count()},
      {"nnodes", s.nodes.nnodes},
      {"node_rank",
       s.nodes.node_rank >= 0 ? nlohmann::json(s.nodes.node_rank) : nlohmann::json(nullptr)},
      {"master_addr", BytesToJson(s.nodes.master_addr)},
      {"requested_master_port", s.nodes.master_port},
      {"run_id", BytesToJson(s.nodes.run_id)},
      {"rdzv", BytesToJson(s.nodes.rdzv)},
      {"rdzv_timeout_ms", s.nodes.rdzv_timeout.count()},
      {"rdzv_lease_ms", s.nodes.rdzv_lease.count()},
      {"rdzv_auth", s.nodes.rdzv_auth},
      {"munge_socket", BytesToJson(s.nodes.munge_socket)},
      {"etcd_ca", BytesToJson(s.nodes.etcd_ca)},
      {"etcd_cert", BytesToJson(s.nodes.etcd_cert)},
      {"etcd_key", BytesToJson(s.nodes.etcd_key)},
      {"etcd_auth_file", BytesToJson(s.nodes.etcd_auth_file)},
      {"rdzv_refused", job.rdzv_refused},
      {"rdzv_refused_last", BytesToJson(job.rdzv_refused_last)},
      {"nodes", nodes},
  };
  // The environment while the job may still (re)start: a PENDING job
  // survives ltd's restart, and a supervisor is started from the record.
  // Its secrets go no further than they must, so a final record drops it.
  if (!IsFinal(job.state)) out["env"] = BytesList(s.env);
  if (!IsFinal(job.state) && s.groups) out["groups"] = *s.groups;
  if (!s.rlimits.empty()) {
    nlohmann::json limits = nlohmann::json::array();
    for (const ResourceLimit& l : s.rlimits) {
      limits.push_back({{"resource", std::string(ResourceName(l.resource))},
                        {"soft", l.soft},
                        {"hard", l.hard}});
    }
    out["rlimits"] = std::move(limits);
  }
  if (!job.unkillable.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const UnkillableProcess& p : job.unkillable) {
      list.push_back({{"rank", p.rank},
                      {"pid", p.pid},
                      {"descendant", p.descendant},
                      {"start_time", p.start_time},
                      {"state", BytesToJson(p.state)},
                      {"wchan", BytesToJson(p.wchan)},
                      {"stack", BytesToJson(p.stack)},
                      {"found_at", FormatTime(p.found_at)},
                      {"gone_at", OptTime(p.gone_at)}});
    }
    out["unkillable"] = std::move(list);
  }
  if (job.errors != ErrorsDir{}) {
    const ErrorsDir& e = job.errors;
    out["errors"] = {{"max_bytes", e.max_bytes},
                     {"max_files", e.max_files},
                     {"bytes", e.bytes},
                     {"files", e.files},
                     {"full", e.full}};
    if (e.cut_files > 0) {
      nlohmann::json cut = nlohmann::json::array();
      for (const CutFile& c : e.cut) {
        cut.push_back({{"name", BytesToJson(c.name)}, {"kept", c.kept}, {"size", c.size}});
      }
      out["errors"]["cut"] = std::move(cut);
      out["errors"]["cut_files"] = e.cut_files;
    }
  }
  if (s.limits.memory_bytes != 0) out["mem_bytes"] = s.limits.memory_bytes;
  if (s.limits.memory_per_rank_bytes != 0)
    out["mem_per_rank_bytes"] = s.limits.memory_per_rank_bytes;
  if (s.limits.cpu_millis != 0) out["cpu_millis"] = s.limits.cpu_millis;
  if (!s.submit_token.empty()) out["submit_token"] = BytesToJson(s.submit_token);
  if (!s.label.empty()) out["label"] = BytesToJson(s.label);
  if (!s.array.job_id.empty()) {
    out["array"] = {{"job_id", s.array.job_id},
                    {"task", s.array.task},
                    {"count", s.array.count},
                    {"throttle", s.array.throttle}};
  }
  return out;
}

nlohmann::json ToReportJson(const Job& job) {
  nlohmann::json out = ToJson(job);
  std::string mode(ToString(job.heartbeat_mode));
  for (char& c : mode) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  out["heartbeat_mode"] = mode;
  return out;
}

std::optional<Job> JobFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  auto id = Field<std::string>(j, "id");
  auto state = ParseJobState(Field<std::string>(j, "state").value_or(""));
  if (!id || id->empty() || !state) return std::nullopt;
  Job job;
  job.id = *id;
  job.state = *state;
  JobSpec& s = job.spec;
  s.name = BytesField(j, "name").value_or("");
  s.uid = Field<uid_t>(j, "uid").value_or(0);
  s.gid = Field<gid_t>(j, "gid").value_or(0);
  s.devices = Field<int>(j, "devices").value_or(0);
  s.argv = BytesListField(j, "argv");
  s.cwd = BytesField(j, "cwd").value_or("");
  s.env = BytesListField(j, "env");
  s.groups = GroupsField(j, "groups");
  s.max_restarts = Field<int>(j, "max_restarts").value_or(0);
  s.heartbeat_timeout =
      std::chrono::milliseconds(Field<int64_t>(j, "heartbeat_timeout_ms").value_or(0));
  s.startup_timeout =
      std::chrono::milliseconds(Field<int64_t>(j, "startup_timeout_ms").value_or(0));
  s.grace = std::chrono::milliseconds(Field<int64_t>(j, "grace_ms").value_or(0));
  s.time_limit = std::chrono::milliseconds(Field<int64_t>(j, "time_limit_ms").value_or(0));
  s.hold_on_hang = std::chrono::milliseconds(Field<int64_t>(j, "hold_on_hang_ms").value_or(0));
  s.warn_signal.signal = Field<int>(j, "warn_signal").value_or(0);
  s.warn_signal.before =
      std::chrono::milliseconds(Field<int64_t>(j, "warn_signal_before_ms").value_or(0));
  s.auto_heartbeat = Field<bool>(j, "auto_heartbeat").value_or(true);
  NodeSpec& n = s.nodes;
  n.nnodes = Field<int>(j, "nnodes").value_or(1);
  n.node_rank = Field<int>(j, "node_rank").value_or(-1);
  n.master_addr = BytesField(j, "master_addr").value_or("");
  n.master_port = Field<int>(j, "requested_master_port").value_or(0);
  n.run_id = BytesField(j, "run_id").value_or("");
  n.rdzv = BytesField(j, "rdzv").value_or("");
  n.rdzv_timeout = std::chrono::milliseconds(
      Field<int64_t>(j, "rdzv_timeout_ms").value_or(NodeSpec{}.rdzv_timeout.count()));
  n.rdzv_lease = std::chrono::milliseconds(
      Field<int64_t>(j, "rdzv_lease_ms").value_or(NodeSpec{}.rdzv_lease.count()));
  n.rdzv_auth = Field<std::string>(j, "rdzv_auth").value_or("");
  n.munge_socket = BytesField(j, "munge_socket").value_or("");
  n.etcd_ca = BytesField(j, "etcd_ca").value_or("");
  n.etcd_cert = BytesField(j, "etcd_cert").value_or("");
  n.etcd_key = BytesField(j, "etcd_key").value_or("");
  n.etcd_auth_file = BytesField(j, "etcd_auth_file").value_or("");
  job.rdzv_refused = Field<int64_t>(j, "rdzv_refused").value_or(0);
  job.rdzv_refused_last = BytesField(j, "rdzv_refused_last").value_or("");
  if (auto it = j.find("nodes"); it != j.end() && it->is_array()) {
    for (const auto& nj : *it) {
      if (!nj.is_object()) continue;
      NodeStatus ns;
      ns.node_rank = Field<int>(nj, "node_rank").value_or(0);
      ns.host = BytesField(nj, "host").value_or("");
      ns.state = BytesField(nj, "state").value_or("");
      if (auto c = nj.find("root_cause"); c != nj.end()) ns.root_cause = CauseFromJson(*c);
      job.nodes.push_back(std::move(ns));
    }
  }
  s.after = Field<std::vector<std::string>>(j, "after").value_or(std::vector<std::string>{});
  s.after_any =
      Field<std::vector<std::string>>(j, "after_any").value_or(std::vector<std::string>{});
  s.after_notok =
      Field<std::vector<std::string>>(j, "after_notok").value_or(std::vector<std::string>{});
  s.singleton = Field<bool>(j, "singleton").value_or(false);
  s.output = BytesField(j, "output").value_or("");
  s.error = BytesField(j, "error").value_or("");
  // A record without it is of a release whose %n was the job's name.
  s.output_patterns = Field<int>(j, "output_patterns").value_or(kLegacyPatterns) >= kSbatchPatterns
                          ? kSbatchPatterns
                          : kLegacyPatterns;
  s.umask = Field<mode_t>(j, "umask").value_or(kDefaultJobUmask) & 0777;
  s.submit_token = BytesField(j, "submit_token").value_or("");
  if (s.submit_token.size() > kMaxSubmitTokenBytes) s.submit_token.clear();
  s.label = BytesField(j, "label").value_or("");
  if (s.label.size() > kMaxLabelBytes) s.label.clear();
  if (auto it = j.find("array"); it != j.end() && it->is_object()) {
    // Every field a number of the record's own, or no array task at all:
    // a task id that read as 0 would be another task's.
    const auto task = Field<uint32_t>(*it, "task");
    const auto count = Field<uint32_t>(*it, "count");
    const auto throttle = Field<uint32_t>(*it, "throttle");
    auto number = [&](const char* key) {
      auto f = it->find(key);
      return f != it->end() && f->is_number_unsigned();
    };
    if (task && count && throttle && number("task") && number("count") && number("throttle")) {
      s.array = CheckedArrayTask(
          ArrayTask{Field<std::string>(*it, "job_id").value_or(""), *task, *count, *throttle});
    }
  }
  if (auto it = j.find("rlimits"); it != j.end() && it->is_array()) {
    for (const auto& lj : *it) {
      auto resource = ResourceByName(Field<std::string>(lj, "resource").value_or(""));
      auto soft = Field<uint64_t>(lj, "soft");
      auto hard = Field<uint64_t>(lj, "hard");
      if (resource && soft && hard && *soft <= *hard) {
        s.rlimits.push_back(ResourceLimit{*resource, *soft, *hard});
      }
    }
  }
  if (auto it = j.find("unkillable"); it != j.end() && it->is_array()) {
    for (const auto& uj : *it) {
      if (!uj.is_object()) continue;
      UnkillableProcess p;
      p.rank = Field<int>(uj, "rank").value_or(0);
      p.pid = Field<pid_t>(uj, "pid").value_or(0);
      p.descendant = Field<bool>(uj, "descendant").value_or(false);
      p.start_time = Field<uint64_t>(uj, "start_time").value_or(0);
      p.state = BytesField(uj, "state").value_or("");
      p.wchan = BytesField(uj, "wchan").value_or("");
      p.stack = BytesField(uj, "stack").value_or("");
      p.found_at = TimeField(uj, "found_at").value_or(WallTime{});
      p.gone_at = TimeField(uj, "gone_at");
      job.unkillable.push_back(std::move(p));
    }
  }
  if (auto it = j.find("errors"); it != j.end() && it->is_object()) {
    ErrorsDir& e = job.errors;
    e.max_bytes = Field<uint64_t>(*it, "max_bytes").value_or(0);
    e.max_files = Field<uint64_t>(*it, "max_files").value_or(0);
    e.bytes = Field<uint64_t>(*it, "bytes").value_or(0);
    e.files = Field<uint64_t>(*it, "files").value_or(0);
    e.full = Field<bool>(*it, "full").value_or(false);
    e.cut_files = Field<uint64_t>(*it, "cut_files").value_or(0);
    // The files named are some of those counted, as ToJson writes them: a
    // list beside no count (or longer than it) is not the record's own.
    const uint64_t listed = std::min<uint64_t>(e.cut_files, ErrorsDir::kMaxCutListed);
    if (auto cut = it->find("cut"); cut != it->end() && cut->is_array()) {
      for (const auto& c : *cut) {
        if (!c.is_object() || e.cut.size() >= listed) break;
        e.cut.push_back({BytesField(c, "name").value_or(""), Field<uint64_t>(c, "kept").value_or(0),
                         Field<uint64_t>(c, "size").value_or(0)});
      }
    }
  }
  s.limits.memory_bytes = Field<uint64_t>(j, "mem_bytes").value_or(0);
  s.limits.memory_per_rank_bytes = Field<uint64_t>(j, "mem_per_rank_bytes").value_or(0);
  s.limits.cpu_millis = Field<uint32_t>(j, "cpu_millis").value_or(0);
  job.heartbeat_mode = ParseHeartbeatMode(Field<std::string>(j, "heartbeat_mode").value_or(""))
                           .value_or(HeartbeatMode::kNone);
  job.hang_timeout = std::chrono::milliseconds(Field<int64_t>(j, "hang_timeout_ms").value_or(0));
  job.user = BytesField(j, "user").value_or("");
  job.exit_code = Field<int>(j, "exit_code");
  job.device_slots = Field<std::vector<int>>(j, "device_slots").value_or(std::vector<int>{});
  job.cuda_visible_devices = BytesField(j, "cuda_visible_devices").value_or("");
  job.isolate_gpus = Field<bool>(j, "isolate_gpus").value_or(false);
  job.gpu_minors = Field<std::vector<uint32_t>>(j, "gpu_minors").value_or(std::vector<uint32_t>{});
  job.gpu_isolation = BytesField(j, "gpu_isolation").value_or("");
  job.master_port = Field<int>(j, "master_port").value_or(0);
  job.restart_count = Field<int>(j, "restart_count").value_or(0);
  job.containment = BytesField(j, "containment").value_or("");
  job.submitted_at = TimeField(j, "submitted_at").value_or(WallTime{});
  job.started_at = TimeField(j, "started_at");
  job.ended_at = TimeField(j, "ended_at");
  job.teardown_at = TimeField(j, "teardown_at");
  job.held_until = TimeField(j, "held_until");
  job.warn_signal_sent_at = TimeField(j, "warn_signal_sent_at");
  job.warn_signal_why = BytesField(j, "warn_signal_why").value_or("");
  if (auto it = j.find("root_cause"); it != j.end()) job.root_cause = CauseFromJson(*it);
  if (auto it = j.find("ranks"); it != j.end() && it->is_array()) {
    for (const auto& rj : *it) {
      Rank r;
      r.rank = Field<int>(rj, "rank").value_or(0);
      r.pid = Field<pid_t>(rj, "pid").value_or(0);
      r.state =
          ParseRankState(Field<std::string>(rj, "state").value_or("")).value_or(RankState::kLost);
      r.exit_code = Field<int>(rj, "exit_code");
      r.signal = Field<int>(rj, "signal");
      r.last_step = Field<int64_t>(rj, "last_step").value_or(-1);
      r.last_heartbeat_at = TimeField(rj, "last_heartbeat_at");
      r.started_at = TimeField(rj, "started_at");
      r.error_message = BytesField(rj, "error").value_or("");
      job.ranks.push_back(std::move(r));
    }
  }
  if (auto it = j.find("attempts"); it != j.end() && it->is_array()) {
    for (const auto& aj : *it) {
      Attempt a;
      a.restart_count = Field<int>(aj, "restart_count").value_or(0);
      a.master_port = Field<int>(aj, "master_port").value_or(0);
      a.started_at = TimeField(aj, "started_at").value_or(WallTime{});
      a.ended_at = TimeField(aj, "ended_at");
      if (auto c = aj.find("root_cause"); c != aj.end()) a.root_cause = CauseFromJson(*c);
      if (auto us = Field<int64_t>(aj, "cpu_us"); us && *us >= 0) {
        a.cpu = std::chrono::microseconds(*us);
      }
      job.attempts.push_back(std::move(a));
    }
  }
  if (auto it = j.find("hang_report"); it != j.end() && it->is_object()) {
    HangReport h;
    h.at = TimeField(*it, "at").value_or(WallTime{});
    h.stalled_ranks = Field<std::vector<int>>(*it, "stalled_ranks").value_or(std::vector<int>{});
    h.straggler_ranks =
        Field<std::vector<int>>(*it, "straggler_ranks").value_or(std::vector<int>{});
    if (auto rs = it->find("ranks"); rs != it->end() && rs->is_array()) {
      for (const auto& rj : *rs) {
        HangReportRank r;
        r.rank = Field<int>(rj, "rank").value_or(0);
        r.node = Field<int>(rj, "node").value_or(-1);
        r.last_step = Field<int64_t>(rj, "last_step").value_or(-1);
        r.last_heartbeat_at = TimeField(rj, "last_heartbeat_at");
        r.stalled = Field<bool>(rj, "stalled").value_or(false);
        r.straggler = Field<bool>(rj, "straggler").value_or(false);
        r.in_collective = Field<bool>(rj, "in_collective").value_or(false);
        r.process_state = BytesField(rj, "process_state").value_or("");
        r.stack = BytesField(rj, "stack").value_or("");
        r.stack_status = ParseStackStatus(Field<std::string>(rj, "stack_status").value_or(""))
                             .value_or(StackStatus::kUnknown);
        r.stack_note = BytesField(rj, "stack_note").value_or("");
        h.ranks.push_back(std::move(r));
      }
    }
    if (auto ms = it->find("missing_nodes"); ms != it->end() && ms->is_array()) {
      for (const auto& mj : *ms) {
        MissingNode m;
        m.node = Field<int>(mj, "node").value_or(-1);
        m.why = BytesField(mj, "why").value_or("");
        h.missing_nodes.push_back(std::move(m));
      }
    }
    job.hang_report = std::move(h);
  }
  return job;
}

}  // namespace ltd
