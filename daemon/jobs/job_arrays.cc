// The job table's arrays (`submit --array`): the tasks of an array, found
// by its id. A task is a job of its own; its array is only what its
// record says (JobSpec::array), so an array outlives ltd as its tasks do.
#include <algorithm>
#include <utility>

#include "job_manager.h"

namespace ltd {

std::vector<const Job*> JobManager::ArrayTasks(std::string_view array_id) const {
  // A scan of the table: it holds a few thousand jobs at most (the
  // per-user limits and --keep-jobs), and arrays are rare.
  std::vector<const Job*> tasks;
  if (array_id.empty()) return tasks;
  for (const auto& [id, job] : jobs_) {
    if (job->spec.array.job_id == array_id) tasks.push_back(job.get());
  }
  std::sort(tasks.begin(), tasks.end(),
            [](const Job* a, const Job* b) { return a->spec.array.task < b->spec.array.task; });
  return tasks;
}

JobManager::Resolved JobManager::Whole(std::string_view array_id) const {
  Resolved r;
  r.tasks = ArrayTasks(array_id);
  if (!r.tasks.empty()) r.job = r.tasks.front();
  return r;
}

void JobManager::KillEach(const std::vector<std::string>& ids, const KillOrder& order,
                          const Supervision::Done& done) {
  // Not nested: a kill's answer runs on this loop, never inside another's.
  batch_ending_ = true;
  for (const std::string& id : ids) Kill(id, order, done);
  batch_ending_ = false;
  if (std::exchange(batch_ended_, false)) {
    Schedule();
    MaybeFinishShutdown(true);
    PruneFinished();
  }
}

const Job* JobManager::Find(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

}  // namespace ltd
