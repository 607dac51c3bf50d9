// A submit (JobManager): its checks, its id and record, its place in the
// queue or among the jobs it waits for; a queued job's environment waits
// on disk, not in memory, until the job starts.
#include <algorithm>

#include "absl/strings/numbers.h"
#include "bytes.h"
#include "duration.h"
#include "job_manager.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

// A job's place in the queue: ids count up.
uint64_t SeqOf(const std::string& id) {
  uint64_t seq = 0;
  (void)absl::SimpleAtoi(id, &seq);
  return seq;
}

}  // namespace

absl::StatusOr<std::string> JobManager::Submit(JobSpec spec, std::string user) {
  if (shutting_down_)
    return absl::UnavailableError("ltd is shutting down; submit again once it is back");
  // A repeat of a submit whose answer the client lost: the job made then.
  if (auto made = tokens_.Find(spec.uid, spec.submit_token, clock_.Now());
      made && jobs_.count(*made) != 0) {
    spdlog::info("job={} submitted again by {} (same token): the same job", *made, user);
    return *made;
  }
  SpecLimits limits;
  limits.slots = config_.placement.slots;
  limits.max_restarts = config_.max_restarts_limit;
  limits.max_time = config_.max_time;
  // A job that asks for no --time runs for at most ltd's --max-time.
  if (spec.time_limit.count() == 0) spec.time_limit = config_.max_time;
  if (!spec.nodes.rdzv.empty()) {
    if (spec.nodes.rdzv_auth.empty()) spec.nodes.rdzv_auth = config_.rdzv_auth;
    spec.nodes.munge_socket = config_.munge_socket;
    spec.nodes.etcd_ca = config_.etcd_ca;
    spec.nodes.etcd_cert = config_.etcd_cert;
    spec.nodes.etcd_key = config_.etcd_key;
    spec.nodes.etcd_auth_file = config_.etcd_auth_file;
  }
  limits.no_memory_limit = config_.no_memory_limit;
  limits.no_cpu_limit = config_.no_cpu_limit;
  limits.cpus = config_.cpus;
  if (auto s = ValidateSpec(spec, limits); !s.ok()) return s;
  // The rendezvous is part of the job's time (it holds its devices while it
  // waits): a wait longer than the --time would be cut by it anyway, so it
  // is cut to it here, and the record says what holds.
  NodeSpec& nodes = spec.nodes;
  if (!nodes.rdzv.empty() && spec.time_limit.count() > 0 && nodes.rdzv_timeout > spec.time_limit) {
    spdlog::info("--rdzv-timeout {} cut to the job's --time {}", FormatDuration(nodes.rdzv_timeout),
                 FormatDuration(spec.time_limit));
    nodes.rdzv_timeout = spec.time_limit;
  }
  if (auto s = NameFree(spec); !s.ok()) return s;
  if (auto s = RoomToSubmit(spec.uid); !s.ok()) return s;
  // An array's tasks count against the user's limits as as many submits
  // would: each is a job of its own.
  const size_t count = spec.array_tasks.empty() ? 1 : spec.array_tasks.size();
  if (auto s = scheduler_.MayQueue(spec.uid, user, deps_.waiting(spec.uid), count); !s.ok())
    return s;
  auto unmet = ResolveAfter(spec);
  if (!unmet.ok()) return unmet.status();
  const std::vector<uint32_t> tasks = std::move(spec.array_tasks);
  spec.array_tasks.clear();
  // A lone job that starts at once is placed before its record is saved,
  // and saved once, placed (a disk that refuses it refuses the submit, in
  // one line, and nothing stays placed); it is measured as placed
  // (LiveUsage), not first as waiting: a walk of its dir fewer.
  bool starts_at_once = count == 1 && unmet->empty() && !drain_ && !shutting_down_ &&
                        scheduler_.PlacesAtOnce(spec.uid, spec.devices);
  // Each job is recorded before the next is made, and a task's environment
  // and command line (up to 2 MB each) then wait on disk: 1000 tasks hold
  // one copy in memory.
  std::vector<std::unique_ptr<Job>> made;
  auto undo = [&] {
    for (const auto& j : made) (void)store_.Remove(j->id);
  };
  for (size_t i = 0; i < count; ++i) {
    auto job = MakeJob(spec, user);
    if (!job.ok()) {
      undo();
      return job.status();
    }
    Job& ref = **job;
    if (!tasks.empty()) {
      // The array's id is its first task's job id, as Slurm's; only that
      // task keeps the submit's token, so a repeat of it finds the array.
      ArrayTask& a = ref.spec.array;
      a.job_id = made.empty() ? ref.id : made.front()->id;
      a.task = tasks[i];
      a.count = static_cast<uint32_t>(tasks.size());
      a.throttle = std::min(spec.array.throttle, a.count);
      if (i > 0) ref.spec.submit_token.clear();
    }
    absl::Status saved = store_.CreateJobDir(ref.id);
    if (saved.ok() && starts_at_once) starts_at_once = PlaceAtOnce(ref, SeqOf(ref.id));
    if (saved.ok()) saved = store_.Save(ref);
    made.push_back(std::move(*job));
    if (!saved.ok()) {
      if (starts_at_once) UnplaceAtOnce(ref);
      undo();
      return absl::UnavailableError(Cat("cannot record the job (", saved.message(),
                                        "); free space in ", store_.state_dir(),
                                        " and submit again"));
    }
    if (i + 1 < count) Spill(ref);
  }
  const std::string first = made.front()->id;
  std::vector<Job*> added;
  for (auto& job : made) {
    const std::string id = job->id;
    Job& ref = *job;
    jobs_.emplace(id, std::move(job));
    added.push_back(&ref);
    tokens_.Remember(ref.spec.uid, ref.spec.submit_token, id, ref.submitted_at);
    spdlog::info("job={} submitted by {}: {} rank(s) of {}{}", id, ref.user, ref.spec.devices,
                 ForLog(ref.spec.argv.front()),
                 ref.spec.array.job_id.empty() ? "" : Cat(", task ", DisplayId(ref)));
    if (starts_at_once) {
      // Placed already, its slots held.
    } else if (unmet->empty()) {
      CountWaiting(ref);
      Queue(ref, SeqOf(id));
    } else {
      CountWaiting(ref);
      deps_.AddKinds(id, ref.spec.uid, *unmet);
    }
    Emit([&](JobEvents& e) { e.OnSubmitted(ref); });
  }
  if (starts_at_once) Start(*added.front(), /*recorded=*/true);
  Schedule();
  // Queued (not being started): its environment and command line wait on
  // disk.
  for (Job* job : added) {
    if (job->state == JobState::kPending && supervised_.count(job->id) == 0) Spill(*job);
  }
  return first;
}

absl::StatusOr<std::unique_ptr<Job>> JobManager::MakeJob(const JobSpec& spec,
                                                         const std::string& user) {
  // Ids are reserved on disk 64 at a time: a submit costs no synced write
  // of next-id but once in 64.
  auto taken = store_.TakeId(next_id_, /*reserve=*/64);
  if (!taken.ok()) {
    return absl::UnavailableError(Cat("cannot record the job (", taken.status().message(),
                                      "); free space in ", store_.state_dir(),
                                      " and submit again"));
  }
  next_id_ = *taken + 1;
  auto job = std::make_unique<Job>();
  job->id = std::to_string(*taken);
  job->user = user;
  job->submitted_at = clock_.Now();
  job->containment = std::string(supervisors_.containment());
  job->spec = spec;
  return job;
}

void JobManager::Queue(const Job& job, uint64_t seq) {
  const ArrayTask& a = job.spec.array;
  scheduler_.Enqueue(job.id, seq, job.spec.uid, job.spec.devices,
                     ArrayGate{a.job_id, a.throttle, a.count});
}

void JobManager::Spill(Job& job) {
  if (job.table.spec_on_disk || !job.record_error.empty()) return;
  std::vector<std::string>().swap(job.spec.env);
  CutArgv(job, kSummaryArgvBytes);
  job.table.spec_on_disk = true;
}

absl::Status JobManager::ReloadSpec(Job& job) {
  if (!job.table.spec_on_disk) return absl::OkStatus();
  auto record = store_.Load(job.id);
  if (!record.ok()) return record.status();
  job.spec.env = std::move(record->spec.env);
  job.spec.argv = std::move(record->spec.argv);
  job.table.argv_cut = 0;
  job.table.spec_on_disk = false;
  return absl::OkStatus();
}

}  // namespace ltd
