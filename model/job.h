// The job and rank records: what ltd knows about a job and what it
// persists. Plain data plus the few rules that decide states, root causes
// and exit codes; no libuv, no gRPC, no I/O. Every string that came from a
// user or a rank (argv, env, cwd, name, error text, stacks) holds raw
// bytes, UTF-8 or not; only the edges turn them into text (common/bytes.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "job_array.h"
#include "job_limits.h"
#include "output_pattern.h"
#include "resource_limits.h"
#include "umask.h"
#include "warn_signal.h"

namespace ltd {

using WallTime = std::chrono::system_clock::time_point;

// The end states past kLost are sbatch's, numbered apart so that states
// added after kLost do not move them (the shim protocol casts them).
// kTimeout: past its --time (or ltd's --max-time); kOutOfMemory: the OOM
// killer killed it; kNodeFail: another node of its run was lost.
// kStarting: a node of a multi-node run that holds its devices and waits
// in the rendezvous for its run's other nodes; its ranks start (kRunning)
// once they came. Its --time counts from there, as kRunning's does.
enum class JobState {
  kPending,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  kLost,
  kStarting,
  kTimeout = 16,
  kOutOfMemory = 17,
  kNodeFail = 18,
};

// kExited: exited 0. kFailed: exited non-zero or died of a signal on its own.
// kKilled: ended by a teardown it did not cause.
enum class RankState { kPending, kRunning, kExited, kFailed, kKilled, kLost };

enum class CauseReason {
  kExited,
  kSignaled,
  kHang,
  kStartupTimeout,
  kCancelled,
  kDaemonLost,  // ltd was gone past its restore window
  kSpawnFailed,
  kSupervisorLost,    // the job's supervisor died
  kRemoteFailure,     // another node of the run failed; this one was torn down for it
  kDependencyFailed,  // a job it was to run --after did not succeed
  kTimeLimit,         // it ran for its --time
  kOom,               // the OOM killer killed it (the job's or the host's memory ran out)
};

std::string_view ToString(JobState s);
std::string_view ToString(RankState s);
std::string_view ToString(CauseReason r);

// What watched a job for hangs (docs/user-guide.md, "Automatic heartbeats"): nothing
// yet, heartbeats the ranks send themselves (per-rank deadlines), or ltd's
// automatic ones (the job is hung when no rank progresses). A rank's own
// heartbeats take precedence over the automatic ones.
enum class HeartbeatMode { kNone, kExplicit, kAutomatic };
std::string_view ToString(HeartbeatMode m);
std::optional<HeartbeatMode> ParseHeartbeatMode(std::string_view s);
std::optional<JobState> ParseJobState(std::string_view s);
std::optional<RankState> ParseRankState(std::string_view s);
std::optional<CauseReason> ParseCauseReason(std::string_view s);
bool IsFinal(JobState s);

// The first failure of a job; every other rank's end is a consequence of it.
struct RootCause {
  int rank = -1;  // -1: not a rank's doing (cancelled, daemon_lost)
  // The node rank where it happened; -1: this node (or a single-node job).
  // A cause of another node is a remote one (kRemoteFailure): `exit_code`
  // is then the code that node's job ends with, which this node's ends
  // with too. `rank`, like Rank::rank, is the local rank on its node
  // (LOCAL_RANK); its global RANK is node * devices + rank.
  int node = -1;
  CauseReason reason = CauseReason::kExited;
  int exit_code = 0;  // the rank's own exit status, when it exited
  int signal = 0;     // the signal that killed it, when it was killed
  WallTime at{};
  std::string message;
  // A hang or startup timeout: the heartbeat deadline that passed (ltd's
  // deadline-to-verdict metric is `at` minus this). Absent otherwise, and
  // in records of releases that did not write it.
  std::optional<WallTime> deadline_at;
  // A cancellation: who asked for it ("alice", "root", "ltd (shutdown)");
  // empty when nobody did (an interrupted ltrun) or for a record of a
  // release that did not write it.
  std::string cancelled_by;
  // A remote failure (kRemoteFailure): the other node's own reason, which
  // decides this node's end state; absent in a record of a release that
  // did not write it.
  std::optional<CauseReason> remote_reason;
};

// The state a job ends in for `cause`, as sbatch names ends: TIMEOUT (its
// time limit), OUT_OF_MEMORY, CANCELLED (a kill, a failed dependency),
// LOST (its supervision gone), NODE_FAIL (another node of its run lost),
// FAILED otherwise. A remote failure ends as the other node's reason says.
JobState EndStateFor(const RootCause& cause);

// docs/protocol.md's exit codes: the root cause's code, 128+N for signal N, 124 for a
// hang or a time limit, 130 for a cancellation, 127/126 for a program that cannot run (as a
// shell says), 1 for ltd's own failure.
int ExitCodeFor(const RootCause& cause);

// Job ids are decimal numbers handed out in order: whether `a` came
// before `b` (a shorter id is a smaller number).
inline bool IdBefore(std::string_view a, std::string_view b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

// What became of a rank's stack in a hang investigation. kUnknown: a
// record of a release that did not say.
enum class StackStatus {
  kUnknown,
  kTaken,     // in `stack`: a tool's, faulthandler's or the automatic heartbeats'
  kSkipped,   // not tried (see stack_note: not running, stopped, no tool, no budget)
  kTimedOut,  // not had within the stack budget
  kFailed,    // tried, and no frames came (see stack_note)
};
std::string_view ToString(StackStatus s);
std::optional<StackStatus> ParseStackStatus(std::string_view s);

struct HangReportRank {
  int rank = 0;  // its local rank (LOCAL_RANK) on `node`
  // The node of a multi-node run it runs on, in the run's hang report
  // (every node's ranks, run_hang.h); -1: this node's own report, or a
  // record of a release that did not say.
  int node = -1;
  int64_t last_step = -1;
  std::optional<WallTime> last_heartbeat_at;
  bool stalled = false;        // its deadline passed first
  bool straggler = false;      // its step lags the others'
  bool in_collective = false;  // its stack waits in a collective
  std::string process_state;   // "stopped (SIGSTOP)" when not simply running
  std::string stack;           // where it was, when it could be had
  StackStatus stack_status = StackStatus::kUnknown;
  std::string stack_note;  // how it was taken ("eu-stack"), or why it was not
};

// A node of a multi-node run whose ranks the run's hang report lacks, and
// why: "no report within 6s", "gone: its etcd lease expired".
struct MissingNode {
  int node = 0;
  std::string why;
};

// A multi-node run's report (its ranks carry `node`) is the whole run's:
// every node's ranks, and stalled_ranks and straggler_ranks are global
// RANKs (node * devices + rank). A single node's names its local ranks.
struct HangReport {
  WallTime at{};
  std::vector<int> stalled_ranks;
  std::vector<int> straggler_ranks;
  std::vector<HangReportRank> ranks;
  std::vector<MissingNode> missing_nodes;  // a run's nodes that told nothing of theirs
};
// Whether `report` is a multi-node run's, with every node's ranks.
bool IsRunWide(const HangReport& report);

struct Rank {
  int rank = 0;
  pid_t pid = 0;
  RankState state = RankState::kPending;
  std::optional<int> exit_code;
  std::optional<int> signal;
  int64_t last_step = -1;
  std::optional<WallTime> last_heartbeat_at;
  std::optional<WallTime> started_at;
  std::string error_message;  // from an `error TEXT` line or the error file
  double steps_per_second = 0;
  bool straggler = false;
};

// What a rank's heartbeats set in its record: all a supervisor in another
// process sends ltd of a rank while the job only makes progress.
struct RankBeat {
  int rank = 0;
  int64_t last_step = -1;
  std::optional<WallTime> last_heartbeat_at;
  double steps_per_second = 0;
  bool operator==(const RankBeat&) const = default;
};
RankBeat BeatOf(const Rank& rank);

// One GPU of a running job as NVML last saw it (sampled at a low rate).
struct GpuSample {
  std::string gpu;  // its index, as in --gpus
  uint64_t used_mib = 0;
  uint64_t total_mib = 0;
  std::optional<unsigned> utilization;  // percent
  WallTime at{};
};

// One start of the job's ranks; a job with --max-restarts has several.
struct Attempt {
  int restart_count = 0;
  int master_port = 0;
  WallTime started_at{};
  std::optional<WallTime> ended_at;
  std::optional<RootCause> root_cause;
  // The CPU time its processes used (their cgroup's count, from each
  // rank's joining it to the attempt's end); nullopt where not counted.
  std::optional<std::chrono::microseconds> cpu;
};

// Where a job's ranks sit among the nodes of a multi-node run (torchrun's
// flags): `devices` ranks on each of `nnodes` nodes, this one `node_rank`.
// The default is a single-node job. A rendezvous fills in what it agrees
// (node_rank, master_addr, master_port) before the ranks start; the port
// the ranks use is Job::master_port either way.
struct NodeSpec {
  int nnodes = 1;
  // -1: given by the rendezvous (join order); a static launch means 0.
  int node_rank = -1;
  std::string master_addr;  // empty: 127.0.0.1, or the rendezvous'
  int master_port = 0;      // 0: ltd picks one (single node) or the rendezvous agrees one
  std::string run_id;       // empty: the job id
  std::string rdzv;         // "" static, or "etcd://HOST:PORT"
  std::chrono::milliseconds rdzv_timeout{10 * 60 * 1000};
  // The etcd lease of each node (--rdzv-lease): a node that dies is known
  // gone this long after, and a node whose supervisor cannot reach etcd
  // for this long counts as gone. Whole seconds (etcd's).
  std::chrono::milliseconds rdzv_lease{5000};
  // --rdzv-auth: "munge" (the records in etcd are MUNGE credentials of
  // their writers) or "none"; "" until ltrun or ltd settles it, before
  // the rendezvous. --munge-socket: munged's socket ("": Debian's).
  std::string rdzv_auth;
  std::string munge_socket;
  // etcd's TLS (etcds://) and authentication (rdzv/etcd_security.h):
  // files the node's supervisor reads. Under ltd, ltd's own options (a
  // submit cannot name them: they are read as root); under ltrun, its user's.
  std::string etcd_ca, etcd_cert, etcd_key, etcd_auth_file;
};

// The node rank a job's ranks run as: a static launch's own, 0 for a
// single-node one, -1 while a rendezvous has yet to give it.
int NodeRankOf(const NodeSpec& nodes);
bool IsMultiNode(const NodeSpec& nodes);

// A task of an array job (`--array`): a job of its own (record, log, exit
// code) that shares the array's id, its first task's job id. The task ids
// (job_array.h) and the count are the submit's; a record's are bounds-checked.
struct ArrayTask {
  std::string job_id;  // the array's id; "": the job is no array task
  uint32_t task = 0;
  uint32_t count = 0;     // the array's tasks
  uint32_t throttle = 0;  // %N: at most N of them running at once; 0: no limit
  bool operator==(const ArrayTask&) const = default;
};
// `task` as a record (hostile bytes) gave it, when it holds: an id of
// digits, task and count within job_array.h's bounds, the throttle no more
// than the count; else none (the job reads as no array task).
ArrayTask CheckedArrayTask(ArrayTask task);

struct Job;
// "12_3" for a task, the id for any other job: what ps shows.
std::string DisplayId(const Job& job);

struct JobSpec {
  int devices = 1;  // ranks on this node (torchrun's --nproc-per-node)
  std::string name;
  std::vector<std::string> argv;
  std::string cwd;
  std::vector<std::string> env;  // K=V, client's environment plus --env
  uid_t uid = 0;
  gid_t gid = 0;
  // The supplementary groups the ranks get: the submitting process's own
  // (SO_PEERGROUPS), as ranks started from the user's shell would have.
  // None in a record of an earlier release: looked up (NSS) at each start.
  std::optional<std::vector<gid_t>> groups;
  std::chrono::milliseconds heartbeat_timeout{0};  // 0: off
  std::chrono::milliseconds startup_timeout{0};    // 0: off
  std::chrono::milliseconds grace{10000};
  // --time: the job is torn down when it has run this long, from its first
  // start, restarts included. 0: no limit.
  std::chrono::milliseconds time_limit{0};
  // --hold-on-hang: after a hang report, the ranks are left as they are
  // this long for a look (`ltctl stack`, gdb) before the teardown. 0: none.
  std::chrono::milliseconds hold_on_hang{0};
  // --signal SIG@DUR: SIG to each rank's main process DUR before the job's
  // end is forced (--time, a drain's deadline, `ltctl shutdown`).
  WarnSignal warn_signal;
  int max_restarts = 0;
  bool auto_heartbeat = true;  // false: --no-auto-heartbeat
  NodeSpec nodes;
  // --after and --dependency afterok: jobs that must succeed before this
  // one starts; afterany: that must end; afternotok: that must end without
  // success (model/dependency.h). Submit takes what the client typed (ids
  // or names) and keeps the ids they resolve to; `singleton` adds, at
  // submit, the user's unfinished jobs of the same name to after_any.
  std::vector<std::string> after;
  std::vector<std::string> after_any, after_notok;
  bool singleton = false;
  // The ranks' resource limits (resource_limits.h); empty: the
  // supervisor's own, as a record of an earlier release had it.
  std::vector<ResourceLimit> rlimits;
  // --output / --error patterns (output_pattern.h), absolute; "": none.
  std::string output, error;
  // The meaning of their fields: kSbatchPatterns, or kLegacyPatterns for a
  // job submitted by a release before (its %n is the name).
  int output_patterns = kSbatchPatterns;
  // The submitting client's umask: the files made for the job as its user
  // (output, error) get it. kDefaultJobUmask for a client or record that
  // does not say.
  mode_t umask = kDefaultJobUmask;
  // --mem, --mem-per-rank, --cpus: the job's cgroup limits; none: unlimited.
  JobLimits limits;
  // The client's token for the submit that made the job (at most
  // kMaxSubmitTokenBytes; "": none): a repeat of it gets this job
  // (daemon/jobs/submit_tokens.h).
  std::string submit_token;
  // What ps and show print as its command instead of argv ("": argv).
  std::string label;
  // --array: this job is one task of an array (job_array.h).
  ArrayTask array;
  // At submit only, never saved: the task ids --array asked for (empty: a
  // job of its own); Submit makes one job of each.
  std::vector<uint32_t> array_tasks;
};
inline constexpr size_t kMaxSubmitTokenBytes = 64;
inline constexpr size_t kMaxLabelBytes = 256;

// What a job may ask for here: ltd's slots and restart limit.
struct SpecLimits {
  int slots = 1;
  int max_restarts = 100;
  std::chrono::milliseconds max_time{0};  // the longest --time; 0: any
  // Why a job's memory or CPU limit cannot be set here; empty: it can.
  std::string no_memory_limit;
  std::string no_cpu_limit;
  int cpus = 0;  // the host's CPUs, the most --cpus may ask for; 0: unchecked
};
// OK, or one line saying what is wrong with the job asked for and what to do.
absl::Status ValidateSpec(const JobSpec& spec, const SpecLimits& limits);
// ValidateSpec's bound on the count of argv and environment strings
// together, for a request to be refused before any of them is looked at.
absl::Status CheckStringCount(size_t argv, size_t env);

// One node of a multi-node run as the rendezvous sees it.
struct NodeStatus {
  int node_rank = 0;
  std::string host;
  std::string state;  // JobState words: "RUNNING", "FAILED", ...
  std::optional<RootCause> root_cause;
};

// What only the job table (ltd) keeps of a job: never saved, never sent.
struct TableFields {
  // While it runs, each of its GPUs' last sample.
  std::vector<GpuSample> gpu_usage;
  // Bytes of the command line a finished job's summary, or a pending
  // job's table entry, left out (the record on disk has them).
  uint64_t argv_cut = 0;
  // Text of its attempts, ranks or hang report the summary cut (the
  // record on disk has it): `show` reads the record.
  bool details_cut = false;
  // A pending job's environment, and its command line past what a summary
  // keeps, wait in its record on disk, not here (up to 2 MB each, times
  // every pending job of every user).
  bool spec_on_disk = false;
};
// A rank's process still there `--grace` after its SIGKILL (in the
// kernel's uninterruptible sleep: a driver, NFS; or frozen): the job ended
// without it, and its devices are not given to another job until it is
// gone (ltd watches it, daemon/jobs/unkillable_watch.h).
struct UnkillableProcess {
  int rank = 0;  // the rank it is, or descends from; -1 when that is not known
  pid_t pid = 0;
  // A process the rank started (or theirs), not the rank itself: either
  // holds the job's devices the same.
  bool descendant = false;
  uint64_t start_time = 0;  // with the pid, this process for good (/proc/PID/stat)
  std::string state;        // /proc/PID/stat's letter: "D", ...
  std::string wchan;        // where it sleeps in the kernel, when readable
  std::string stack;        // its kernel stack, when readable (root)
  WallTime found_at{};
  std::optional<WallTime> gone_at;  // once ltd saw it go
};
// "rank 1 pid 4242 in D state (wchan nfs_wait_bit_killable)"; a
// descendant: "pid 4243 (of rank 1) in D state ..."
std::string Describe(const UnkillableProcess& p);
// The function a kernel stack (/proc/PID/stack) is in now: its top
// frame's, without address and offset ("request_wait_answer"); "" when none.
std::string KernelTopFrame(std::string_view stack);

// A file of errors/ whose copy onto the disk was cut: its first `kept`
// bytes of `size` (a file with holes, or one past what was left of the
// tmpfs's size).
struct CutFile {
  std::string name;  // as the rank named it: bytes
  uint64_t kept = 0;
  uint64_t size = 0;
  bool operator==(const CutFile&) const = default;
};

// errors/, the dir of TORCHELASTIC_ERROR_FILE, and its bound: a part of the
// job's --job-max-log-bytes (store/error_dir.h).
struct ErrorsDir {
  uint64_t max_bytes = 0;  // its bound; 0: none (no tmpfs could be mounted)
  uint64_t max_files = 0;
  // At the job's end: what its ranks left there, and whether they filled
  // it (a write past it failed then).
  uint64_t bytes = 0;
  uint64_t files = 0;
  bool full = false;
  // The copies onto the disk hold no more in all than the tmpfs's size:
  // what was cut (at most kMaxCutListed files named; `cut_files` counts all).
  std::vector<CutFile> cut;
  uint64_t cut_files = 0;
  static constexpr size_t kMaxCutListed = 16;
  bool operator==(const ErrorsDir&) const = default;
};

struct Job {
  std::string id;
  JobSpec spec;
  std::string user;
  JobState state = JobState::kPending;
  std::optional<int> exit_code;
  std::vector<int> device_slots;  // indices into ltd's slots
  std::string cuda_visible_devices;
  // Set by ltd at placement on a host whose slots are GPUs: whether the
  // job's processes may open only its GPUs (gpu_minors, their
  // /dev/nvidiaN), and in words how or why not ("not isolated: ...").
  bool isolate_gpus = false;
  std::vector<uint32_t> gpu_minors;
  std::string gpu_isolation;
  int master_port = 0;
  int restart_count = 0;
  std::string containment;  // "cgroup", "subreaper" or "process-group"
  WallTime submitted_at{};
  std::optional<WallTime> started_at;
  std::optional<WallTime> ended_at;
  std::optional<WallTime> teardown_at;  // when the last teardown began
  // While a hung job is held for a look (--hold-on-hang): when the hold ends.
  std::optional<WallTime> held_until;
  // --signal: when it was last sent, and why ("--time ends in 3s").
  std::optional<WallTime> warn_signal_sent_at;
  std::string warn_signal_why;
  std::optional<RootCause> root_cause;
  std::optional<HangReport> hang_report;
  HeartbeatMode heartbeat_mode = HeartbeatMode::kNone;
  std::chrono::milliseconds hang_timeout{0};  // in force for heartbeat_mode; 0: none
  std::vector<Rank> ranks;
  std::vector<Attempt> attempts;
  // Every node of a multi-node run, from the rendezvous (empty for a
  // single-node job and a static launch, which knows only itself).
  std::vector<NodeStatus> nodes;
  // Records of the run in etcd that did not hold (another user's, forged,
  // expired) and were ignored, and the last of them in one line.
  int64_t rdzv_refused = 0;
  std::string rdzv_refused_last;
  // Ranks that did not die of SIGKILL; the job ended without them.
  std::vector<UnkillableProcess> unkillable;
  ErrorsDir errors;
  // Why the record on disk is behind this one (a full disk, say); empty
  // once it is saved. Not part of the record: its supervisor says it beside
  // the record (shim.proto's not_saved), and ltd saves what it could not.
  std::string record_error;
  // What ltd keeps beside the record. A record from the job's supervisor
  // replaces everything above and leaves this (ApplyRecord).
  TableFields table;
};

// What a finished job, its record saved, keeps in memory: the command line
// cut to `max_argv` bytes (at least its program's first bytes), no
// environment or groups (nor has its final record), and each attempt's
// cause, rank's error, node's cause and hang report's stack cut to
// kSummaryTextBytes
// (the job's own root cause stays whole: at most a few KiB). 150 finished
// jobs of ~1.9 MB command lines held 350 MB; a job of 100 restarts each
// with a 4 KiB cause, 400 KiB.
inline constexpr size_t kSummaryTextBytes = 256;
void CutToSummary(Job& job, size_t max_argv);
// `job`'s command line cut to `max_argv` bytes, as CutToSummary cuts it;
// table.argv_cut counts the rest.
void CutArgv(Job& job, size_t max_argv);

// `sent`, a record from the job's supervisor, becomes `job`'s record; what
// ltd keeps beside it (`table`) stays, and so does the command line, which
// a record past the first of a watch leaves out (a job's argv is never
// empty).
void ApplyRecord(Job& job, Job sent);

// Sets each beat's fields in `job`'s rank of that number; a beat of a rank
// the job does not have is ignored.
void ApplyBeats(Job& job, const std::vector<RankBeat>& beats);

std::string FormatTime(WallTime t);  // RFC 3339, UTC, milliseconds
std::optional<WallTime> ParseTime(std::string_view s);

// The record format of the state dir. Bytes fields are BytesToJson's: a
// JSON string when valid UTF-8, else {"base64": ...}; so a record always
// dumps and reads back byte for byte.
nlohmann::json ToJson(const Job& job);
// The record as a report for people and their tools (ltrun --report): its
// enum values spelled as `ltctl show --json` spells them (heartbeat_mode
// "AUTOMATIC"; the record keeps "automatic", which releases before read).
nlohmann::json ToReportJson(const Job& job);
// Tolerates missing fields; fails only on a record that is not a job.
std::optional<Job> JobFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const RootCause& cause);

}  // namespace ltd
