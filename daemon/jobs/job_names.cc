// The job table's names: one live job of a name per user, and what a
// JOB that is no id refers to.
#include "job_manager.h"
#include "str_util.h"

namespace ltd {

absl::Status JobManager::NameFree(const JobSpec& spec) const {
  // A singleton shares its name by design: it waits for the user's other
  // jobs of that name to end (as sbatch's --dependency singleton).
  if (spec.name.empty() || spec.singleton) return absl::OkStatus();
  for (const auto& [id, job] : jobs_) {
    if (job->spec.uid != spec.uid || job->spec.name != spec.name || IsFinal(job->state)) continue;
    return absl::AlreadyExistsError(Cat("your job ", id, " (", ToString(job->state), ") is named '",
                                        spec.name, "'; pick another --name, or `ltctl kill ", id,
                                        "` first"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const Job*> JobManager::Resolve(std::string_view ref, uid_t caller) const {
  if (ref.empty()) return absl::InvalidArgumentError("no job given");
  if (auto it = jobs_.find(ref); it != jobs_.end()) return it->second.get();
  std::vector<const Job*> named, own;
  for (const auto& [id, job] : jobs_) {
    if (job->spec.name != ref) continue;
    named.push_back(job.get());
    if (caller != kAnyone && job->spec.uid == caller) own.push_back(job.get());
  }
  if (named.empty()) {
    return absl::NotFoundError(Cat("no job '", ref, "'; `ltctl ps -a` lists them"));
  }
  const std::vector<const Job*>& candidates = own.empty() ? named : own;
  if (candidates.size() == 1) return candidates.front();
  // One user has one live job of a name (Submit refuses a second but a
  // singleton), so the live one is the one meant; of finished ones, the
  // newest, as a re-run `--name bert` is.
  std::vector<const Job*> live;
  const Job* newest = nullptr;
  for (const Job* j : candidates) {
    if (!IsFinal(j->state)) live.push_back(j);
    if (newest == nullptr || IdBefore(newest->id, j->id)) newest = j;
  }
  if (live.size() == 1) return live.front();
  if (live.empty()) return newest;
  std::vector<std::string> ids;
  bool one_user = true;
  for (const Job* j : live) {
    ids.push_back(j->id);
    one_user = one_user && j->spec.uid == live.front()->spec.uid;
  }
  return absl::FailedPreconditionError(
      Cat("name '", ref, "' is ambiguous: jobs ", Join(ids, ", "),
          one_user ? " (singletons) are live" : " of several users are live", "; use the job id"));
}

}  // namespace ltd
