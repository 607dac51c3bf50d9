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
  // errors/ (TORCHELASTIC_ERROR_FILE's dir) as a tmpfs of its part of
  // job_max_log_bytes (store/error_dir.h): needs root; lt-shim's.
  bool bound_errors_dir = false;
  // Restarts wait restart_backoff, doubling with each attempt up to
  // kMaxRestartBackoff, so a job that fails at once cannot spin.
  Millis restart_backoff{1000};
  static constexpr Millis kMaxRestartBackoff{5 * 60 * 1000};
  // Automatic heartbeats (docs/user-guide.md): the directory of ltd's sitecustomize
  // handed to Python ranks (empty: off for every job), and the hang
  // timeout of a job submitted without --heartbeat-timeout.
  std::string auto_heartbeat_dir;
  Millis auto_heartbeat_timeout{5 * 60 * 1000};
  // Under ltd, whose `ltctl stack` reaches this runner: a hold's hint
  // names it; ltrun's names gdb and eu-stack.
  bool ltctl_stack = false;
};

class JobRunner final : public RunFenceEvents {
 public:
  // How long the failure of a rank that lost its peer waits for that
  // peer's own to become the cause (OnExit).
  static constexpr Millis kConsequenceWait{3000};

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
  // Under ltd the rendezvous runs after the runner is made, the job's
  // devices held: it is STARTING meanwhile, and its --time counts from
  // here (a node that waits for its run's other nodes ends at its time as
  // a running one does). What the nodes agreed (node rank, master address
  // and port) comes before Start.
  void BeginRendezvous();
  void JoinedRun(RunFence* fence, const NodeSpec& agreed, int master_port);
  // The run could not be joined: the job ends before any rank started.
  void FailToJoin(std::string why);
  void OnRunCause(int attempt, RootCause cause) override;
  void OnRunVerdict(int attempt, NodeReport verdict, std::string note,
                    std::vector<NodeReport> reports) override;
  void OnNodes(std::vector<NodeStatus> nodes) override;
  void OnFenceNotice(std::string line) override;
  void OnRefusedRecords(int64_t total, std::string last) override;

  // signal 0: tear the job down, cancelled, saying `order.why`. Else send
  // the signal to each rank's main process (or every process of it).
  absl::Status Kill(KillOrder order);
  // Tears the job down because its supervision is gone (reason daemon_lost
  // or supervisor_lost): the job ends LOST.
  void Abandon(CauseReason reason, std::string why);

  // `ltctl stack`: the ranks' stacks now, within `budget` (live_stacks.cc).
  void Stacks(std::optional<int> rank, Millis budget, Supervision::StacksDone done);

  const Job& job() const { return job_; }
  bool ended() const { return IsFinal(job_.state); }

 private:
  // Every method works on job_ and the current attempt_. A callback holds
  // its attempt weakly and runs only while that attempt is the current
  // one: `Current(a)`.
  bool Current(const std::weak_ptr<LiveAttempt>& a) const {
    return attempt_ != nullptr && a.lock() == attempt_;
  }
  LiveAttempt& At() { return *attempt_; }
  // The one way the attempt's phase changes; logged.
  void Enter(Phase phase);

  // errors/ becomes the job's user's (bounded where config says), once.
  void OpenErrorDir();
  // The rank log's part of job_max_log_bytes: errors/ has the rest.
  uint64_t LogBudget() const;
  // Opens the job's --output/--error files (off the loop), then
  // StartAttempt: the ranks.
  void BeginAttempt();
  // `files`: what opening them gave (nullopt: the job has none).
  void StartAttempt(std::optional<absl::StatusOr<OutputFiles>> files);
  void SpawnRanks();
  void OnOutput(int rank, Stream stream, std::string_view data);
  void OnControl(int rank, std::string_view data);
  void OnHeartbeat(int rank, const HeartbeatMessage& msg);
  void OnAutoHeartbeat(int rank, const HeartbeatMessage& msg);
  Millis AutoTimeout() const;
  void OnExit(int rank, ExitStatus status);
  // What a rank's failed exit says: its reason and message.
  RootCause ExitCause(int rank, ExitStatus status);
  // The cause says the rank failed because a peer went away (its error
  // line in gloo's, NCCL's or torch.distributed's words; on a multi-node
  // run its stderr too): weaker evidence than that peer's own failure,
  // which may still be on its way. (A collective that timed out waits for
  // a peer that is alive: nothing comes.)
  static bool LostItsPeer(const RootCause& cause, const std::string& peer_loss);
  // The held cause (LiveAttempt::held_cause) becomes the attempt's.
  void FailHeld();
  // The root cause `status` is when the OOM killer is behind it (its
  // count went up); nullopt otherwise.
  std::optional<RootCause> OomCause(int rank, ExitStatus status);
  void ArmWatchdog();
  void OnWatchdog();
  // Automatic heartbeats, the kernel's side (busy_ranks.cc): while no rank
  // reported progress, every so often the CPU time of each watched rank's
  // main thread is read; one that ran (and does not wait in a collective)
  // is busy, which is progress however little CPU it got.
  Millis CpuProbePeriod() const;
  void ArmCpuProbe();
  void ProbeCpu();
  // `deadline`: the (monotonic) heartbeat deadline that passed.
  // `stops`: when each stalled rank stopped beating (none for the
  // job-level automatic verdict), to single out one that clearly stopped first.
  // `remote`: a hang found on another node of the run (OnRunCause), not
  // here: this node's stacks say whether one of its ranks is what the run
  // waits for, and the investigation says so in its words.
  void ReportHang(std::vector<int> stalled, std::vector<std::pair<Millis, int>> stops,
                  CauseReason reason, Millis deadline, Millis noise = kBeatNoise,
                  std::string remote = "");
  // How long the automatic verdict waits for ranks not watched yet.
  static constexpr Millis kAutoStartupLimit{5 * 60 * 1000};
  Millis AutoStartupLimit() const;
  // Beats of ranks that stopped within this of `rank`'s single out neither.
  Millis BeatNoise(int rank) const;
  // The report complete (or the budget gone): the teardown, or a hold when
  // `may_hold` and the job asked for one.
  void FinishInvestigation(bool may_hold = true);
  // --hold-on-hang: the hung ranks are left as they are for a look.
  void Hold();
  void CaptureStack(int rank, std::string_view line);
  void StackCaptured(int rank);
  // One answer the investigation waited for came (or will never come).
  void StackAnswered();
  void Fail(RootCause cause);
  // SIGTERM to every rank, SIGKILL after the grace; an investigation ends
  // first with what it has.
  void Teardown();
  // The teardown itself, from kRunning, kInvestigating or kHeld.
  void SignalTeardown();
  void OnGraceExpired();
  // `grace` after the SIGKILL: ranks still there are recorded as
  // unkillable and the attempt ends without them (no restart).
  void OnKillExpired();
  // A rank that would not die gets this long after its SIGKILL at least.
  static constexpr Millis kMinKillWait{1000};
  // The ranks are gone but processes of theirs are not, as long after the
  // SIGKILL as a rank would get: they are recorded as unkillable, as ranks
  // are, and the attempt ends without them (no restart).
  void OnLeftoversStuck();
  // How many of them a record lists at most.
  static constexpr size_t kMaxUnkillableListed = 32;
  void OnRanksGone();
  void OnJobEmpty();
  void Restart();
  // --time ran out.
  void OnTimeLimit();
  // The --time (and --signal's warning) timers, from now; once.
  void ArmTimeLimit();
  // This node's own root cause of the attempt, to the other nodes, with
  // the kind of evidence it is (run_verdict.h); `pending`: a hang whose
  // stacks are still being taken (announced again once they are in).
  void Announce(const RootCause& cause, bool pending = false);
  // The run's root cause as this node records it: its own cause, or
  // another node's (remote_failure).
  RootCause RemoteCause(const RootCause& remote) const;
  // The attempt's record is final: with the run's verdict where the run
  // has one, else once it comes (or its window passed).
  void FinishRun(std::optional<RootCause> cause);
  // A hang's verdict came: the record's hang report becomes the run's,
  // every node's ranks (run_hang.h), once.
  void RecordRunHang();
  // This node's end, in its own list of nodes and to the other nodes.
  void NodeEnded();
  void Finish(std::optional<RootCause> cause);
  void SetState(JobState state);
  void SetRankState(Rank& rank, RankState state);
  void Output(int rank, Stream stream, std::string_view line) {
    events_.OnOutput(rank, stream, line);
  }
  // Saves the record and tells the events.
  void Persist();
  // ltd's words for the job's users ("ltd: " + `text`) that its log keeps
  // too, where they happened: `logs` shows them between the ranks' lines,
  // and an attach hears them once.
  void LogNotice(std::string_view text);

  Clock& clock_;
  ProcessLauncher& launcher_;
  JobStore& store_;
  StackSampler* sampler_;
  RunnerConfig config_;
  SupervisionEvents& events_;
  Job job_;
  // The errors/ tmpfs this runner mounted, held until the job's end.
  ErrorDirMount errors_mount_;
  std::shared_ptr<LiveAttempt> attempt_;  // the current one; null before the first
  // Answers from off the loop find the runner through this (gone: dropped).
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  // The files being opened for the next attempt: only the latest answer counts.
  uint64_t opening_ = 0;
  RunFence* fence_ = nullptr;
  Clock::TimerId time_limit_timer_ = 0;
  bool time_limit_armed_ = false;
  Clock::TimerId warn_timer_ = 0;  // --signal before --time ends
  // --signal's SIG to every rank now, because `why`; the record says when.
  void SendWarnSignal(const std::string& why);
  void WarnSent(int signal, const std::string& why);
  // --time ran out: whatever ends the attempt now, nothing restarts.
  bool time_up_ = false;
  // `ltctl stack` calls in progress (live_stacks.cc); a few at most.
  struct StackCall;
  std::vector<std::shared_ptr<StackCall>> stack_calls_;
  static constexpr size_t kMaxStackCalls = 2;
  void PollStacks(const std::shared_ptr<StackCall>& call);
  void FinishStacks(const std::shared_ptr<StackCall>& call);
  // Answers the calls in progress (the runner goes away).
  void CancelStacks();
  int StackSignalOf(int rank);
};

}  // namespace ltd
