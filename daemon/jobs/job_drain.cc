// `ltctl drain` and `ltctl resume`: the job table's side (JobManager).
#include "bytes.h"
#include "drain_record.h"
#include "job_manager.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

absl::Status JobManager::Drain(std::string reason) {
  // Kept first: a drain that the next ltd would forget is refused.
  if (auto s = SaveDrain(store_.state_dir(), reason); !s.ok()) {
    return absl::UnavailableError(Cat("cannot keep the drain in the state dir: ", s.message()));
  }
  spdlog::info("drained{}{}: no job starts until `ltctl resume`", reason.empty() ? "" : ": ",
               ForLog(reason));
  drain_ = std::move(reason);
  UpdatePendingReasons();
  Emit([&](JobEvents& e) { e.OnDrainChanged(drain_); });
  return absl::OkStatus();
}

absl::Status JobManager::Resume() {
  if (auto s = SaveDrain(store_.state_dir(), std::nullopt); !s.ok()) {
    return absl::UnavailableError(Cat("cannot remove the drain from the state dir: ", s.message()));
  }
  if (drain_) spdlog::info("resumed: jobs start again");
  drain_.reset();
  Emit([&](JobEvents& e) { e.OnDrainChanged(drain_); });
  Schedule();
  return absl::OkStatus();
}

void JobManager::RecoverDrain() {
  drain_ = LoadDrain(store_.state_dir());
  if (!drain_) return;
  spdlog::warn("drained{}{} (by an earlier ltd): no job starts until `ltctl resume`",
               drain_->empty() ? "" : ": ", ForLog(*drain_));
  Emit([&](JobEvents& e) { e.OnDrainChanged(drain_); });
}

}  // namespace ltd
