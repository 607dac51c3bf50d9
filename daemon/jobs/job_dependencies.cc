// The job table's side of --after: which jobs a submit waits for, and what
// becomes of waiting jobs when those end. Also the words `ps` and `show`
// give for a pending job.
#include <algorithm>

#include "absl/strings/numbers.h"
#include "bytes.h"
#include "job_manager.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

absl::StatusOr<std::set<std::string>> JobManager::ResolveAfter(
    const JobSpec& spec, std::vector<std::string>* ids) const {
  // Any user's job may be waited for, as with Slurm's afterok: whether a
  // job succeeded is no secret (`ps` and `show` are for everyone), and a
  // waiting job can do nothing to the one it waits for. A job can only
  // name jobs that exist before it, so no cycle can form.
  std::set<std::string> unmet;
  for (const std::string& ref : spec.after) {
    auto job = Resolve(ref, spec.uid);
    if (!job.ok()) {
      return absl::Status(job.status().code(),
                          Cat("--after ", DisplayEscapeElided(ref, 64, Controls::kEscape), ": ",
                              job.status().message()));
    }
    const Job& dep = **job;
    if (std::find(ids->begin(), ids->end(), dep.id) == ids->end()) ids->push_back(dep.id);
    if (dep.state == JobState::kSucceeded) continue;
    if (IsFinal(dep.state)) {
      return absl::FailedPreconditionError(
          Cat("--after ", DisplayEscapeElided(ref, 64, Controls::kEscape), ": job ", dep.id,
              " already ended ", ToString(dep.state),
              ", so this job would never run; submit it without --after ",
              DisplayEscapeElided(ref, 64, Controls::kEscape)));
    }
    unmet.insert(dep.id);
  }
  return unmet;
}

void JobManager::WaitOrQueue(Job& job, uint64_t seq) {
  // After a restart, the jobs it waits for are judged by their records.
  std::set<std::string> unmet;
  for (const std::string& dep_id : job.spec.after) {
    const Job* dep = FindMutable(dep_id);
    if (dep != nullptr && dep->state == JobState::kSucceeded) continue;
    if (dep == nullptr || IsFinal(dep->state)) {
      failed_dependents_.emplace_back(job.id, dep_id);
      ArmFailDependents();
      return;
    }
    unmet.insert(dep_id);
  }
  if (unmet.empty()) {
    scheduler_.Enqueue(job.id, seq, job.spec.uid, job.spec.devices);
  } else {
    deps_.Add(job.id, job.spec.uid, unmet);
  }
}

void JobManager::OnDependencyEnded(const Job& job) {
  deps_.Remove(job.id);  // it waited itself, and was cancelled
  const Dependencies::Outcome outcome = deps_.Ended(job.id, job.state == JobState::kSucceeded);
  for (const std::string& id : outcome.ready) {
    const Job* ready = FindMutable(id);
    if (ready == nullptr || ready->state != JobState::kPending) continue;
    spdlog::info("job={} job {} it ran after succeeded; queued for devices", id, job.id);
    uint64_t seq = 0;
    (void)absl::SimpleAtoi(id, &seq);
    scheduler_.Enqueue(id, seq, ready->spec.uid, ready->spec.devices);
  }
  for (const std::string& id : outcome.failed) failed_dependents_.emplace_back(id, job.id);
  ArmFailDependents();
}

void JobManager::ArmFailDependents() {
  // From a timer, not here: a long chain of waiting jobs ends one loop turn
  // per link instead of recursing through Finish.
  if (failed_dependents_.empty() || fail_dependents_timer_ != 0) return;
  fail_dependents_timer_ = clock_.StartTimer(Millis(0), [this] {
    fail_dependents_timer_ = 0;
    auto failed = std::move(failed_dependents_);
    failed_dependents_.clear();
    for (const auto& [id, dep] : failed) FailDependent(id, dep);
  });
}

void JobManager::FailDependent(const std::string& id, const std::string& dependency) {
  Job* job = FindMutable(id);
  const Job* dep = FindMutable(dependency);
  if (job == nullptr || job->state != JobState::kPending) return;
  RootCause cause;
  cause.reason = CauseReason::kDependencyFailed;
  cause.at = clock_.Now();
  cause.message =
      dep != nullptr
          ? Cat("job ", dependency, ", which it was to run after, ended ", ToString(dep->state))
          : Cat("job ", dependency, ", which it was to run after, has no record left");
  spdlog::info("job={} cancelled: {}", id, cause.message);
  Finish(*job, std::move(cause), JobState::kCancelled);
}

void JobManager::UpdatePendingReasons() {
  for (auto& [id, job] : jobs_) {
    if (job->state != JobState::kPending) continue;
    if (deps_.Waiting(id)) {
      const std::vector<std::string> unmet = deps_.Unmet(id);
      job->table.pending_reason =
          Cat(unmet.size() == 1 ? "after job " : "after jobs ", Join(unmet, ", "));
    } else if (drain_) {
      job->table.pending_reason =
          drain_->empty() ? std::string("ltd is draining") : Cat("ltd is draining: ", *drain_);
    } else {
      job->table.pending_reason = scheduler_.WhyPending(id);
      // Short of devices while a GPU sits in quarantine: say which holds it.
      const auto q = gpus_ != nullptr ? gpus_->AnyQuarantined() : std::nullopt;
      if (q && job->table.pending_reason.starts_with("needs ")) {
        job->table.pending_reason += "; " + gpus_->Describe(*q);
      }
    }
  }
}

}  // namespace ltd
