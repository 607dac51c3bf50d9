// --max-state-bytes: the state dir as a whole is bounded, not only each
// job's log (--job-max-log-bytes) and the count of kept jobs (--keep-jobs):
// 10,000 kept jobs of 1G of log each would be 10 TB. The job table's side
// (JobManager).
#include <iterator>

#include "dir_usage.h"
#include "job_manager.h"
#include "str_util.h"

namespace ltd {
namespace {

std::string Human(uint64_t bytes) {
  constexpr const char* kUnits[] = {"B", "K", "M", "G", "T"};
  size_t unit = 0;
  uint64_t value = bytes;
  while (value >= 10 * 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  return Cat(value, kUnits[unit]);
}

}  // namespace

void JobManager::CountFinished(const std::string& id) {
  if (config_.max_state_bytes == 0) return;
  const uint64_t bytes = DirBytes(store_.JobDir(id));
  UncountFinished(id);
  finished_bytes_[id] = bytes;
  finished_total_ += bytes;
}

void JobManager::UncountFinished(const std::string& id) {
  auto it = finished_bytes_.find(id);
  if (it == finished_bytes_.end()) return;
  finished_total_ -= it->second;
  finished_bytes_.erase(it);
}

uint64_t JobManager::LiveBytes() const {
  uint64_t total = 0;
  for (const auto& [id, job] : jobs_) {
    if (!IsFinal(job->state)) total += DirBytes(store_.JobDir(id));
  }
  return total;
}

absl::Status JobManager::RoomToSubmit() {
  if (config_.max_state_bytes == 0) return absl::OkStatus();
  PruneFinished();  // finished jobs make room first, oldest first
  const uint64_t live = LiveBytes();
  if (live < config_.max_state_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      Cat("the state dir is full: live jobs' logs take ", Human(live), " of --max-state-bytes ",
          Human(config_.max_state_bytes), "; submit again once jobs have ended, or ask an admin"));
}

}  // namespace ltd
