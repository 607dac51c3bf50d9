// A job's way from the queue to its supervisor (JobManager): the slots the
// scheduler gave it, its port, its record saved placed, its supervisor
// started. A lone job that starts at once is placed before its first
// record, so that the record is written once, placed, not twice.
#include "bytes.h"
#include "job_manager.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

void JobManager::Schedule() {
  if (shutting_down_) return;
  if (drain_) return;
  for (Scheduler::Placement& p : scheduler_.Place()) StartPlaced(std::move(p));
}

void JobManager::StartPlaced(Scheduler::Placement placement) {
  Job* job = FindMutable(placement.id);
  if (job == nullptr || job->state != JobState::kPending) {
    scheduler_.Release(placement.id);  // cannot happen: pending jobs are dequeued when they end
    return;
  }
  ApplyPlacement(*job, std::move(placement));
  Start(*job);
}

void JobManager::ApplyPlacement(Job& job, Scheduler::Placement placement) {
  job.device_slots = std::move(placement.slots);
  job.cuda_visible_devices = std::move(placement.cuda_visible_devices);
  job.gpu_isolation = config_.gpu_isolation;
  job.isolate_gpus = !config_.gpu_minors.empty();
  job.gpu_minors.clear();
  for (int slot : job.device_slots) {
    if (job.isolate_gpus && static_cast<size_t>(slot) < config_.gpu_minors.size())
      job.gpu_minors.push_back(config_.gpu_minors[static_cast<size_t>(slot)]);
  }
}

absl::Status JobManager::ReadyToStart(Job& job) {
  if (auto s = ReloadSpec(job); !s.ok()) {
    return absl::DataLossError(Cat(
        "its command line and environment could not be read back from its record: ", s.message()));
  }
  if (!LtdPicksPort(job.spec)) {
    job.master_port = job.spec.nodes.master_port;
    return absl::OkStatus();
  }
  auto port = ports_.Pick(ports_in_use_);
  if (!port.ok()) return port.status();
  job.master_port = *port;
  ports_in_use_.insert(*port);
  return absl::OkStatus();
}

void JobManager::Start(Job& job, bool recorded) {
  live_bytes_.NotWaiting(job.id);
  live_bytes_.PlacedChanged();
  if (!recorded) {
    if (absl::Status s = ReadyToStart(job); !s.ok()) {
      RootCause cause;
      cause.reason = CauseReason::kSpawnFailed;
      cause.at = clock_.Now();
      cause.exit_code = 1;
      cause.message = std::string(s.message());
      spdlog::error("job={} cannot start: {}", job.id, ForLog(cause.message));
      return Finish(job, std::move(cause), JobState::kFailed);
    }
  }
  StartSupervision(job, recorded);
}

bool JobManager::PlaceAtOnce(Job& job, uint64_t seq) {
  Queue(job, seq);
  bool placed = false;
  for (Scheduler::Placement& p : scheduler_.Place()) {
    if (p.id == job.id) {
      ApplyPlacement(job, std::move(p));
      placed = true;
      continue;
    }
    // Not expected (PlacesAtOnce said no job waits), but a job placed
    // here starts as Schedule would start it.
    StartPlaced(std::move(p));
  }
  if (!placed) {
    scheduler_.Dequeue(job.id);
    return false;
  }
  // A port it cannot have: it goes the usual way, and fails to start there
  // with its record saved.
  if (!ReadyToStart(job).ok()) {
    UnplaceAtOnce(job);
    return false;
  }
  return true;
}

void JobManager::UnplaceAtOnce(Job& job) {
  scheduler_.Unplace(job.id);
  if (job.master_port != 0 && LtdPicksPort(job.spec)) ports_in_use_.erase(job.master_port);
  job.master_port = 0;
  job.device_slots.clear();
  job.cuda_visible_devices.clear();
  job.gpu_minors.clear();
}

}  // namespace ltd
