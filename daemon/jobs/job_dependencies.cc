// The job table's side of --after and --dependency: which jobs a submit waits for, and what
// becomes of waiting jobs when those end. Also the words `ps` and `show`
// give for a pending job.
#include <algorithm>

#include "absl/strings/numbers.h"
#include "bytes.h"
#include "job_manager.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

namespace {

// The flag a list of JobSpec came from, for messages.
std::string FlagOf(DependencyKind kind) {
  return kind == DependencyKind::kAfterOk ? "--after" : Cat("--dependency ", ToString(kind));
}

}  // namespace

absl::StatusOr<std::map<std::string, DependencyKind>> JobManager::ResolveAfter(
    JobSpec& spec) const {
  // Any user's job may be waited for, as with Slurm's afterok: how a job
  // ended is no secret (`ps` and `show` are for everyone), and a waiting
  // job can do nothing to the one it waits for. A job can only name jobs
  // that exist before it, so no cycle can form.
  std::map<std::string, DependencyKind> unmet;
  for (auto [kind, list] : {std::pair{DependencyKind::kAfterOk, &spec.after},
                            std::pair{DependencyKind::kAfterAny, &spec.after_any},
                            std::pair{DependencyKind::kAfterNotOk, &spec.after_notok}}) {
    std::vector<std::string> ids;
    for (const std::string& ref : *list) {
      const std::string shown = DisplayEscapeElided(ref, 64, Controls::kEscape);
      auto job = Resolve(ref, spec.uid);
      if (!job.ok()) {
        return absl::Status(job.status().code(),
                            Cat(FlagOf(kind), " ", shown, ": ", job.status().message()));
      }
      const Job& dep = **job;
      if (std::find(ids.begin(), ids.end(), dep.id) == ids.end()) ids.push_back(dep.id);
      const DependencyOutcome outcome = OutcomeOf(kind, dep.state);
      if (outcome == DependencyOutcome::kMet) continue;
      if (outcome == DependencyOutcome::kNever) {
        return absl::FailedPreconditionError(
            Cat(FlagOf(kind), " ", shown, ": job ", dep.id, " already ended ", ToString(dep.state),
                ", so this job would never run; submit it without ", FlagOf(kind), " ", shown));
      }
      auto [it, fresh] = unmet.emplace(dep.id, kind);
      if (!fresh && it->second != kind) {
        return absl::InvalidArgumentError(Cat("job ", dep.id, " is named by both ",
                                              FlagOf(it->second), " and ", FlagOf(kind),
                                              "; name it once"));
      }
    }
    *list = std::move(ids);
  }
  if (spec.singleton) {
    if (spec.name.empty()) {
      return absl::InvalidArgumentError(
          "--dependency singleton waits for your jobs of the same name; give --name");
    }
    // Every unfinished job of this user and name: this one starts once
    // they all ended, as sbatch's singleton.
    for (const auto& [id, job] : jobs_) {
      if (job->spec.uid != spec.uid || job->spec.name != spec.name || IsFinal(job->state)) continue;
      if (unmet.emplace(id, DependencyKind::kAfterAny).second) spec.after_any.push_back(id);
    }
    std::sort(spec.after_any.begin(), spec.after_any.end(), IdBefore);
    spec.after_any.erase(std::unique(spec.after_any.begin(), spec.after_any.end()),
                         spec.after_any.end());
  }
  return unmet;
}

void JobManager::WaitOrQueue(Job& job, uint64_t seq) {
  // After a restart, the jobs it waits for are judged by their records.
  std::map<std::string, DependencyKind> unmet;
  for (auto [kind, list] : {std::pair{DependencyKind::kAfterOk, &job.spec.after},
                            std::pair{DependencyKind::kAfterAny, &job.spec.after_any},
                            std::pair{DependencyKind::kAfterNotOk, &job.spec.after_notok}}) {
    for (const std::string& dep_id : *list) {
      const Job* dep = FindMutable(dep_id);
      const DependencyOutcome outcome =
          OutcomeOf(kind, dep != nullptr ? std::optional(dep->state) : std::nullopt);
      if (outcome == DependencyOutcome::kMet) continue;
      if (outcome == DependencyOutcome::kNever) {
        failed_dependents_.emplace_back(job.id, dep_id);
        ArmFailDependents();
        return;
      }
      unmet.emplace(dep_id, kind);
    }
  }
  if (unmet.empty()) {
    Queue(job, seq);
  } else {
    deps_.AddKinds(job.id, job.spec.uid, std::move(unmet));
  }
}

void JobManager::OnDependencyEnded(const Job& job) {
  deps_.Remove(job.id);  // it waited itself, and was cancelled
  const Dependencies::Outcome outcome = deps_.Ended(job.id, job.state);
  for (const std::string& id : outcome.ready) {
    const Job* ready = FindMutable(id);
    if (ready == nullptr || ready->state != JobState::kPending) continue;
    spdlog::info("job={} job {} it ran after ended {}; queued for devices", id, job.id,
                 ToString(job.state));
    uint64_t seq = 0;
    (void)absl::SimpleAtoi(id, &seq);
    Queue(*ready, seq);
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
  const bool notok = std::find(job->spec.after_notok.begin(), job->spec.after_notok.end(),
                               dependency) != job->spec.after_notok.end();
  cause.message = dep != nullptr
                      ? Cat("job ", dependency, ", which it was to run after",
                            notok ? " if it did not succeed" : "", ", ended ", ToString(dep->state))
                      : Cat("job ", dependency, ", which it was to run after, has no record left");
  spdlog::info("job={} cancelled: {}", id, cause.message);
  Finish(*job, std::move(cause), JobState::kCancelled);
}

std::string JobManager::PendingReason(const Job& job) const {
  if (job.state != JobState::kPending) return "";
  // Placed: its supervisor is on its way (it may wait on the job's files).
  if (Placed(job.id)) {
    return "placed; its supervisor is starting";
  }
  if (deps_.Waiting(job.id)) {
    const std::vector<std::string> unmet = deps_.Unmet(job.id);
    return Cat(unmet.size() == 1 ? "after job " : "after jobs ", Join(unmet, ", "));
  }
  if (drain_)
    return drain_->empty() ? std::string("ltd is draining") : Cat("ltd is draining: ", *drain_);
  std::string why = scheduler_.WhyPending(job.id);
  // Short of devices while a GPU sits in quarantine: say which holds it.
  const auto q = gpus_ != nullptr ? gpus_->AnyQuarantined() : std::nullopt;
  if (q && why.starts_with("needs ")) why += "; " + gpus_->Describe(*q);
  return why;
}

}  // namespace ltd
