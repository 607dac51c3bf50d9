// The job table's records on disk (JobManager): each change saved, a final
// record the disk refused retried with a backoff. Which finished jobs go is
// state_budget.cc's.
#include <algorithm>

#include "duration.h"
#include "job_manager.h"
#include "spdlog/spdlog.h"

namespace ltd {

void JobManager::Persist(Job& job) {
  // A record without the environment it had would lose it for good.
  if (!IsFinal(job.state)) (void)ReloadEnv(job);
  absl::Status s = store_.Save(job);
  if (s.ok()) {
    if (!job.record_error.empty()) spdlog::info("job={} record saved at last", job.id);
    job.record_error.clear();
    unsaved_.erase(job.id);
    // On disk in full: what memory keeps of a finished job is a summary.
    if (IsFinal(job.state)) CutToSummary(job, kSummaryArgvBytes);
    return;
  }
  if (job.record_error.empty()) {
    spdlog::error("job={} record not saved: {}", job.id, std::string(s.message()));
  }
  job.record_error = std::string(s.message());
  // A live record is saved again at its next change anyway; a final one
  // has no next change, so it is retried until the disk takes it.
  if (!IsFinal(job.state)) return;
  unsaved_.insert(job.id);
  if (retry_timer_ != 0) return;
  retry_delay_ = std::clamp(retry_delay_ * 2, Millis(1000), Millis(60000));
  retry_timer_ = clock_.StartTimer(retry_delay_, [this] { RetryUnsaved(); });
}

void JobManager::RetryUnsaved() {
  retry_timer_ = 0;
  const std::set<std::string> ids = std::move(unsaved_);
  unsaved_.clear();
  for (const std::string& id : ids) {
    if (Job* job = FindMutable(id)) Persist(*job);
  }
  if (unsaved_.empty()) retry_delay_ = Millis(0);
}

}  // namespace ltd
