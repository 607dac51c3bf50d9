// Ranks that would not die of SIGKILL: the job table's side (JobManager).
// Their job's device slots stay out of use until UnkillableWatch sees the
// last of them gone.
#include "job_manager.h"
#include "spdlog/spdlog.h"

namespace ltd {

void JobManager::HoldUnkillable(const Job& job, bool announce) {
  if (!unkillable_.Add(job)) return;
  // Its user's still, for the running-jobs limit and the share, until
  // they are gone: otherwise a user whose jobs leave such processes would
  // hold every slot under a limit of one job.
  scheduler_.ChargeQuarantine(job.id, job.spec.uid, static_cast<int>(job.device_slots.size()));
  std::string slots, pids;
  for (int slot : job.device_slots) {
    scheduler_.SetUnavailable(slot, true);
    slots += (slots.empty() ? "" : ",") + std::to_string(slot);
  }
  for (const UnkillableProcess& p : job.unkillable) {
    if (!p.gone_at) pids += (pids.empty() ? "" : ", ") + Describe(p);
  }
  spdlog::error(
      "job={} ended with {} that would not die; device slot(s) {} stay out of use "
      "until it is gone",
      job.id, pids, slots);
  if (announce) Emit([&](JobEvents& e) { e.OnUnkillable(job); });
}

void JobManager::UnkillableGone(const std::string& id, const std::vector<int>& slots) {
  scheduler_.EndQuarantine(id);
  for (int slot : slots) {
    // A GPU that a process outside any job holds stays quarantined.
    if (gpus_ == nullptr || gpus_->quarantine(slot) == nullptr)
      scheduler_.SetUnavailable(slot, false);
  }
  spdlog::info("job={} has no process left that would not die; its device slot(s) are back", id);
  // Its record on disk says so (memory has a summary: the whole record is
  // read, marked and written back).
  const WallTime now = clock_.Now();
  if (Job* job = FindMutable(id)) {
    for (UnkillableProcess& p : job->unkillable) {
      if (!p.gone_at) p.gone_at = now;
    }
  }
  if (auto record = store_.Load(id); record.ok()) {
    for (UnkillableProcess& p : record->unkillable) {
      if (!p.gone_at) p.gone_at = now;
    }
    if (absl::Status s = store_.Save(*record); !s.ok()) {
      spdlog::warn("job={} record not updated: {}", id, std::string(s.message()));
    }
  }
  Emit([&](JobEvents& e) { e.OnUnkillableGone(id); });
  Schedule();
}

}  // namespace ltd
