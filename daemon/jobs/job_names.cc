// The job table's names: one live job of a name per user, and what a
// JOB that is no id refers to.
#include <algorithm>
#include <set>

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
  auto r = ResolveAny(ref, caller);
  if (!r.ok()) return r.status();
  if (r->tasks.size() > 1) {
    const Job& first = *r->tasks.front();
    return absl::FailedPreconditionError(Cat("job ", first.spec.array.job_id, " is an array of ",
                                             r->tasks.size(), " tasks; name one task, such as ",
                                             DisplayId(first),
                                             " (kill, wait and show take the whole array)"));
  }
  return r->job;
}

absl::StatusOr<JobManager::Resolved> JobManager::ResolveAny(std::string_view ref,
                                                            uid_t caller) const {
  if (ref.empty()) return absl::InvalidArgumentError("no job given");
  // "12_3": task 3 of array 12.
  std::string array;
  uint32_t task = 0;
  if (SplitTaskRef(ref, &array, &task)) {
    const std::vector<const Job*> tasks = ArrayTasks(array);
    for (const Job* j : tasks) {
      if (j->spec.array.task == task) return Resolved{j, {}};
    }
    if (tasks.empty()) {
      return absl::NotFoundError(Cat("no job '", ref, "'; `ltctl ps -a` lists them"));
    }
    return absl::NotFoundError(
        Cat("array ", array, " has no task ", task, "; `ltctl show ", array, "` lists its tasks"));
  }
  // The array's id names the whole array (as scancel's), its first task
  // being "12_0"; another task's own id names that task alone.
  if (auto it = jobs_.find(ref); it != jobs_.end()) {
    const Job* job = it->second.get();
    if (job->spec.array.job_id != job->id) return Resolved{job, {}};
    return Whole(job->id);
  }
  if (!ref.empty() && ref.front() != '0' &&
      ref.find_first_not_of("0123456789") == std::string_view::npos) {
    // The first task pruned, the rest still kept.
    if (auto whole = Whole(ref); !whole.tasks.empty()) return whole;
  }
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
  // One user has one live job of a name (Submit refuses a second but a
  // singleton), so the live one is the one meant; of finished ones, the
  // newest, as a re-run `--name bert` is. The tasks of an array, which
  // share its name, are one job here: the name means the array.
  auto key = [](const Job* j) {
    return j->spec.array.job_id.empty() ? j->id : j->spec.array.job_id;
  };
  std::map<std::string, const Job*> by_key;
  std::set<std::string> live;
  const Job* newest = nullptr;
  for (const Job* j : candidates) {
    by_key.emplace(key(j), j);
    if (!IsFinal(j->state)) live.insert(key(j));
    if (newest == nullptr || IdBefore(newest->id, j->id)) newest = j;
  }
  std::string chosen;
  if (by_key.size() == 1) {
    chosen = by_key.begin()->first;
  } else if (live.size() == 1) {
    chosen = *live.begin();
  } else if (live.empty()) {
    chosen = key(newest);
  } else {
    std::vector<std::string> ids(live.begin(), live.end());
    std::sort(ids.begin(), ids.end(), IdBefore);
    bool one_user = true;
    for (const std::string& id : ids) {
      one_user = one_user && by_key.at(id)->spec.uid == by_key.at(ids.front())->spec.uid;
    }
    return absl::FailedPreconditionError(Cat(
        "name '", ref, "' is ambiguous: jobs ", Join(ids, ", "),
        one_user ? " (singletons) are live" : " of several users are live", "; use the job id"));
  }
  const Job* job = by_key.at(chosen);
  if (job->spec.array.job_id.empty()) return Resolved{job, {}};
  return Whole(chosen);
}

}  // namespace ltd
