// The job table's records on disk (JobManager): each change saved, a final
// record the disk refused retried with a backoff. Which finished jobs go is
// state_budget.cc's.
#include <algorithm>

#include "duration.h"
#include "job_manager.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

void JobManager::Persist(Job& job) {
  // A record without the environment and command line it had would lose
  // them for good: where they wait on disk they are read back first, for
  // a waiting job's record and for its final one (a cancel) alike.
  if (absl::Status s = ReloadSpec(job); !s.ok()) {
    const std::string why = Cat("its record could not be read back: ", s.message());
    if (!IsFinal(job.state)) {
      // Saved without them it would start with a cut command line: it is
      // not saved, and its start fails on the same read.
      job.record_error = why;
      spdlog::error("job={} record not saved: {}", job.id, why);
      return;
    }
    // An end is saved regardless: a job that ended must not come back.
    spdlog::error("job={} final record saved with the command line and environment ltd held: {}",
                  job.id, why);
  }
  absl::Status s = store_.Save(job);
  if (s.ok()) {
    if (!job.record_error.empty()) spdlog::info("job={} record saved at last", job.id);
    job.record_error.clear();
    unsaved_.erase(job.id);
    // On disk in full: what memory keeps of a finished job is a summary,
    // of a waiting one its head.
    if (IsFinal(job.state)) CutToSummary(job, kSummaryArgvBytes);
    if (job.state == JobState::kPending && supervised_.count(job.id) == 0) Spill(job);
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
