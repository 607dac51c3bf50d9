// The job table: every job from submit to its final record, as ltd sees
// them. It queues jobs, places them on device slots with a master port,
// hands each placed job to a supervision (supervisor/) and mirrors what the
// supervision reports: states, progress, output for observers, the end.
// It records PENDING jobs and jobs whose supervision was lost; a
// supervision records its job while it runs. Loop thread only; knows
// neither libuv nor gRPC, so its tests drive it with fakes.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "clock.h"
#include "dependencies.h"
#include "finished_jobs.h"
#include "gpu_pool.h"
#include "job.h"
#include "job_events.h"
#include "job_log.h"
#include "job_store.h"
#include "live_bytes.h"
#include "ports.h"
#include "scheduler.h"
#include "submit_tokens.h"
#include "supervision.h"
#include "unkillable_watch.h"

namespace ltd {

// Receives a job's live output and its end. Called on the loop thread.
class JobObserver {
 public:
  virtual ~JobObserver() = default;
  // Whether it needs OnOutput at all. The job's supervisor sends ltd its
  // output only while some observer does (a `wait` needs none).
  virtual bool WantsOutput() const { return true; }
  virtual void OnOutput(int rank, Stream stream, std::string_view line) = 0;
  // Output was off (nobody watched) and is on again: lines written before
  // are in the job's log, and no OnOutput told of them.
  virtual void OnOutputResumed() {}
  // The job left PENDING: its ranks start.
  virtual void OnStarted(const Job& job) { (void)job; }
  virtual void OnEnded(const Job& job) = 0;
};

// One device slot as `ltctl gpus` and the metrics see it.
struct SlotView {
  enum class State { kFree, kBusy, kQuarantined };
  int slot = 0;
  std::string gpu;  // its GPU index; "" for a logical slot
  State state = State::kFree;
  std::string job_id, user;                 // busy
  std::optional<GpuQuarantine> quarantine;  // quarantined
  // Quarantined by a job's processes that would not die: which, where they
  // sleep in the kernel, since when.
  std::vector<UnkillableProcess> unkillable;
  std::optional<GpuSample> usage;  // the last sample, with NVML
  std::optional<uint32_t> minor;   // of its /dev/nvidiaN
  // Every compute process on its GPU at the last sample, whoever's.
  std::vector<GpuHolder> processes;
  size_t processes_unlisted = 0;
};

struct ManagerConfig {
  // Device slots, per-user queue limits.
  SchedulerConfig placement;
  // Finished jobs kept (records and logs), shared per user as
  // max_state_bytes is. Without a bound, a server that runs jobs for
  // months grows without end.
  size_t keep_finished = 10000;
  // --max-restarts above this is refused.
  int max_restarts_limit = 100;
  // The longest --time a job may ask for; a job without one gets this. 0: any.
  std::chrono::milliseconds max_time{0};
  // How the nodes of a run at etcd authenticate their records, unless a
  // submit says ("munge", "none"), and munged's socket (the admin's: a
  // root supervisor speaks to no socket a user names).
  std::string rdzv_auth = "none";
  std::string munge_socket;
  // etcd's TLS and authentication files (--etcd-*), ltd's own.
  std::string etcd_ca, etcd_cert, etcd_key, etcd_auth_file;
  // The state dir's bound in bytes (--max-state-bytes; 0: none), shared
  // per user (finished_jobs.h): past it the finished jobs of the user
  // furthest over their share go first, and a submit is refused only to a
  // user over their share while the dir is full.
  uint64_t max_state_bytes = 0;
  // Why --mem or --cpus cannot be had here (ProbeLimitSupport); empty: they
  // can. A job that asks for one anyway is refused, never run unlimited.
  std::string no_memory_limit;
  std::string no_cpu_limit;
  int cpus = 0;  // the host's CPUs: the most --cpus may ask for (0: unchecked)
  // When the slots are GPUs: each slot's /dev/nvidiaN minor, when every
  // one is known and isolation is on and can be set (else empty), and in
  // words how jobs' GPUs are isolated or why not (`gpus`, `show`).
  std::vector<uint32_t> gpu_minors;
  std::string gpu_isolation;
  // Whether a rank that would not die is still there (tests: a fake).
  UnkillableWatch::Alive unkillable_alive = ProcessStillThere;
};

class JobManager {
 public:
  JobManager(Clock& clock, SupervisorHost& supervisors, JobStore& store, PortAllocator& ports,
             ManagerConfig config);
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Loads the records of an earlier ltd. Jobs it left PENDING queue again
  // in their order; RUNNING ones go to `adopt` (ltd's re-attach to their
  // supervisors), or become LOST without one.
  using Adopter = std::function<std::unique_ptr<Supervision>(const Job&, SupervisionEvents&)>;
  void Recover(const Adopter& adopt = nullptr) { Recover(ReadRecords(store_), adopt); }
  // The same from records read earlier (ReadRecords: ltd's start reads
  // them once, to know the live jobs first). A live one is read again
  // here: its supervisor may have changed it since; a final one cannot.
  void Recover(std::vector<std::unique_ptr<Job>> records, const Adopter& adopt);
  // Every record of the state dir, a final one cut to its summary
  // (CutToSummary) as it is read.
  static std::vector<std::unique_ptr<Job>> ReadRecords(const JobStore& store);

  // Validates and queues a job; returns its id. A program that cannot run
  // still makes a job, which ends FAILED with reason spawn_failed
  // (job_submit.cc). A spec with array_tasks makes one job per task and
  // returns the array's id (its first task's).
  absl::StatusOr<std::string> Submit(JobSpec spec, std::string user);

  // JOB as `caller` typed it: an id, or a name. A name means the caller's
  // own jobs of that name if there are any (root owns none: it sees
  // everyone's), else everyone's; among those, the one still live (a user
  // has one at most), else the newest; several live (of several users)
  // are ambiguous.
  static constexpr uid_t kAnyone = 0;
  // Who cancels the jobs that `ltctl shutdown` ends: no user name has a
  // space, so no user's cancellation reads as ltd's.
  static constexpr std::string_view kByLtd = "ltd (shutdown)";
  // `ltctl shutdown` waits this long at most after a job's --signal.
  static constexpr Millis kMaxShutdownWarn{5 * 60 * 1000};
  // A JOB that names a whole array of several tasks is refused here in one
  // line (ResolveAny takes it).
  absl::StatusOr<const Job*> Resolve(std::string_view ref, uid_t caller = kAnyone) const;
  // What JOB names: one job, or every task of an array (job_arrays.cc):
  // JOB is the array's id or a name its tasks share; "12_3" is a task.
  struct Resolved {
    const Job* job = nullptr;       // the job, or the array's first task
    std::vector<const Job*> tasks;  // the array's tasks in task order, when JOB names it
  };
  absl::StatusOr<Resolved> ResolveAny(std::string_view ref, uid_t caller = kAnyone) const;
  // The tasks of the array `array_id` that ltd still has, in task order.
  std::vector<const Job*> ArrayTasks(std::string_view array_id) const;
  // The job of this id exactly (no name, no array); nullptr: none.
  const Job* Find(const std::string& id) const;
  std::vector<const Job*> List(bool all) const;
  // Calls `fn` with each job whose id comes after `after` ("": every job),
  // in id order, until it returns false: a page of a listing costs its
  // jobs, not the table.
  void ForEachAfter(std::string_view after, const std::function<bool(const Job&)>& fn) const;
  // Why a PENDING job waits, in words ("needs 4 devices, 2 free", "after
  // job 7"); "" for any other. Worked out when asked, not on every
  // scheduling pass: a pass costs the same whatever the queue holds.
  std::string PendingReason(const Job& job) const;
  // Placed on devices, its supervisor starting: PENDING, but not queued.
  bool Placed(const std::string& id) const { return supervised_.contains(id); }

  // order.signal 0: tear the job down (cancelled by order.by, a user's
  // name or kByLtd; the manager words the message). Else send the signal to the ranks. `done` gets
  // the answer on the loop, maybe before Kill returns.
  void Kill(const std::string& id, KillOrder order, Supervision::Done done);
  // Kill of each of `ids` (an array's tasks, job_arrays.cc), as one:
  // the queue is placed and finished jobs pruned once at the end, not
  // after each pending job cancelled (each a walk of every live job's
  // dir: 1000 tasks took ltd's loop for 14 s). `done` gets each answer.
  void KillEach(const std::vector<std::string>& ids, const KillOrder& order,
                const Supervision::Done& done);
  // `ltctl stack`: the running job's ranks' stacks (all, or `rank`),
  // from its supervision, within `budget`.
  void Stacks(const std::string& id, std::optional<int> rank, Millis budget,
              Supervision::StacksDone done);

  // Live output and the end of an unfinished job; false if it has ended.
  using ObserverId = uint64_t;
  std::optional<ObserverId> Observe(const std::string& id, std::shared_ptr<JobObserver> observer);
  void Unobserve(const std::string& id, ObserverId observer);

  // Whether the job's output reaches its observers now: false from the
  // moment nobody watched until the supervision says it comes again
  // (JobObserver::OnOutputResumed). True for a job not started yet.
  bool OutputFlowing(const std::string& id) const;
  // An observer's WantsOutput changed: the supervision is told whether
  // anyone still wants the job's output lines.
  void WantsOutputChanged(const std::string& id) { UpdateOutput(id); }

  // The job's log as it is now (every line so far, none after); read it
  // off the loop with ReadLog.
  LogSnapshot TakeLog(const std::string& id) const;
  // The records on disk. Load is safe on any thread: a finished job's
  // whole record (its summary in memory is cut) is read off the loop.
  const JobStore& store() const { return store_; }
  // What a finished job's summary, and a waiting job in the table, keep
  // of its command line.
  static constexpr size_t kSummaryArgvBytes = 4096;

  // Maintenance (`ltctl drain`, job_drain.cc): while drained no job starts,
  // running ones go on, pending ones wait and say why. Kept in the state
  // dir, so that it outlives ltd; an error when it cannot be kept there.
  // `deadline` (from now; 0: none): running jobs are torn down then, each
  // job's --signal sent its DUR before. A later Drain or Resume replaces it.
  absl::Status Drain(std::string reason, Millis deadline = Millis{0});
  absl::Status Resume();
  // The drain's reason ("" for none), or nullopt when not drained.
  const std::optional<std::string>& drain() const { return drain_; }
  const std::optional<WallTime>& drain_deadline() const { return drain_deadline_; }

  // Refuses new jobs; with `end_jobs`, tears every live job down first.
  // Then calls `done`.
  void Shutdown(bool end_jobs, std::function<void()> done);

  size_t running() const { return supervised_.size(); }

  // Every device slot: free, busy (whose job) or quarantined.
  std::vector<SlotView> Slots() const;

  // GPUs checked free before reuse (gpu/gpu_pool.h); unset: no checks.
  void SetGpuPool(GpuPool* pool) { gpus_ = pool; }
  // A quarantined GPU slot is clean again: back in the pool.
  void GpuClean(int slot);
  // Copies the pool's last samples into each running job's gpu_usage.
  void RefreshGpuUsage();
  bool gpu_checks() const { return gpus_ != nullptr && gpus_->checks_on(); }
  // A fresh look at the GPUs for `ltctl gpus` (at most one a second).
  void SampleGpus() {
    if (gpus_ != nullptr) gpus_->SampleUnlessFresherThan(Millis(1000));
  }
  const std::string& gpu_isolation() const { return config_.gpu_isolation; }

  // Tells `events` (outliving the manager) what happens to jobs.
  void AddEvents(JobEvents* events) { events_.push_back(events); }

 private:
  // A placed job: its supervision and the events it reports.
  struct Supervised;
  class Link;

  Job* FindMutable(const std::string& id);
  // A name one of the submitter's PENDING or RUNNING jobs has is refused.
  absl::Status NameFree(const JobSpec& spec) const;
  // A job's way from the queue to its supervisor (job_start.cc): the
  // slots Place() gave it, its port, its record saved placed (unless
  // `recorded`: a job that starts at once is saved once, placed).
  void Schedule();
  void StartPlaced(Scheduler::Placement placement);
  void ApplyPlacement(Job& job, Scheduler::Placement placement);
  absl::Status ReadyToStart(Job& job);
  void Start(Job& job, bool recorded = false);
  void StartSupervision(Job& job, bool recorded);
  // A lone job that starts at once, placed before its first record is
  // saved; false (and nothing held) when it cannot be.
  bool PlaceAtOnce(Job& job, uint64_t seq);
  void UnplaceAtOnce(Job& job);
  // A multi-node run's port is the run's (given, or agreed by its
  // rendezvous) on node 0's host; so is one the user gave: ltd neither
  // picks nor holds those.
  static bool LtdPicksPort(const JobSpec& spec) {
    return !IsMultiNode(spec.nodes) && spec.nodes.master_port == 0;
  }
  // A pending job's environment and its command line past
  // kSummaryArgvBytes out of memory (its record has them), and back, read
  // from the record, before it starts or is saved again (job_submit.cc).
  void Spill(Job& job);
  absl::Status ReloadSpec(Job& job);
  void Watch(Job& job, const std::function<std::unique_ptr<Supervision>(SupervisionEvents&)>& make);
  void OnChanged(const std::string& id, const Job& now);
  void OnBeats(const std::string& id, const std::vector<RankBeat>& beats);
  void OnOutput(const std::string& id, int rank, Stream stream, std::string_view line);
  void OnOutputResumed(const std::string& id, bool missed);
  // Tells the job's supervision whether its observers want output.
  void UpdateOutput(const std::string& id);
  void OnSupervisionEnded(const std::string& id, const Job& final_job);
  // The supervisor died; whatever it left is already killed.
  void LoseSupervision(const std::string& id, std::string why);
  // Ends a job ltd holds itself (PENDING, or its supervision gone).
  void Finish(Job& job, RootCause cause, JobState state);
  void Ended(Job& job);
  // Saves the record; a final one that cannot be saved (a full disk) is
  // retried until it is, and says so in the job meanwhile.
  void Persist(Job& job);
  void RetryUnsaved();
  void MaybeFinishShutdown(bool end_jobs);
  // Finished jobs past --keep-jobs or --max-state-bytes go, the user
  // furthest over their share first (finished_jobs.h); state_budget.cc.
  void PruneFinished();
  void PruneFinished(const FinishedJobs::Usage& live);
  // A job ended: kept, with what its dir takes (with --max-state-bytes).
  void CountFinished(const Job& job);
  // A finished job a restart found: kept at once, its dir measured soon
  // after (MeasureRecovered), so that ltd answers before 10,000 dirs are
  // walked.
  void CountRecovered(const Job& job);
  // Measures the next batch of recovered jobs' dirs; again on a timer
  // until none is left, then prunes.
  void MeasureRecovered();
  // What the live jobs' dirs take now, per user (live_bytes.h).
  FinishedJobs::Usage LiveUsage();
  // A job begins to wait (submitted, recovered): its dir counted once.
  void CountWaiting(const Job& job);
  // Whether a submit of `uid`'s fits the state dir's bound: refused only
  // while the dir is full and `uid` is over their share of it.
  absl::Status RoomToSubmit(uid_t uid);
  // A job that ended with ranks that would not die: its slots stay out of
  // use until they are gone (UnkillableGone).
  // `announce`: tell the JobEvents (once per job; not again when a later
  // ltd recovers it).
  void HoldUnkillable(const Job& job, bool announce);
  void UnkillableGone(const std::string& id, const std::vector<int>& slots);
  // Tells every JobEvents that `job` went from `from` to its state now.
  void StateChanged(const Job& job, JobState from);
  // --after, --dependency (job_dependencies.cc): resolves a submit's refs
  // to ids (in `spec`'s lists, singleton's added) and returns those of
  // jobs still to end; waits, queues or cancels jobs as those end.
  absl::StatusOr<std::map<std::string, DependencyKind>> ResolveAfter(JobSpec& spec) const;
  // A PENDING job (new or recovered): waits for its --after jobs, is
  // queued for devices, or is cancelled when one of them failed.
  void WaitOrQueue(Job& job, uint64_t seq);
  // Every task of the array `array_id` (none: no tasks, job nullptr).
  Resolved Whole(std::string_view array_id) const;
  // A job ready to start goes into the scheduler's queue, its array's
  // throttle with it (job_submit.cc).
  void Queue(const Job& job, uint64_t seq);
  // A new job of `spec` with the next id, not yet recorded.
  absl::StatusOr<std::unique_ptr<Job>> MakeJob(const JobSpec& spec, const std::string& user);
  void OnDependencyEnded(const Job& job);
  void ArmFailDependents();
  void FailDependent(const std::string& id, const std::string& dependency);
  // The drain an earlier ltd left in the state dir.
  void RecoverDrain();
  template <typename F>
  void Emit(F&& f) {
    for (JobEvents* e : events_) f(*e);
  }

  Clock& clock_;
  SupervisorHost& supervisors_;
  JobStore& store_;
  PortAllocator& ports_;
  ManagerConfig config_;

  // Job ids in the order they were handed out (IdBefore), so that a
  // listing walks them as they are, and a page starts where the last ended.
  struct IdOrder {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const { return IdBefore(a, b); }
  };
  std::map<std::string, std::unique_ptr<Job>, IdOrder> jobs_;  // every job ever, by id
  std::map<std::string, std::unique_ptr<Supervised>, std::less<>> supervised_;  // placed ones
  std::map<std::string, std::map<ObserverId, std::shared_ptr<JobObserver>>, std::less<>> observers_;
  // Supervisions of ended jobs, destroyed on the next turn of the loop.
  std::vector<std::unique_ptr<Supervision>> graveyard_;
  std::vector<std::unique_ptr<Link>> graveyard_links_;
  Clock::TimerId bury_timer_ = 0;
  FinishedJobs finished_;                // final jobs kept, per user, oldest first
  LiveBytes live_bytes_;                 // live jobs' dirs, per user
  std::vector<std::string> unmeasured_;  // recovered finished jobs, dirs not yet measured
  Clock::TimerId measure_timer_ = 0;
  std::set<std::string> unsaved_;  // final jobs whose record is not on disk
  Clock::TimerId retry_timer_ = 0;
  Millis retry_delay_{0};
  Scheduler scheduler_;
  Dependencies deps_;
  GpuPool* gpus_ = nullptr;
  UnkillableWatch unkillable_;
  // Jobs whose --after job failed (id, dependency), cancelled on the timer.
  std::vector<std::pair<std::string, std::string>> failed_dependents_;
  Clock::TimerId fail_dependents_timer_ = 0;
  std::set<int> ports_in_use_;
  SubmitTokens tokens_;  // a repeated submit gets the job it made
  uint64_t next_id_ = 1;
  ObserverId next_observer_ = 1;
  bool shutting_down_ = false;
  // Within KillEach: Ended leaves placing and pruning to its end.
  bool batch_ending_ = false;
  bool batch_ended_ = false;
  std::optional<std::string> drain_;
  std::optional<WallTime> drain_deadline_;
  std::vector<Clock::TimerId> drain_timers_;  // its --signals and its teardown
  void CancelDrainTimers();
  // The drain's deadline (drain_deadline_): each job's --signal its DUR
  // before, then the running jobs' teardown.
  void ArmDrainDeadline();
  // --signal to job `id`'s ranks now, because `why` (its end is near).
  void SendWarnSignal(const std::string& id, const std::string& why);
  std::vector<Clock::TimerId> shutdown_timers_;  // teardowns after a --signal
  std::function<void()> shutdown_done_;
  std::vector<JobEvents*> events_;
};

}  // namespace ltd
