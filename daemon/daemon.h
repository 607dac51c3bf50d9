// ltd as one object: what it takes from the machine (NVML and the device
// slots, its helpers, the state dir and its lock, the socket), the wiring
// of the job table to the supervisors, the API, systemd and the metrics,
// and the order in which all of it stops. Its configuration is checked
// before (config/daemon_config.h); what Start refuses is what only the
// machine can say.
#pragma once

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "containment.h"
#include "containment_factory.h"
#include "daemon_config.h"
#include "gpu_pool.h"
#include "job_manager.h"
#include "job_store.h"
#include "listener.h"
#include "loop.h"
#include "metrics.h"
#include "nvml.h"
#include "options.h"
#include "ports.h"
#include "service.h"
#include "shim_host.h"
#include "state_lock.h"
#include "systemd_notify.h"
#include "unkillable_handler.h"
#include "user_io.h"
#include "uv_clock.h"
#include "uv_handle.h"

namespace ltd {

class Daemon {
 public:
  // Takes what ltd runs with, in order, and serves: nothing of a job is
  // touched before the state dir's lock is held. A refusal is one line
  // saying what to do. SIGTERM and SIGINT wait (blocked) until Run.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(DaemonConfig config,
                                                       const ConfigSources& sources);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Runs until SIGTERM/SIGINT or `ltctl shutdown`, then stops in order
  // and ends the process with 0 (see Stop).
  [[noreturn]] void Run();

 private:
  explicit Daemon(DaemonConfig config) : config_(std::move(config)) {}

  void FindSlots();                // NVML, and the device slots it or the flags give
  absl::Status FindHelpers();      // lt-exec, lt-shim, lt-userio, the automatic heartbeat module
  absl::Status OpenState();        // the state dir, its lock, the socket
  absl::Status TakeOverEarlier();  // supervisors of an earlier ltd; the rest swept
  // Whether jobs' GPUs can be isolated, and each slot's minor; said once.
  void PlanGpuIsolation(const std::string& no_devices);
  absl::Status Wire();                               // the job table and what listens to it
  absl::Status Serve(const ConfigSources& sources);  // gRPC on the socket; READY
  void OnStopSignal(int signum);
  [[noreturn]] void Stop();

  const DaemonConfig config_;
  ManagerConfig manager_config_;
  ShimConfig shim_config_;
  sigset_t stop_signals_{};
  bool stopping_ = false;

  // In the order they are made: each is destroyed (on a refused start)
  // before what it uses.
  std::unique_ptr<Nvml> nvml_;
  std::string nvml_off_;  // why there is no NVML
  std::optional<JobStore> store_;
  std::optional<StateLock> lock_;
  bool activated_ = false;  // the socket came from systemd
  std::unique_ptr<Listener> listener_;
  std::optional<Loop> loop_;
  std::optional<ContainmentPlan> plan_;
  std::map<std::string, ShimSupervisorHost::Found> found_;
  // The state dir's records, read once at the start (JobManager::Recover).
  std::vector<std::unique_ptr<Job>> records_;
  std::unique_ptr<Containment> containment_;
  std::optional<UvClock> clock_;
  KernelPortAllocator ports_;
  std::optional<ShimSupervisorHost> supervisors_;
  std::optional<JobManager> manager_;
  std::optional<SystemdNotifier> notifier_;
  std::optional<UnkillableHandler> unkillable_;
  std::optional<GpuPool> gpu_pool_;
  std::optional<Metrics> metrics_;
  std::optional<UserIo> user_io_;  // a submit's --output/--error checks
  std::optional<LtdService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<UvPtr<uv_signal_t>> stop_handlers_;
};

}  // namespace ltd
