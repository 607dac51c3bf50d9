// `ltctl drain` and `ltctl resume`: the job table's side (JobManager).
#include <algorithm>

#include "bytes.h"
#include "drain_record.h"
#include "duration.h"
#include "job_manager.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

absl::Status JobManager::Drain(std::string reason, Millis deadline) {
  std::optional<WallTime> at;
  if (deadline.count() > 0) at = clock_.Now() + deadline;
  // Kept first: a drain (or its deadline) that the next ltd would forget
  // is refused.
  absl::Status s = SaveDrainDeadline(store_.state_dir(), at);
  if (s.ok()) s = SaveDrain(store_.state_dir(), reason);
  if (!s.ok()) {
    return absl::UnavailableError(Cat("cannot keep the drain in the state dir: ", s.message()));
  }
  spdlog::info("drained{}{}: no job starts until `ltctl resume`", reason.empty() ? "" : ": ",
               ForLog(reason));
  drain_ = std::move(reason);
  CancelDrainTimers();
  drain_deadline_ = at;
  if (at) ArmDrainDeadline();
  Emit([&](JobEvents& e) { e.OnDrainChanged(drain_); });
  return absl::OkStatus();
}

void JobManager::ArmDrainDeadline() {
  const Millis left =
      std::max(Millis{0}, std::chrono::duration_cast<Millis>(*drain_deadline_ - clock_.Now()));
  spdlog::info("running jobs are torn down in {} (drain --deadline)", FormatDuration(left));
  for (const auto& [id, job] : jobs_) {
    // PENDING ones too: restored jobs are so until their supervisors
    // answer; SendWarnSignal sends only to a running one.
    if (IsFinal(job->state) || job->spec.warn_signal.signal == 0) continue;
    const Millis before = job->spec.warn_signal.before;
    drain_timers_.push_back(
        clock_.StartTimer(std::max(Millis{0}, left - before), [this, id = id, before, left] {
          SendWarnSignal(
              id, Cat("the drain's deadline is in ", FormatDuration(std::min(before, left))));
        }));
  }
  drain_timers_.push_back(clock_.StartTimer(left, [this] {
    drain_timers_.clear();  // this one has run; the --signal ones before it
    for (const Job* job : List(false)) {
      if (job->state != JobState::kRunning && job->state != JobState::kStarting) continue;
      Kill(job->id,
           KillOrder::Teardown(std::string(kByLtd),
                               "the drain's deadline came (ltctl drain --deadline)"),
           [](absl::Status) {});
    }
  }));
}

absl::Status JobManager::Resume() {
  absl::Status s = SaveDrain(store_.state_dir(), std::nullopt);
  if (s.ok()) s = SaveDrainDeadline(store_.state_dir(), std::nullopt);
  if (!s.ok()) {
    return absl::UnavailableError(Cat("cannot remove the drain from the state dir: ", s.message()));
  }
  if (drain_) spdlog::info("resumed: jobs start again");
  drain_.reset();
  CancelDrainTimers();
  drain_deadline_.reset();
  Emit([&](JobEvents& e) { e.OnDrainChanged(drain_); });
  Schedule();
  return absl::OkStatus();
}

void JobManager::CancelDrainTimers() {
  for (Clock::TimerId t : drain_timers_) clock_.CancelTimer(t);
  drain_timers_.clear();
}

void JobManager::SendWarnSignal(const std::string& id, const std::string& why) {
  const Job* job = FindMutable(id);
  if (job == nullptr || job->state != JobState::kRunning || job->spec.warn_signal.signal == 0) {
    return;
  }
  KillOrder order = KillOrder::Signal(job->spec.warn_signal.signal, false);
  order.warn = why;
  Kill(id, std::move(order), [id](absl::Status s) {
    if (!s.ok()) spdlog::info("job={} --signal not sent: {}", id, std::string(s.message()));
  });
}

void JobManager::RecoverDrain() {
  drain_ = LoadDrain(store_.state_dir());
  if (!drain_) return;
  spdlog::warn("drained{}{} (by an earlier ltd): no job starts until `ltctl resume`",
               drain_->empty() ? "" : ": ", ForLog(*drain_));
  // Its deadline is armed once the jobs are back (Recover).
  drain_deadline_ = LoadDrainDeadline(store_.state_dir());
  Emit([&](JobEvents& e) { e.OnDrainChanged(drain_); });
}

}  // namespace ltd
