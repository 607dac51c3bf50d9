// The job manager: every job's life from submit to its final record. It
// decides (place on devices, start ranks, watch heartbeats, pick the root
// cause, tear down, restart, persist); the process layer acts. It runs on
// the loop thread only and knows neither libuv nor gRPC, so its tests drive
// it with a fake launcher and a fake clock.
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
#include "job.h"
#include "job_runtime.h"
#include "job_log.h"
#include "job_store.h"
#include "process.h"
#include "scheduler.h"

namespace ltd {

// Picks a MASTER_PORT that is free on the host and not in `in_use`.
class PortAllocator {
 public:
  virtual ~PortAllocator() = default;
  virtual absl::StatusOr<int> Pick(const std::set<int>& in_use) = 0;
};

// Receives a job's live output and its end. Called on the loop thread.
class JobObserver {
 public:
  virtual ~JobObserver() = default;
  virtual void OnOutput(int rank, Stream stream, std::string_view line) = 0;
  virtual void OnEnded(const Job& job) = 0;
};

// Gathers a hung rank's stack (faulthandler or gdb), off the loop thread.
// `done` runs on the loop with whatever could be had, maybe nothing.
class StackSampler {
 public:
  virtual ~StackSampler() = default;
  // Python ranks are asked for their stacks through faulthandler instead.
  virtual bool IsPython(pid_t pid) = 0;
  // One stack per pid (empty where none could be had; pid 0 is skipped),
  // taken with the privileges of the ranks' user `uid`/`gid`, no more.
  virtual void Sample(const std::vector<pid_t>& pids, uid_t uid, gid_t gid, Millis budget,
                      std::function<void(std::vector<std::string>)> done) = 0;
};

struct ManagerConfig {
  // Device slots, per-user queue limits.
  SchedulerConfig placement;
  // How long stacks of a hung job may take before its teardown starts.
  Millis stack_budget{5000};
  // Finished jobs kept (records and logs); the oldest go first. Without a
  // bound, a server that runs jobs for months grows without end.
  size_t keep_finished = 10000;
  // K=V added to every rank's environment (containment markers).
  std::vector<std::string> extra_rank_env;
  // Output kept per job (head and tail past it), so one job cannot fill
  // the disk of everyone.
  uint64_t job_max_log_bytes = 1ull << 30;
  // --max-restarts above this is refused; restarts wait restart_backoff,
  // doubling with each attempt up to kMaxRestartBackoff, so a job that
  // fails at once cannot spin.
  int max_restarts_limit = 100;
  Millis restart_backoff{1000};
  static constexpr Millis kMaxRestartBackoff{5 * 60 * 1000};
  // Automatic heartbeats (README): the directory of ltd's sitecustomize
  // handed to Python ranks (empty: off for every job), and the hang
  // timeout of a job submitted without --heartbeat-timeout.
  std::string auto_heartbeat_dir;
  Millis auto_heartbeat_timeout{5 * 60 * 1000};
};

class JobManager {
 public:
  JobManager(Clock& clock, ProcessLauncher& launcher, JobStore& store, PortAllocator& ports,
             StackSampler* sampler, ManagerConfig config);
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Loads the records of an earlier ltd; jobs it left running become LOST.
  void Recover();

  // Validates and queues a job; returns its id. A program that cannot run
  // still makes a job, which ends FAILED with reason spawn_failed.
  absl::StatusOr<std::string> Submit(JobSpec spec, std::string user);

  // JOB as `caller` typed it: an id, or a name. A name means the caller's
  // own jobs of that name if there are any (root owns none: it sees
  // everyone's), else everyone's; among those, the only one, else the only
  // one still live, else it is ambiguous.
  static constexpr uid_t kAnyone = 0;
  absl::StatusOr<const Job*> Resolve(std::string_view ref, uid_t caller = kAnyone) const;
  std::vector<const Job*> List(bool all) const;

  // signal 0: tear the job down (cancelled). Else send it to every rank.
  absl::Status Kill(const std::string& id, int signal);

  // Live output and the end of an unfinished job; false if it has ended.
  using ObserverId = JobRuntime::ObserverId;
  std::optional<ObserverId> Observe(const std::string& id, std::shared_ptr<JobObserver> observer);
  void Unobserve(const std::string& id, ObserverId observer);

  // The job's log as it is now (every line so far, none after); read it
  // off the loop with ReadLog.
  LogSnapshot TakeLog(const std::string& id) const;

  // Refuses new jobs, tears every live job down, then calls `done`.
  void Shutdown(std::function<void()> done);

 private:
  Job* FindMutable(const std::string& id);
  void Schedule();
  void Start(Job& job);
  void SpawnRanks(Job& job, JobRuntime& rt);
  void OnOutput(Job& job, int rank, Stream stream, std::string_view data);
  void OnControl(Job& job, int rank, std::string_view data);
  void OnHeartbeat(Job& job, JobRuntime& rt, int rank, const HeartbeatMessage& msg);
  void OnAutoHeartbeat(Job& job, JobRuntime& rt, int rank, const HeartbeatMessage& msg);
  Millis AutoTimeout(const Job& job) const;
  void OnExit(Job& job, int rank, ExitStatus status);
  void ArmWatchdog(Job& job, JobRuntime& rt);
  void OnWatchdog(const std::string& id);
  void ReportHang(Job& job, JobRuntime& rt, std::vector<int> stalled, CauseReason reason);
  void FinishInvestigation(const std::string& id);
  void CaptureStack(JobRuntime& rt, int rank, std::string_view line);
  void StackCaptured(const std::string& id, JobRuntime& rt, int rank);
  void Fail(Job& job, JobRuntime& rt, RootCause cause);
  void Teardown(Job& job, JobRuntime& rt);
  void OnGraceExpired(const std::string& id);
  void OnRanksGone(Job& job, JobRuntime& rt);
  void OnJobEmpty(const std::string& id);
  void Restart(const std::string& id);
  void Finish(Job& job, std::optional<RootCause> cause);
  void SetState(Job& job, JobState state);
  void SetRankState(Job& job, Rank& rank, RankState state);
  // Saves the record; a final one that cannot be saved (a full disk) is
  // retried until it is, and says so in the job meanwhile.
  void Persist(Job& job);
  void RetryUnsaved();
  void MaybeFinishShutdown();
  void PruneFinished();

  Clock& clock_;
  ProcessLauncher& launcher_;
  JobStore& store_;
  PortAllocator& ports_;
  StackSampler* sampler_;
  ManagerConfig config_;

  std::map<std::string, std::unique_ptr<Job>, std::less<>> jobs_;  // every job ever, by id
  std::map<std::string, std::unique_ptr<JobRuntime>, std::less<>> runtimes_;  // live ones
  std::deque<std::string> finished_;  // final jobs, oldest first
  std::set<std::string> unsaved_;     // final jobs whose record is not on disk
  Clock::TimerId retry_timer_ = 0;
  Millis retry_delay_{0};
  Scheduler scheduler_;
  std::set<int> ports_in_use_;
  uint64_t next_id_ = 1;
  ObserverId next_observer_ = 1;
  bool shutting_down_ = false;
  std::function<void()> shutdown_done_;
};

}  // namespace ltd
