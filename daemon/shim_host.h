// ltd's side of per-job supervisors: starts an lt-shim for each job it
// places, watches it over the supervisor API (proto/shim.proto), adopts the
// supervisors an earlier ltd left, and when one dies, kills what it left
// and says the job is lost. Loop thread, except Probe (start-up).
//
// One supervisor is started ahead of need: the spare, at idle priority,
// waits on a pipe for the job it will supervise. A supervisor's start is
// mostly the kernel and the loader mapping and relocating a large program
// (some 15 ms of CPU on a VM); the spare has done it on time nothing else
// wanted, so a job's start takes only what is the job's own.
#pragma once

#include <grpcpp/grpcpp.h>
#include <uv.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "containment_factory.h"
#include "fd.h"
#include "job_store.h"
#include "loop.h"
#include "supervision.h"
#include "uv_handle.h"

namespace ltd {

struct ShimConfig {
  std::string shim_binary;  // lt-shim
  std::string exec_binary;  // lt-exec
  std::string containment;  // the mode every supervisor uses
  std::string log_level = "info";
  std::chrono::milliseconds restore_window{10 * 60 * 1000};
  std::chrono::milliseconds stack_budget{5000};
  std::chrono::milliseconds restart_backoff{1000};
  uint64_t job_max_log_bytes = 1ull << 30;
  std::string auto_heartbeat_dir;  // empty: no automatic heartbeats
  std::chrono::milliseconds auto_heartbeat_timeout{5 * 60 * 1000};
};

class ShimSupervisorHost final : public SupervisorHost {
 public:
  // `plan`: ltd's containment plan, to find what a dead supervisor left.
  ShimSupervisorHost(Loop& loop, const JobStore& store, ContainmentPlan plan, ShimConfig config);
  ~ShimSupervisorHost() override;
  ShimSupervisorHost(const ShimSupervisorHost&) = delete;
  ShimSupervisorHost& operator=(const ShimSupervisorHost&) = delete;

  std::string_view containment() const override { return config_.containment; }
  std::unique_ptr<Supervision> Start(const Job& job, SupervisionEvents& events) override;

  // A supervisor an earlier ltd started, found alive and answering for its
  // job on this state dir.
  struct Found {
    pid_t pid = 0;
    Fd pidfd;
    std::string release;
    std::shared_ptr<grpc::Channel> channel;
  };
  // Asks the supervisors of `job_ids` who they are, all at once, each
  // within `timeout`. Blocks (ltd's start-up, before its loop runs).
  std::map<std::string, Found> Probe(const std::vector<std::string>& job_ids,
                                     std::chrono::milliseconds timeout);
  std::unique_ptr<Supervision> Adopt(const Job& job, Found found, SupervisionEvents& events);

  // Keeps a spare supervisor ready from the loop's next turn on (and a new
  // one soon after a job takes it). Killed with this host, and gone by
  // itself once ltd is.
  void KeepSpare() { PrepareSpare(std::chrono::milliseconds(0)); }

  // Shared by a supervision and its gRPC callbacks; see shim_host.cc.
  struct Core;

 private:
  std::unique_ptr<Supervision> Watch(const std::string& job_id, pid_t pid, Fd pidfd,
                                     std::shared_ptr<grpc::Channel> channel,
                                     SupervisionEvents& events);
  friend struct Core;
  void Forget(Core* core);

  // An lt-shim this ltd started: fd 3 of it is the other end of `channel`.
  struct Spawned {
    pid_t pid = 0;
    Fd pidfd;
    Fd channel;
  };
  // For `job_id`, or a spare (empty id) that reads its job id from the
  // other end of `*assign`.
  absl::StatusOr<Spawned> Spawn(const std::string& job_id, Fd* assign);
  struct Spare {
    Spawned process;
    Fd assign;                   // the pipe its job id comes down
    UvPtr<uv_poll_t> exit_poll;  // should it die while it waits
  };
  // The spare, given `job_id` and normal priority; nullopt when there is
  // none or it cannot take the job.
  std::optional<Spawned> TakeSpare(const std::string& job_id);
  // A new spare `delay` from now (0: the loop's next turn), unless there
  // is one or one is due.
  void PrepareSpare(std::chrono::milliseconds delay);
  void StartSpare();
  void OnSpareExit();
  void KillSpare();

  Loop& loop_;
  const JobStore& store_;
  const ContainmentPlan plan_;
  const ShimConfig config_;
  std::string canonical_state_dir_;
  // Every supervisor not yet reaped, ended jobs' too (they exit just after).
  std::set<std::shared_ptr<Core>> cores_;
  std::unique_ptr<Spare> spare_;
  UvPtr<uv_timer_t> spare_timer_;
  bool spares_ = true;  // off once a spare could not be given normal priority
};

}  // namespace ltd
