// One job's life once it is placed: its attempts, ranks, output, heartbeats,
// watchdog, the investigation of a hang, teardown, restarts, and its record
// and log while it runs. It decides; the process layer acts. One runner per
// job, on the loop thread only; it knows neither libuv nor gRPC, so its
// tests drive it with a fake launcher and a fake clock.
//
// Under ltd a runner lives in the job's own supervisor process (lt-shim);
// ltrun runs one in the foreground.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "clock.h"
#include "hang_report.h"
#include "job.h"
#include "job_runtime.h"
#include "job_store.h"
#include "process.h"
#include "run_fence.h"
#include "supervision.h"

namespace ltd {

struct RunnerConfig {
  // How long stacks of a hung job may take before its teardown starts.
  Millis stack_budget{5000};
  // K=V added to every rank's environment (containment markers).
  std::vector<std::string> extra_rank_env;
  // Output kept per job (head and tail past it), so one job cannot fill
  // the disk of everyone.
  uint64_t job_max_log_bytes = 1ull << 30;
  // Restarts wait restart_backoff, doubling with each attempt up to
  // kMaxRestartBackoff, so a job that fails at once cannot spin.
  Millis restart_backoff{1000};
  static constexpr Millis kMaxRestartBackoff{5 * 60 * 1000};
  // Automatic heartbeats (docs/user-guide.md): the directory of ltd's sitecustomize
  // handed to Python ranks (empty: off for every job), and the hang
  // timeout of a job submitted without --heartbeat-timeout.
  std::string auto_heartbeat_dir;
  Millis auto_heartbeat_timeout{5 * 60 * 1000};
};

class JobRunner final : public RunFenceEvents {
 public:
  // `job` is placed (slots, master port) and PENDING, its dir made.
  JobRunner(Clock& clock, ProcessLauncher& launcher, JobStore& store, StackSampler* sampler,
            RunnerConfig config, Job job, SupervisionEvents& events);
  ~JobRunner() override;
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // The first attempt. Events may end the job before it returns.
  void Start();

  // A multi-node run's fence (before Start; it must outlive the runner):
  // this node's root cause and state go to the other nodes, theirs come
  // back as OnRunCause, and restarts wait for every node.
  void SetFence(RunFence* fence);
  // Under ltd the rendezvous runs after the runner is made: what the nodes
  // agreed (node rank, master address and port) comes before Start.
  void JoinedRun(RunFence* fence, const NodeSpec& agreed, int master_port);
  // The run could not be joined: the job ends before any rank started.
  void FailToJoin(std::string why);
  void OnRunCause(int attempt, RootCause cause) override;
  void OnNodes(std::vector<NodeStatus> nodes) override;
  void OnFenceNotice(std::string line) override;

  // signal 0: tear the job down, cancelled, saying `order.why`. Else send
  // the signal to each rank's main process (or every process of it).
  absl::Status Kill(KillOrder order);
  // Tears the job down because its supervision is gone (reason daemon_lost
  // or supervisor_lost): the job ends LOST.
  void Abandon(CauseReason reason, std::string why);

  const Job& job() const { return job_; }
  bool ended() const { return IsFinal(job_.state); }

 private:
  // The methods take the job and its runtime as the job manager's did; a
  // callback that outlives its attempt finds nothing and returns.
  Job* FindMutable(const std::string& id) { return id == job_.id ? &job_ : nullptr; }
  JobRuntime* Runtime(const std::string& id) { return id == job_.id ? rt_.get() : nullptr; }

  void BeginAttempt(Job& job);
  void SpawnRanks(Job& job, JobRuntime& rt);
  void OnOutput(Job& job, int rank, Stream stream, std::string_view data);
  void OnControl(Job& job, int rank, std::string_view data);
  void OnHeartbeat(Job& job, JobRuntime& rt, int rank, const HeartbeatMessage& msg);
  void OnAutoHeartbeat(Job& job, JobRuntime& rt, int rank, const HeartbeatMessage& msg);
  Millis AutoTimeout(const Job& job) const;
  void OnExit(Job& job, int rank, ExitStatus status);
  // The root cause `status` is when the OOM killer is behind it (its
  // count went up); nullopt otherwise.
  std::optional<RootCause> OomCause(const Job& job, JobRuntime& rt, int rank, ExitStatus status);
  void ArmWatchdog(Job& job, JobRuntime& rt);
  void OnWatchdog(const std::string& id);
  // `deadline`: the (monotonic) heartbeat deadline that passed.
  // `stops`: when each stalled rank stopped beating (none for the
  // job-level automatic verdict), to single out one that clearly stopped first.
  void ReportHang(Job& job, JobRuntime& rt, std::vector<int> stalled,
                  std::vector<std::pair<Millis, int>> stops, CauseReason reason, Millis deadline,
                  Millis noise = kBeatNoise);
  // How long the automatic verdict waits for ranks not watched yet.
  static constexpr Millis kAutoStartupLimit{5 * 60 * 1000};
  Millis AutoStartupLimit(const Job& job) const;
  // Beats of ranks that stopped within this of `rank`'s single out neither.
  Millis BeatNoise(const Job& job, const JobRuntime& rt, int rank) const;
  void FinishInvestigation(const std::string& id);
  void CaptureStack(JobRuntime& rt, int rank, std::string_view line);
  void StackCaptured(const std::string& id, JobRuntime& rt, int rank);
  void Fail(Job& job, JobRuntime& rt, RootCause cause);
  void Teardown(Job& job, JobRuntime& rt);
  void OnGraceExpired(const std::string& id);
  // `grace` after the SIGKILL: ranks still there are recorded as
  // unkillable and the attempt ends without them (no restart).
  void OnKillExpired(const std::string& id);
  // A rank that would not die gets this long after its SIGKILL at least.
  static constexpr Millis kMinKillWait{1000};
  void OnRanksGone(Job& job, JobRuntime& rt);
  void OnJobEmpty(const std::string& id);
  void Restart(const std::string& id);
  // This node's own root cause of the attempt, to the other nodes.
  void Announce(const Job& job, const RootCause& cause);
  // This node's end, in its own list of nodes and to the other nodes.
  void NodeEnded(Job& job);
  void Finish(Job& job, std::optional<RootCause> cause);
  void SetState(Job& job, JobState state);
  void SetRankState(Job& job, Rank& rank, RankState state);
  void Output(int rank, Stream stream, std::string_view line) {
    events_.OnOutput(rank, stream, line);
  }
  // Saves the record and tells the events.
  void Persist(Job& job);

  Clock& clock_;
  ProcessLauncher& launcher_;
  JobStore& store_;
  StackSampler* sampler_;
  RunnerConfig config_;
  SupervisionEvents& events_;
  Job job_;
  std::unique_ptr<JobRuntime> rt_;  // of the current attempt
  RunFence* fence_ = nullptr;
};

}  // namespace ltd
