// ProcessLauncher on libuv: each rank started in a child that shares our
// memory until its execve (rank_clone.h), or through lt-exec; a pipe each
// for stdout, stderr and the heartbeat fd (3), exits from the rank's pidfd
// (polled on the loop, reaped with waitid). Containment beyond process
// groups is delegated.
//
// A rank's stdout and stderr are read a buffer a loop turn each, and a
// job's together at most kJobOutputBytesPerSecond (read_pacer.h).
#pragma once

#include <uv.h>

#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "containment.h"
#include "control_reader.h"
#include "exec_shim_args.h"
#include "process.h"
#include "rank_clone.h"
#include "read_pacer.h"
#include "user_io.h"

namespace ltd {

class UvLauncher final : public ProcessLauncher {
 public:
  // `exec_shim`: the lt-exec binary, for ranks that cannot start in a
  // child of ours (rank_clone.h) and for gdb as a rank's user; lt-userio
  // is beside it. `lookup`: how a user's groups are found (NSS).
  UvLauncher(uv_loop_t* loop, std::unique_ptr<Containment> containment, std::string exec_shim,
             std::unique_ptr<ControlReader> control, GroupsLookup::Lookup lookup = LoginGroups);
  ~UvLauncher() override;

  // Ranks start through lt-exec from now on, as where they cannot start in
  // a child of ours (rank_clone.h): so tests run both ways.
  void StartRanksThroughExecShim() { rank_children_ = false; }

  std::string_view containment() const override { return containment_->name(); }
  void ExpectUser(uid_t uid, gid_t gid, const std::optional<std::vector<gid_t>>& groups) override;
  absl::Status BeginJob(const std::string& job_id, const JobLimits& limits) override;
  std::optional<uint64_t> OomKills(const std::string& job_id, int rank) override {
    return containment_->OomKills(job_id, rank);
  }
  std::optional<std::chrono::microseconds> TakeCpuUsed(const std::string& job_id) override {
    return containment_->TakeCpuUsed(job_id);
  }
  absl::StatusOr<pid_t> Spawn(const SpawnRequest& request, RankCallbacks callbacks) override;
  void SignalRank(const std::string& job_id, int rank, int sig) override;
  void SignalProcess(const std::string& job_id, int rank, int sig) override;
  std::optional<int> StopSignal(const std::string& job_id, int rank) override;
  std::optional<uint64_t> MainThreadCpu(const std::string& job_id, int rank) override;
  void KillJob(const std::string& job_id) override;
  std::optional<StuckProcess> Stuck(const std::string& job_id, int rank) override;
  absl::StatusOr<std::string> ReadStackPipe(const std::string& job_id, int rank) override;
  std::string KernelView(const std::string& job_id, int rank) override;
  void Abandon(const std::string& job_id) override;
  std::vector<StuckProcess> Leftovers(const std::string& job_id, size_t max) override;
  void EndJob(const std::string& job_id, std::function<void()> on_empty) override;
  void ReadHeartbeats() override { control_->ReadNow(); }
  UserFiles* user_files() override { return &user_io_; }
  // On libuv's thread pool (uv_queue_work).
  void OffLoop(std::function<void()> work, std::function<void()> after) override;

  // What a job's stdout and stderr, all its ranks', are read at most, over
  // time, by a supervisor of ltd's, whose CPU no job pays for.
  static constexpr double kJobOutputBytesPerSecond = 16 << 20;
  // Another rate from now on; 0: none (ltrun, whose CPU is its user's).
  void set_output_bytes_per_second(double rate) { pacer_.set_bytes_per_second(rate); }

  size_t live_children() const { return children_.size(); }
  const ControlReader& control() const { return *control_; }

 private:
  struct Child;
  struct Pipe;
  static void OnExitReadable(uv_poll_t* poll, int status, int events);
  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  void Deliver(Child& child, int index, std::string_view data);
  // The rank's process while it is not reaped; null once it is.
  Child* Unreaped(const std::string& job_id, int rank) const;
  void DrainAndClose(Child& child);
  // The budget `job_id`'s ranks' output shares while one of them is read.
  std::shared_ptr<ReadPacer::Budget> OutputBudget(const std::string& job_id);

  uv_loop_t* loop_;
  std::unique_ptr<Containment> containment_;
  std::string exec_shim_;
  UserIo user_io_;  // lt-userio, beside exec_shim_
  char read_buf_[64 * 1024];
  ReadPacer pacer_;
  std::map<std::string, std::weak_ptr<ReadPacer::Budget>> budgets_;  // by job

  std::unique_ptr<ControlReader> control_;
  // The groups of the uid:gid ranks run as: the job's, or its user's
  // login groups looked up at each ExpectUser (each attempt), as a login
  // would.
  GroupsLookup groups_;
  bool rank_children_ = kRankChildSupported;
  // Spawned and not yet reaped (or reaped, inside OnExitReadable): the one
  // owner of each rank's handles and pidfd.
  std::unordered_map<Child*, std::unique_ptr<Child>> children_;
  std::unordered_set<pid_t> unreaped_;  // ours to reap, nobody else's
  // Ranks not yet reaped, by job and rank. A reaped rank leaves at once:
  // its pid and process group number may belong to anyone after that.
  std::map<std::string, std::map<int, Child*>> live_;
};

}  // namespace ltd
