#include "job_manager.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "bytes.h"
#include "duration.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

// What ltd knows of a placed job's supervision.
class JobManager::Link final : public SupervisionEvents {
 public:
  Link(JobManager& manager, std::string id) : manager_(manager), id_(std::move(id)) {}
  void OnChanged(const Job& job, Change) override { manager_.OnChanged(id_, job); }
  void OnBeats(const std::vector<RankBeat>& beats) override { manager_.OnBeats(id_, beats); }
  void OnOutput(int rank, Stream stream, std::string_view line) override {
    manager_.OnOutput(id_, rank, stream, line);
  }
  void OnOutputResumed(bool missed) override { manager_.OnOutputResumed(id_, missed); }
  void OnEnded(const Job& job) override { manager_.OnSupervisionEnded(id_, job); }
  void OnLost(std::string why) override { manager_.LoseSupervision(id_, std::move(why)); }

 private:
  JobManager& manager_;
  const std::string id_;
};

struct JobManager::Supervised {
  std::unique_ptr<Link> link;
  std::unique_ptr<Supervision> supervision;
  // What the supervision was last told of output; a supervisor starts
  // with it on.
  bool output = true;
  // Output was asked for and the supervision said it comes (at first: it
  // comes from the start).
  bool flowing = true;
};

JobManager::JobManager(Clock& clock, SupervisorHost& supervisors, JobStore& store,
                       PortAllocator& ports, ManagerConfig config)
    : clock_(clock),
      supervisors_(supervisors),
      store_(store),
      ports_(ports),
      config_(std::move(config)),
      scheduler_(config_.placement),
      unkillable_(clock_, config_.unkillable_alive,
                  [this](const std::string& id, const std::vector<int>& slots) {
                    UnkillableGone(id, slots);
                  }) {}

JobManager::~JobManager() {
  if (retry_timer_ != 0) clock_.CancelTimer(retry_timer_);
  if (bury_timer_ != 0) clock_.CancelTimer(bury_timer_);
  if (fail_dependents_timer_ != 0) clock_.CancelTimer(fail_dependents_timer_);
  if (measure_timer_ != 0) clock_.CancelTimer(measure_timer_);
  CancelDrainTimers();
  for (Clock::TimerId t : shutdown_timers_) clock_.CancelTimer(t);
}

std::vector<std::unique_ptr<Job>> JobManager::ReadRecords(const JobStore& store) {
  // Parsing the JSON is most of a restart's time: on up to 4 cores.
  const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  std::vector<std::unique_ptr<Job>> records;
  std::mutex mu;
  store.ForEach(
      [&](Job&& job) {
        if (IsFinal(job.state)) CutToSummary(job, kSummaryArgvBytes);
        auto record = std::make_unique<Job>(std::move(job));
        std::lock_guard lock(mu);
        records.push_back(std::move(record));
      },
      threads);
  return records;
}

void JobManager::Recover(std::vector<std::unique_ptr<Job>> records, const Adopter& adopt) {
  RecoverDrain();
  std::vector<std::pair<uint64_t, Job*>> pending, running;
  for (std::unique_ptr<Job>& record : records) {
    if (!IsFinal(record->state)) {
      auto now = store_.Load(record->id);
      if (!now.ok()) {
        if (!absl::IsNotFound(now.status())) {
          spdlog::warn("skipping job record: {}", std::string(now.status().message()));
        }
        continue;
      }
      *record = std::move(*now);
      if (IsFinal(record->state)) CutToSummary(*record, kSummaryArgvBytes);
    }
    uint64_t numeric = 0;
    if (!absl::SimpleAtoi(record->id, &numeric)) continue;  // not a job of ours
    next_id_ = std::max(next_id_, numeric + 1);
    std::string id = record->id;
    Job& job = *jobs_.emplace(std::move(id), std::move(record)).first->second;
    tokens_.Remember(job.spec.uid, job.spec.submit_token, job.id, job.submitted_at);
    if (job.state == JobState::kPending) pending.emplace_back(numeric, &job);
    // A STARTING one's supervisor waits in its rendezvous: adopted as a running one's.
    if (job.state == JobState::kRunning || job.state == JobState::kStarting) {
      running.emplace_back(numeric, &job);
    }
    if (IsFinal(job.state)) {
      CountRecovered(job);
      HoldUnkillable(job, /*announce=*/false);  // an earlier ltd's, still there
    }
  }
  records.clear();
  records.shrink_to_fit();
  // What the records took while read (a finished one's command line and
  // environment are cut to its summary) goes back to the system.
  malloc_trim(0);
  if (!jobs_.empty()) spdlog::info("recovered {} job records", jobs_.size());
  std::sort(running.begin(), running.end());
  for (auto& [seq, job] : running) {
    std::unique_ptr<Supervision> supervision;
    auto link = std::make_unique<Link>(*this, job->id);
    if (adopt) supervision = adopt(*job, *link);
    if (supervision == nullptr) {
      if (IsFinal(job->state)) continue;  // it ended meanwhile: the record said so
      spdlog::warn("job={} was {} with no supervisor left; marking it LOST", job->id,
                   ToString(job->state));
      RootCause cause;
      cause.reason = CauseReason::kSupervisorLost;
      cause.at = clock_.Now();
      cause.message = "its supervisor died while ltd was away; its processes were killed";
      Finish(*job, std::move(cause), JobState::kLost);
      continue;
    }
    scheduler_.Hold(job->id, job->spec.uid, job->device_slots, job->spec.array.job_id);
    if (job->master_port != 0 && LtdPicksPort(job->spec)) ports_in_use_.insert(job->master_port);
    auto& entry = supervised_[job->id];
    entry = std::make_unique<Supervised>();
    entry->link = std::move(link);
    entry->supervision = std::move(supervision);
    UpdateOutput(job->id);
  }
  // PENDING jobs queue again, in their order.
  std::sort(pending.begin(), pending.end());
  for (auto& [seq, job] : pending) {
    job->device_slots.clear();
    CountWaiting(*job);
    WaitOrQueue(*job, seq);
    if (job->state == JobState::kPending && supervised_.count(job->id) == 0) Spill(*job);
  }
  finished_.SortById();
  PruneFinished();
  MeasureRecovered();
  // An earlier ltd's drain --deadline comes when it said (at once if past).
  if (drain_deadline_) ArmDrainDeadline();
  Schedule();
}

Job* JobManager::FindMutable(const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

std::vector<const Job*> JobManager::List(bool all) const {
  std::vector<const Job*> out;
  for (const auto& [id, job] : jobs_) {
    if (all || !IsFinal(job->state)) out.push_back(job.get());
  }
  return out;  // in id order: the table's own
}

void JobManager::ForEachAfter(std::string_view after,
                              const std::function<bool(const Job&)>& fn) const {
  for (auto it = after.empty() ? jobs_.begin() : jobs_.upper_bound(after); it != jobs_.end();
       ++it) {
    if (!fn(*it->second)) return;
  }
}

std::vector<SlotView> JobManager::Slots() const {
  std::vector<SlotView> out(static_cast<size_t>(std::max(config_.placement.slots, 0)));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].slot = static_cast<int>(i);
    if (i < config_.placement.gpu_ids.size()) out[i].gpu = config_.placement.gpu_ids[i];
    // From isolation's lookup (NVML or /proc/driver/nvidia), else NVML's.
    if (i < config_.gpu_minors.size()) out[i].minor = config_.gpu_minors[i];
    if (gpus_ == nullptr) continue;
    if (!out[i].minor) out[i].minor = gpus_->minor(out[i].slot);
    out[i].usage = gpus_->usage(out[i].slot);
    if (const GpuPool::Processes* p = gpus_->processes(out[i].slot)) {
      out[i].processes = p->listed;
      out[i].processes_unlisted = p->unlisted;
    }
    if (const GpuQuarantine* q = gpus_->quarantine(out[i].slot)) {
      out[i].state = SlotView::State::kQuarantined;
      out[i].quarantine = *q;
    }
  }
  // Held by a rank that would not die (the job it was of).
  for (SlotView& v : out) {
    if (std::string holder = unkillable_.Holding(v.slot); !holder.empty()) {
      v.state = SlotView::State::kQuarantined;
      v.job_id = std::move(holder);
      v.user = unkillable_.HoldingUser(v.slot);
      v.unkillable = unkillable_.HoldingProcesses(v.slot);
    }
  }
  // A placed job holds its slots from its placement on, while its
  // supervisor starts too.
  for (const auto& [id, entry] : supervised_) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    const Job* job = it->second.get();
    for (int slot : job->device_slots) {
      if (slot < 0 || static_cast<size_t>(slot) >= out.size()) continue;
      SlotView& v = out[static_cast<size_t>(slot)];
      v.state = SlotView::State::kBusy;
      v.job_id = job->id;
      v.user = job->user;
    }
  }
  return out;
}

void JobManager::StartSupervision(Job& job, bool recorded) {
  // The supervisor starts from the record: placed, with its environment.
  if (!recorded) {
    if (absl::Status s = store_.Save(job); !s.ok()) {
      spdlog::error("job={} cannot start its supervisor: {}", job.id, std::string(s.message()));
      return LoseSupervision(job.id,
                             Cat("ltd could not start the job's supervisor: ", s.message()));
    }
  }
  const std::string id = job.id;
  auto entry = std::make_unique<Supervised>();
  entry->link = std::make_unique<Link>(*this, id);
  Supervised& placed = *supervised_.emplace(id, std::move(entry)).first->second;
  // The supervision may end the job before Start returns (it cannot start).
  auto supervision = supervisors_.Start(job, *placed.link);
  if (auto it = supervised_.find(id); it != supervised_.end()) {
    it->second->supervision = std::move(supervision);
    UpdateOutput(id);
  } else {
    graveyard_.push_back(std::move(supervision));
  }
}

void JobManager::OnChanged(const std::string& id, const Job& now) {
  Job* job = FindMutable(id);
  // The end comes with OnSupervisionEnded, which does more than copy.
  if (job == nullptr || IsFinal(job->state) || IsFinal(now.state)) return;
  const JobState from = job->state;
  Emit([&](JobEvents& e) { e.OnRecord(*job, now); });
  ApplyRecord(*job, now);
  if (job->state != from) StateChanged(*job, from);
}

void JobManager::OnBeats(const std::string& id, const std::vector<RankBeat>& beats) {
  Job* job = FindMutable(id);
  if (job == nullptr || IsFinal(job->state)) return;
  // Progress alone: nothing a JobEvents hears of.
  ApplyBeats(*job, beats);
}

void JobManager::StateChanged(const Job& job, JobState from) {
  Emit([&](JobEvents& e) { e.OnStateChanged(job, from); });
  if (from == job.state || job.state != JobState::kRunning) return;
  if (from != JobState::kPending && from != JobState::kStarting) return;
  auto it = observers_.find(job.id);
  if (it == observers_.end()) return;
  for (auto& [oid, obs] : it->second) obs->OnStarted(job);
}

void JobManager::OnOutput(const std::string& id, int rank, Stream stream, std::string_view line) {
  Emit([](JobEvents& e) { e.OnOutputLine(); });
  auto it = observers_.find(id);
  if (it == observers_.end()) return;
  for (auto& [oid, obs] : it->second) obs->OnOutput(rank, stream, line);
}

void JobManager::OnOutputResumed(const std::string& id, bool missed) {
  if (auto placed = supervised_.find(id); placed != supervised_.end()) {
    if (placed->second->output) placed->second->flowing = true;
  }
  // Nothing went to the log alone: every observer had every line told.
  if (!missed) return;
  auto it = observers_.find(id);
  if (it == observers_.end()) return;
  // A copy: an observer may let go of the job from inside its call.
  std::vector<std::shared_ptr<JobObserver>> observers;
  for (auto& [oid, obs] : it->second) observers.push_back(obs);
  for (auto& obs : observers) obs->OnOutputResumed();
}

void JobManager::UpdateOutput(const std::string& id) {
  auto placed = supervised_.find(id);
  if (placed == supervised_.end() || placed->second->supervision == nullptr) return;
  bool want = false;
  if (auto it = observers_.find(id); it != observers_.end()) {
    for (const auto& [oid, obs] : it->second) want = want || obs->WantsOutput();
  }
  Supervised& s = *placed->second;
  if (s.output == want) return;
  s.output = want;
  if (!want) s.flowing = false;  // until OnOutputResumed after the next ask
  spdlog::debug("job={} output lines {}", id,
                want ? "on: a watcher wants them" : "off: no watcher wants them now");
  s.supervision->SetOutput(want);
}

bool JobManager::OutputFlowing(const std::string& id) const {
  auto placed = supervised_.find(id);
  return placed == supervised_.end() || placed->second->flowing;
}

void JobManager::OnSupervisionEnded(const std::string& id, const Job& final_job) {
  Job* job = FindMutable(id);
  if (job == nullptr || IsFinal(job->state)) return;
  const JobState from = job->state;
  Emit([&](JobEvents& e) { e.OnRecord(*job, final_job); });
  ApplyRecord(*job, final_job);
  StateChanged(*job, from);
  // Its supervisor closed errors/ (the user writes no more in its dir, no
  // tmpfs of it is left mounted); should it have failed to, ltd does.
  const bool noted = CloseJobErrorDir(store_, *job);
  // The supervision saved the record unless it says otherwise; then ltd
  // does, now that nobody else writes it.
  if (noted || !job->record_error.empty()) Persist(*job);
  Ended(*job);
}

void JobManager::Kill(const std::string& id, KillOrder order, Supervision::Done done) {
  const int signal = order.signal;
  Job* job = FindMutable(id);
  if (job == nullptr) return done(absl::NotFoundError(Cat("no job ", id)));
  if (IsFinal(job->state)) {
    return done(absl::FailedPreconditionError(
        Cat("job ", id, " already ended (", ToString(job->state), ")")));
  }
  if (order.why.empty()) {
    order.why = order.by == kByLtd ? std::string("ltd shut down")
                : order.by.empty() ? std::string("cancelled")
                                   : Cat("cancelled by ", order.by);
  }
  auto it = supervised_.find(id);
  if (it == supervised_.end() || it->second->supervision == nullptr) {
    if (signal != 0) {
      return done(
          absl::FailedPreconditionError(Cat("job ", id, " has not started; nothing to signal")));
    }
    RootCause cause;
    cause.reason = CauseReason::kCancelled;
    cause.at = clock_.Now();
    cause.message = std::move(order.why);
    cause.cancelled_by = std::move(order.by);
    Finish(*job, std::move(cause), JobState::kCancelled);
    return done(absl::OkStatus());
  }
  it->second->supervision->Kill(std::move(order), std::move(done));
}

void JobManager::Stacks(const std::string& id, std::optional<int> rank, Millis budget,
                        Supervision::StacksDone done) {
  Job* job = FindMutable(id);
  if (job == nullptr) return done(absl::NotFoundError(Cat("no job ", id)));
  auto it = supervised_.find(id);
  if (job->state != JobState::kRunning || it == supervised_.end() ||
      it->second->supervision == nullptr) {
    return done(absl::FailedPreconditionError(
        Cat("job ", id, " is ", ToString(job->state), ": only a running job has stacks")));
  }
  it->second->supervision->Stacks(rank, budget, std::move(done));
}

void JobManager::LoseSupervision(const std::string& id, std::string why) {
  Job* job = FindMutable(id);
  if (job == nullptr || IsFinal(job->state)) return;
  RootCause cause;
  cause.reason = CauseReason::kSupervisorLost;
  cause.at = clock_.Now();
  cause.message = std::move(why);
  Finish(*job, std::move(cause), JobState::kLost);
}

std::optional<JobManager::ObserverId> JobManager::Observe(const std::string& id,
                                                          std::shared_ptr<JobObserver> observer) {
  Job* job = FindMutable(id);
  if (job == nullptr || IsFinal(job->state)) return std::nullopt;
  const ObserverId oid = next_observer_++;
  observers_[id].emplace(oid, std::move(observer));
  UpdateOutput(id);
  return oid;
}

void JobManager::Unobserve(const std::string& id, ObserverId observer) {
  auto it = observers_.find(id);
  if (it == observers_.end()) return;
  it->second.erase(observer);
  if (it->second.empty()) observers_.erase(it);
  UpdateOutput(id);
}

LogSnapshot JobManager::TakeLog(const std::string& id) const {
  return LogSnapshot::Take(store_.JobDir(id));
}

void JobManager::Shutdown(bool end_jobs, std::function<void()> done) {
  shutting_down_ = true;
  shutdown_done_ = std::move(done);
  // Final records the disk refused: once more now, for the next retry may
  // be a minute off, and the next ltd knows only what is on disk.
  if (!unsaved_.empty()) {
    if (retry_timer_ != 0) clock_.CancelTimer(retry_timer_);
    RetryUnsaved();
  }
  std::vector<std::string> live;
  for (const auto& [id, job] : jobs_) {
    if (!IsFinal(job->state)) live.push_back(id);
  }
  if (end_jobs) {
    spdlog::info("shutting down: tearing down {} job(s)", live.size());
    CancelDrainTimers();
    for (const std::string& id : live) {
      const Job* job = FindMutable(id);
      const WarnSignal warn = job != nullptr ? job->spec.warn_signal : WarnSignal{};
      if (job == nullptr || job->state != JobState::kRunning || warn.signal == 0) {
        Kill(id, KillOrder::Teardown(std::string(kByLtd)), [](absl::Status) {});
        continue;
      }
      // Its --signal first, and the teardown its DUR later (at most
      // kMaxShutdownWarn: an admin's shutdown waits for nobody longer).
      const Millis wait = std::min(warn.before, kMaxShutdownWarn);
      SendWarnSignal(id,
                     Cat("ltd is shutting down; the job is torn down in ", FormatDuration(wait)));
      shutdown_timers_.push_back(clock_.StartTimer(wait, [this, id] {
        Kill(id, KillOrder::Teardown(std::string(kByLtd)), [](absl::Status) {});
      }));
    }
  } else {
    spdlog::info("stopping: {} job(s) stay with their supervisors", live.size());
    live.clear();
  }
  MaybeFinishShutdown(end_jobs);
}

void JobManager::MaybeFinishShutdown(bool end_jobs) {
  if (!shutting_down_ || !shutdown_done_) return;
  if (end_jobs) {
    for (const auto& [id, job] : jobs_) {
      if (!IsFinal(job->state)) return;
    }
  }
  auto done = std::move(shutdown_done_);
  shutdown_done_ = nullptr;
  done();
}

void JobManager::Finish(Job& job, RootCause cause, JobState state) {
  job.exit_code = ExitCodeFor(cause);
  for (Rank& r : job.ranks) {
    if (r.state == RankState::kRunning || r.state == RankState::kPending)
      r.state = RankState::kLost;
  }
  if (!job.attempts.empty() && !job.attempts.back().ended_at) {
    job.attempts.back().ended_at = cause.at;
    job.attempts.back().root_cause = cause;
  }
  job.ended_at = cause.at;
  if (!job.started_at) job.started_at = cause.at;
  job.root_cause = std::move(cause);
  // Whoever ended it (a pending job had no supervisor, a lost one's may
  // not have closed it), the user writes no more in its dir, and no tmpfs
  // of it is left mounted; what its ranks left there goes into the record.
  CloseJobErrorDir(store_, job);
  spdlog::info("job={} {} -> {}", job.id, ToString(job.state), ToString(state));
  const JobState from = std::exchange(job.state, state);
  StateChanged(job, from);
  Persist(job);
  Ended(job);
}

void JobManager::Ended(Job& job) {
  scheduler_.Release(job.id);
  live_bytes_.NotWaiting(job.id);
  live_bytes_.PlacedChanged();
  HoldUnkillable(job, /*announce=*/true);
  // Every process of the job is gone; a GPU some other process still holds
  // is not reused until that one is gone too.
  if (gpus_ != nullptr) {
    for (int slot : gpus_->CheckReleased(job.device_slots)) scheduler_.SetUnavailable(slot, true);
  }
  job.table.gpu_usage.clear();
  if (job.master_port != 0 && LtdPicksPort(job.spec)) ports_in_use_.erase(job.master_port);
  if (auto it = supervised_.find(job.id); it != supervised_.end()) {
    // Not destroyed here: this may be its own call.
    graveyard_.push_back(std::move(it->second->supervision));
    graveyard_links_.push_back(std::move(it->second->link));
    supervised_.erase(it);
    if (bury_timer_ == 0) {
      bury_timer_ = clock_.StartTimer(Millis(0), [this] {
        bury_timer_ = 0;
        graveyard_.clear();
        graveyard_links_.clear();
      });
    }
  }
  std::map<ObserverId, std::shared_ptr<JobObserver>> observers;
  if (auto it = observers_.find(job.id); it != observers_.end()) {
    observers = std::move(it->second);
    observers_.erase(it);
  }
  for (auto& [oid, obs] : observers) obs->OnEnded(job);
  // Its record is on disk (saved by its supervisor, or by Persist above,
  // which cut it already): memory keeps a summary.
  if (job.record_error.empty()) CutToSummary(job, kSummaryArgvBytes);
  CountFinished(job);
  OnDependencyEnded(job);
  if (batch_ending_) {  // KillEach places and prunes once, at its end
    batch_ended_ = true;
    return;
  }
  Schedule();
  MaybeFinishShutdown(true);
  PruneFinished();  // last: it may drop `job` itself when nothing is kept
}

void JobManager::GpuClean(int slot) {
  if (!unkillable_.Holding(slot).empty()) return;  // a rank that would not die holds it
  scheduler_.SetUnavailable(slot, false);
  Schedule();
}

void JobManager::RefreshGpuUsage() {
  if (gpus_ == nullptr) return;
  for (const auto& [id, entry] : supervised_) {
    Job* job = FindMutable(id);
    if (job == nullptr || job->state != JobState::kRunning) continue;
    job->table.gpu_usage.clear();
    for (int slot : job->device_slots) {
      if (auto u = gpus_->usage(slot)) job->table.gpu_usage.push_back(*u);
    }
  }
}

}  // namespace ltd
