// --max-state-bytes: the state dir as a whole is bounded, not only each
// job's log (--job-max-log-bytes) and the count of kept jobs (--keep-jobs):
// 10,000 kept jobs of 1G of log each would be 10 TB. Both bounds are shared
// per user (finished_jobs.h): one user's volume prunes their own finished
// jobs and refuses their own submits, never another's within their share.
// The job table's side (JobManager).
#include <iterator>

#include "dir_usage.h"
#include "job_manager.h"
#include "spdlog/spdlog.h"
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

void JobManager::CountFinished(const Job& job) {
  const uint64_t bytes = config_.max_state_bytes > 0 ? DirBytes(store_.JobDir(job.id)) : 0;
  finished_.Add(job.id, job.spec.uid, bytes);
}

void JobManager::CountWaiting(const Job& job) {
  if (config_.max_state_bytes == 0) return;
  live_bytes_.Waiting(job.id, job.spec.uid, DirBytes(store_.JobDir(job.id)));
}

void JobManager::CountRecovered(const Job& job) {
  finished_.Add(job.id, job.spec.uid, 0);
  if (config_.max_state_bytes > 0) unmeasured_.push_back(job.id);
}

void JobManager::MeasureRecovered() {
  measure_timer_ = 0;
  // A batch a turn of the loop (~10 ms): requests are answered in between.
  constexpr size_t kBatch = 256;
  for (size_t i = 0; i < kBatch && !unmeasured_.empty(); ++i) {
    const std::string id = std::move(unmeasured_.back());
    unmeasured_.pop_back();
    finished_.SetBytes(id, DirBytes(store_.JobDir(id)));  // none if pruned meanwhile
  }
  if (unmeasured_.empty()) {
    std::vector<std::string>().swap(unmeasured_);
    return PruneFinished();
  }
  measure_timer_ = clock_.StartTimer(Millis(0), [this] { MeasureRecovered(); });
}

FinishedJobs::Usage JobManager::LiveUsage() {
  // The waiting jobs' as counted when they began to wait; the placed ones'
  // measured again, at most once a second: a walk per running job, never
  // one per queued job.
  return live_bytes_.Total(clock_.Monotonic(), [this] {
    FinishedJobs::Usage placed;
    for (const auto& [id, entry] : supervised_) {
      const Job* job = FindMutable(id);
      if (job != nullptr && !IsFinal(job->state))
        placed[job->spec.uid] += DirBytes(store_.JobDir(id));
    }
    return placed;
  });
}

void JobManager::PruneFinished() {
  PruneFinished(config_.max_state_bytes > 0 ? LiveUsage() : FinishedJobs::Usage{});
}

void JobManager::PruneFinished(const FinishedJobs::Usage& live) {
  while (auto id = finished_.NextToPrune(config_.keep_finished, config_.max_state_bytes, live)) {
    finished_.Remove(*id);
    jobs_.erase(*id);
    if (auto s = store_.Remove(*id); !s.ok()) {
      spdlog::warn("job={} old record not removed: {}", *id, std::string(s.message()));
    }
  }
}

absl::Status JobManager::RoomToSubmit(uid_t uid) {
  if (config_.max_state_bytes == 0) return absl::OkStatus();
  const FinishedJobs::Usage live = LiveUsage();
  PruneFinished(live);  // finished jobs make room first, the biggest user's first
  const FinishedJobs::Share s = finished_.ShareOf(uid, config_.max_state_bytes, live);
  if (s.total < config_.max_state_bytes) return absl::OkStatus();
  // Full, but not by this user: the one over their share is refused, not them.
  if (s.used == 0 || s.used < s.share) return absl::OkStatus();
  const std::string bound =
      Cat("--max-state-bytes ", Human(config_.max_state_bytes),
          s.users > 1 ? Cat(" shared by ", s.users, " users: ", Human(s.share), " each") : "");
  return absl::ResourceExhaustedError(Cat("the state dir is full: your jobs take ", Human(s.used),
                                          " (", Human(s.live_used), " of it live jobs' logs) of ",
                                          bound,
                                          "; submit again once some of your jobs have "
                                          "ended, or end one (ltctl kill JOB)"));
}

}  // namespace ltd
