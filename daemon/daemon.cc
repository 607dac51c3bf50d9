#include "daemon.h"

#include <grpc/grpc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "auto_instrument.h"
#include "fd_limit.h"
#include "file_io.h"
#include "gpu_devices.h"
#include "helpers.h"
#include "log_rate.h"
#include "private_file.h"
#include "resource_limits.h"
#include "shim_probe.h"
#include "socket_activation.h"
#include "spdlog/spdlog.h"
#include "str_util.h"
#include "version.h"

namespace ltd {
namespace {

// How long ltd's start waits in all for the supervisors it found to say
// who they are; the ones that do not are taken for dead, their jobs LOST
// and their processes killed. An idle supervisor answers in microseconds,
// but one on a loaded machine, or reading a loud rank, can take seconds:
// a supervisor whose socket took the call is alive (a socket nobody holds
// refuses at once), and killing its job for a slow answer is worse than a
// start that waits.
constexpr std::chrono::milliseconds kProbeTimeout{10000};
// How long ltd's start waits in all for supervisors an earlier ltd was
// starting as it died (AwaitStartingShims): they decide in milliseconds.
constexpr std::chrono::milliseconds kStartingTimeout{2000};
// How long a stopping ltd gives the calls in flight (see Stop).
constexpr std::chrono::milliseconds kStopGrace{100};

// Each client connection and each job's supervisor holds fds of ltd's;
// the usual soft limit of 1,024 would cap a busy server, so take what the
// hard limit allows. The ranks' limits are taken first.
void RaiseOwnFdLimit() {
  (void)StartLimits();  // what ranks get at most, taken before the raise
  if (absl::Status s = RaiseFdLimit(); !s.ok()) spdlog::warn("{}", std::string(s.message()));
}

int CountGpus() {
  int n = 0;
  while (access(("/dev/nvidia" + std::to_string(n)).c_str(), F_OK) == 0) ++n;
  return n;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(DaemonConfig config,
                                                      const ConfigSources& sources) {
  std::unique_ptr<Daemon> d(new Daemon(std::move(config)));
  // SIGTERM and SIGINT wait until the loop can take them: one that comes
  // while ltd starts (its socket may answer already) must stop it cleanly,
  // not kill it. Threads started meanwhile inherit the mask, so the loop
  // thread alone ever takes them.
  sigemptyset(&d->stop_signals_);
  sigaddset(&d->stop_signals_, SIGTERM);
  sigaddset(&d->stop_signals_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &d->stop_signals_, nullptr);
  spdlog::set_default_logger(RateLimitedStderrLogger("ltd"));
  spdlog::set_level(d->config_.level);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  const DaemonConfig& c = d->config_;
  d->manager_config_.keep_finished = c.keep_jobs;
  d->manager_config_.max_restarts_limit = c.max_restarts_limit;
  d->manager_config_.max_time = c.max_time;
  d->manager_config_.munge_socket = c.munge_socket;
  d->manager_config_.rdzv_auth = c.rdzv_auth;
  d->manager_config_.etcd_ca = c.etcd_ca;
  d->manager_config_.etcd_cert = c.etcd_cert;
  d->manager_config_.etcd_key = c.etcd_key;
  d->manager_config_.etcd_auth_file = c.etcd_auth_file;
  if (c.rdzv_auth == "auto") {
    struct stat st {};
    const bool there = stat(c.munge_socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
    d->manager_config_.rdzv_auth = there ? "munge" : "none";
  }
  d->manager_config_.max_state_bytes = c.max_state_bytes;
  d->manager_config_.placement.user_max_running_jobs = c.user_max_running_jobs;
  d->manager_config_.placement.user_max_pending_jobs = c.user_max_pending_jobs;
  ShimConfig& shim = d->shim_config_;
  shim.log_level = c.log_level;
  shim.restore_window = c.restore_window;
  shim.stack_budget = c.stack_budget;
  shim.restart_backoff = c.restart_backoff;
  shim.job_max_log_bytes = c.job_max_log_bytes;
  shim.auto_heartbeat_timeout = c.auto_heartbeat_timeout;

  if (c.auto_heartbeat) {
    const std::string dir =
        c.auto_heartbeat_dir.empty() ? FindAutoHeartbeatDir() : c.auto_heartbeat_dir;
    if (std::string problem = AutoHeartbeatDirProblem(dir); problem.empty()) {
      shim.auto_heartbeat_dir = dir;
    } else if (!c.auto_heartbeat_dir.empty()) {
      return absl::InvalidArgumentError("--auto-heartbeat-dir: " + problem);
    } else {
      spdlog::warn("automatic heartbeats are off: {}", problem);
    }
  }
  RaiseOwnFdLimit();
  d->FindSlots();
  // Secrets every supervisor reads as root: no one else may read them.
  for (const auto& [flag, path] :
       {std::pair{"--etcd-auth-file", c.etcd_auth_file}, std::pair{"--etcd-key", c.etcd_key}}) {
    if (path.empty()) continue;
    if (absl::Status s = CheckPrivateFile(flag, path); !s.ok()) return s;
  }
  if (absl::Status s = d->FindHelpers(); !s.ok()) return s;
  if (absl::Status s = d->OpenState(); !s.ok()) return s;
  if (absl::Status s = d->TakeOverEarlier(); !s.ok()) return s;
  if (absl::Status s = d->Wire(); !s.ok()) return s;
  if (absl::Status s = d->Serve(sources); !s.ok()) return s;
  return d;
}

Daemon::~Daemon() = default;

// NVML, when the host has it: the GPUs it finds are the default slots,
// and a GPU is reused only once NVML sees it clean. Said once ltd is up:
// a refusal to start stays one line on stderr.
void Daemon::FindSlots() {
  if (auto loaded = Nvml::Load(config_.nvml_library); loaded.ok()) {
    nvml_ = std::move(*loaded);
  } else {
    nvml_off_ = std::string(loaded.status().message());
  }
  int nvml_gpus = 0;
  if (nvml_) {
    auto n = nvml_->Count();
    if (n.ok()) {
      nvml_gpus = *n;
    } else {
      spdlog::warn("NVML: {}", std::string(n.status().message()));
    }
  }
  SchedulerConfig& placement = manager_config_.placement;
  auto gpus = [&placement](int n) {
    for (int i = 0; i < n; ++i) placement.gpu_ids.push_back(std::to_string(i));
    placement.slots = n;
  };
  if (!config_.gpu_ids.empty()) {
    placement.gpu_ids = config_.gpu_ids;
    placement.slots = static_cast<int>(placement.gpu_ids.size());
  } else if (config_.devices > 0) {
    placement.slots = config_.devices;
  } else if (nvml_gpus > 0) {
    gpus(nvml_gpus);
  } else if (const int n = CountGpus(); n > 0) {
    gpus(n);
  } else {
    placement.slots = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
}

absl::Status Daemon::FindHelpers() {
  shim_config_.exec_binary = FindHelper("lt-exec", LTD_LIBEXEC_FROM_BIN, LTD_LIBEXECDIR);
  shim_config_.shim_binary = FindHelper("lt-shim", LTD_LIBEXEC_FROM_BIN, LTD_LIBEXECDIR);
  shim_config_.shim_etcd_binary = FindHelper("lt-shim-etcd", LTD_LIBEXEC_FROM_BIN, LTD_LIBEXECDIR);
  for (const auto& [name, path] : {std::pair{"lt-exec", &shim_config_.exec_binary},
                                   {"lt-shim", &shim_config_.shim_binary},
                                   {"lt-shim-etcd", &shim_config_.shim_etcd_binary}}) {
    if (path->empty()) return absl::NotFoundError(HelperMissing(name, "ltd"));
  }
  const std::string userio = FindHelper("lt-userio", LTD_LIBEXEC_FROM_BIN, LTD_LIBEXECDIR);
  if (userio.empty()) return absl::NotFoundError(HelperMissing("lt-userio", "ltd"));
  user_io_.emplace(userio);
  return absl::OkStatus();
}

absl::Status Daemon::OpenState() {
  if (auto s = CheckSocketPath(config_.socket); !s.ok()) return s;
  auto store = JobStore::Open(config_.state_dir);
  if (!store.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("state dir ", config_.state_dir, " is not usable: ", store.status().message(),
                     "; fix its permissions or choose another --state-dir"));
  }
  store_.emplace(std::move(*store));
  // Refuse a second ltd before touching anything the first one owns.
  auto lock = StateLock::Acquire(config_.state_dir);
  if (!lock.ok()) return lock.status();
  lock_.emplace(std::move(*lock));
  store_->RemoveLeftovers();  // pruned by an earlier ltd, not yet gone
  // Under ltd.socket systemd holds the socket; started by hand, ltd binds it.
  auto activated = ListeningSocketFromSystemd();
  if (!activated.ok()) return activated.status();
  activated_ = activated->has_value();
  const auto max_conns = static_cast<size_t>(config_.user_max_connections);
  const FdRelay relay = config_.fd_relay == "yes"  ? FdRelay::kAlways
                        : config_.fd_relay == "no" ? FdRelay::kNever
                                                   : FdRelay::kAuto;
  auto listener = activated_ ? Listener::Adopt(std::move(**activated), max_conns, relay)
                             : Listener::Bind(config_.socket, max_conns, relay);
  if (!listener.ok()) return listener.status();
  listener_ = std::move(*listener);
  listener_->set_connect_rate(config_.user_max_connects, 2 * config_.user_max_connects);
  return absl::OkStatus();
}

absl::Status Daemon::TakeOverEarlier() {
  signal(SIGPIPE, SIG_IGN);
  grpc_init();  // see Serve: ltd keeps a reference of its own
  loop_.emplace();
  plan_.emplace(PlanContainment(*store_));
  if (plan_->limits.devices.layout == CgroupLayout::kV2) {
    shim_config_.device_program_proven = plan_->limits.devices.own_dir;
  }
  // Supervisors an earlier ltd left: those that answer for their job keep
  // it; the rest of what earlier processes left is swept.
  std::vector<std::string> running, pending;
  records_ = JobManager::ReadRecords(*store_);
  for (const auto& job : records_) {
    if (job->state == JobState::kRunning || job->state == JobState::kStarting) {
      running.push_back(job->id);
    }
    if (job->state == JobState::kPending) pending.push_back(job->id);
  }
  // A supervisor the earlier ltd started as it died is going, or starting
  // its job: which, before the sweep (that would kill a starting one).
  for (std::string& id : AwaitStartingShims(*store_, pending, kStartingTimeout)) {
    running.push_back(std::move(id));
  }
  {
    ShimSupervisorHost probe_host(*loop_, *store_, *plan_, shim_config_);
    found_ = probe_host.Probe(running, kProbeTimeout);
  }
  std::vector<std::string> keep = {plan_->instance};
  for (const auto& [id, f] : found_) keep.push_back(SupervisorInstance(id));
  SweepLeftovers(*plan_, keep);
  SweepStaleLtruns(*plan_);
  // Proves the mode asked for works here (and picks one for "auto"); every
  // supervisor then uses that mode for its job.
  auto containment = SetUpContainment(loop_->get(), config_.containment, *plan_);
  if (!containment.ok()) return containment.status();
  containment_ = std::move(*containment);
  shim_config_.containment = std::string(containment_->name());
  // --mem and --cpus: refused at submit where this host cannot set them.
  const LimitSupport limits = ProbeLimitSupport(*plan_, shim_config_.containment);
  manager_config_.no_memory_limit = limits.memory;
  manager_config_.no_cpu_limit = limits.cpu;
  manager_config_.cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (!limits.memory.empty()) spdlog::info("--mem off: {}", limits.memory);
  if (!limits.cpu.empty()) spdlog::info("--cpus off: {}", limits.cpu);
  PlanGpuIsolation(limits.devices);
  return absl::OkStatus();
}

// The minor of each slot's GPU: NVML's word, else (no NVML) the driver's
// /proc files, whose bus-id order is NVML's default index order. A GPU
// whose minor is unknown makes the whole host "not isolated": ltd would
// otherwise deny a job its own GPU or allow another's.
void Daemon::PlanGpuIsolation(const std::string& no_devices) {
  const std::vector<std::string>& ids = manager_config_.placement.gpu_ids;
  if (ids.empty()) return;  // the slots are not GPUs
  std::string why;
  if (!config_.gpu_isolation) {
    why = "turned off (gpu-isolation = false)";
  } else if (!no_devices.empty()) {
    why = no_devices;
  }
  std::vector<uint32_t> minors;
  std::vector<std::string> proc_gpus;
  if (why.empty() && !nvml_) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
      proc_gpus.push_back(e.path().string());
    }
    std::sort(proc_gpus.begin(), proc_gpus.end());
  }
  for (size_t i = 0; why.empty() && i < ids.size(); ++i) {
    int index = -1;
    absl::StatusOr<uint32_t> minor = absl::NotFoundError("not an NVML index");
    if (absl::SimpleAtoi(ids[i], &index) && index >= 0) {
      if (nvml_) {
        minor = nvml_->Minor(index);
      } else if (static_cast<size_t>(index) < proc_gpus.size()) {
        auto info = ReadWholeFile(proc_gpus[static_cast<size_t>(index)] + "/information", 65536);
        if (info.ok()) {
          minor = ParseNvidiaMinor(*info);
        } else {
          minor = info.status();
        }
      } else {
        minor = absl::NotFoundError("no NVML and no /proc/driver/nvidia/gpus entry for it");
      }
    }
    if (minor.ok()) {
      minors.push_back(*minor);
    } else {
      why = Cat("the device minor of GPU ", ids[i], " is unknown (", minor.status().message(), ")");
    }
  }
  if (!why.empty()) {
    manager_config_.gpu_isolation = Cat("not isolated: ", why);
    spdlog::warn("GPUs not isolated: every job can open every GPU: {}", why);
    return;
  }
  manager_config_.gpu_minors = std::move(minors);
  manager_config_.gpu_isolation =
      plan_->limits.devices.layout == CgroupLayout::kV2
          ? "isolated (a cgroup device program allows each job only its GPUs)"
          : "isolated (cgroup v1 devices rules allow each job only its GPUs)";
  spdlog::info("GPUs {}", manager_config_.gpu_isolation);
}

absl::Status Daemon::Wire() {
  clock_.emplace(loop_->get());
  supervisors_.emplace(*loop_, *store_, *plan_, shim_config_);
  supervisors_->KeepSpare();
  manager_.emplace(*clock_, *supervisors_, *store_, ports_, manager_config_);
  JobManager& manager = *manager_;
  notifier_.emplace(*clock_, [&manager] {
    SystemdNotifier::Counts c;
    for (const Job* job : manager.List(false)) {
      (job->state == JobState::kPending ? c.pending : c.running) += 1;
    }
    return c;
  });
  manager.AddEvents(&*notifier_);
  unkillable_.emplace(loop_->get(), *plan_, config_.unkillable_program,
                      config_.unkillable_program_timeout);
  manager.AddEvents(&*unkillable_);
  gpu_pool_.emplace(*clock_, nvml_.get(), manager_config_.placement.gpu_ids,
                    GpuPool::Config{.leftover_mib = config_.gpu_leftover_mib,
                                    .sample = config_.gpu_sample_interval});
  gpu_pool_->SetCallbacks([&manager](int slot) { manager.GpuClean(slot); },
                          [&manager] { manager.RefreshGpuUsage(); });
  manager.SetGpuPool(&*gpu_pool_);
  if (!config_.metrics_listen.empty()) {
    auto slots = [&manager] {
      Metrics::Slots s;
      for (const SlotView& v : manager.Slots()) {
        if (v.state == SlotView::State::kBusy) ++s.busy;
        if (v.state == SlotView::State::kQuarantined) ++s.quarantined;
        if (v.state == SlotView::State::kFree) ++s.free;
      }
      return s;
    };
    metrics_.emplace(*clock_, Metrics::Sources{[&manager] { return manager.List(true); }, slots});
    if (auto s = metrics_->Serve(config_.metrics_listen); !s.ok()) return s;
    manager.AddEvents(&*metrics_);
    spdlog::info("metrics on http://{}/metrics", metrics_->address());
  }
  manager.Recover(
      std::move(records_),
      [this](const Job& job, SupervisionEvents& events) -> std::unique_ptr<Supervision> {
        auto it = found_.find(job.id);
        if (it == found_.end()) return nullptr;
        return supervisors_->Adopt(job, std::move(it->second), events);
      });
  found_.clear();
  gpu_pool_->Start();
  return absl::OkStatus();
}

absl::Status Daemon::Serve(const ConfigSources& sources) {
  // gRPC's library shutdown (run by ~Server when it drops the last
  // reference) joins an executor thread that may sit in a 10 s poll on a
  // connection handed over by fd. ltd exits right after, so it keeps one
  // reference of its own (grpc_init in TakeOverEarlier) and never shuts
  // it down.
  service_.emplace(*loop_, *manager_, *listener_, *user_io_,
                   static_cast<size_t>(config_.user_max_streams));
  if (absl::Status s = service_->SetAdminGroup(config_.admin_group); !s.ok()) return s;
  service_->set_private_jobs(config_.private_jobs);
  grpc::ServerBuilder builder;
  builder.RegisterService(&*service_);
  // Calls one connection may have in progress; a client's further calls
  // wait in its own transport, costing ltd nothing.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, config_.connection_max_streams);
  // A connection with no call in progress is closed after a while: an
  // idle client holds an fd of ltd's and a slot of its user's limit.
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONNECTION_IDLE_MS,
      static_cast<int>(std::min<int64_t>(config_.idle_timeout.count(), INT32_MAX)));
  server_ = builder.BuildAndStart();
  if (!server_) return absl::UnavailableError("gRPC server failed to start");
  if (auto started = listener_->Start(server_.get()); !started.ok()) return started;
  // Said once ltd is up, as the rest: a refusal to start is one line.
  const SchedulerConfig& placement = manager_config_.placement;
  spdlog::info("{}; {}", LTD_VERSION_LINE("ltd"), sources.Describe());
  spdlog::info("ltd listening on {}{}; state in {}; {} device slot(s){}; containment: {}",
               listener_->path(), activated_ ? " (socket from systemd)" : "", config_.state_dir,
               placement.slots, placement.gpu_ids.empty() ? "" : " (GPUs)",
               supervisors_->containment());
  if (manager_config_.rdzv_auth == "munge") {
    spdlog::info("multi-node runs at etcd: records sealed with MUNGE at {} (--rdzv-auth munge)",
                 manager_config_.munge_socket);
  } else {
    spdlog::info(
        "multi-node runs at etcd: records not authenticated (--rdzv-auth none{}); any "
        "user who reaches etcd can join or decide a run",
        config_.rdzv_auth == "auto" ? ": no munged at " + config_.munge_socket : "");
  }
  if (!nvml_) {
    spdlog::info("GPU checks off: {}", nvml_off_);
  } else if (!gpu_pool_->checks_on()) {
    spdlog::info("GPU checks off: the slots are no GPUs (--devices)");
  }
  if (metrics_) metrics_->Refresh();
  // Listening, and every running job's supervisor re-attached (Recover).
  notifier_->Ready();
  if (auto period = SystemdNotifier::WatchdogPeriod()) notifier_->StartWatchdog(*period);
  if (const char* wedge = std::getenv("LTD_TEST_WEDGE_AFTER_MS")) {
    notifier_->WedgeLoopAfter(Millis(std::strtoll(wedge, nullptr, 10)));
  }
  // `ltctl shutdown`: every job ends, whatever the restore window.
  service_->set_shutdown([this](std::function<void()> finished) {
    if (stopping_) return finished();
    stopping_ = true;
    spdlog::info("shutdown asked for: tearing every job down, then stopping");
    notifier_->Stopping();
    service_->Close();
    manager_->Shutdown(/*end_jobs=*/true, [this, finished] {
      finished();
      loop_->Stop();
    });
  });
  return absl::OkStatus();
}

// SIGTERM/SIGINT: refuse new jobs, tear every job down, record, exit 0.
void Daemon::OnStopSignal(int signum) {
  if (stopping_) return;
  stopping_ = true;
  // With a restore window, running jobs stay with their supervisors for
  // the next ltd; without, they end with this one.
  const bool end_jobs = config_.restore_window.count() == 0;
  spdlog::info("{} received: stopping{}", sigabbrev_np(signum),
               end_jobs ? "; every job ends with ltd (--restore-window 0)" : "");
  notifier_->Stopping();
  service_->Close();
  manager_->Shutdown(end_jobs, [this] { loop_->Stop(); });
}

void Daemon::Run() {
  for (int signum : {SIGTERM, SIGINT}) {
    UvPtr<uv_signal_t> handle =
        UvInit<uv_signal_t>([&](uv_signal_t* h) { return uv_signal_init(loop_->get(), h); });
    if (!handle) continue;
    handle->data = this;
    uv_signal_start(
        handle.get(), [](uv_signal_t* h, int s) { static_cast<Daemon*>(h->data)->OnStopSignal(s); },
        signum);
    stop_handlers_.push_back(std::move(handle));
  }
  pthread_sigmask(SIG_UNBLOCK, &stop_signals_, nullptr);  // any that came: to the loop now
  loop_->Run();
  Stop();
}

void Daemon::Stop() {
  listener_->Stop();
  // Calls in flight finish on the loop (their last step was posted there),
  // within kStopGrace; streams that would go on (attach, logs -f) are
  // cancelled then, and their clients follow the next ltd. Shutdown waits
  // its whole deadline for a client's idle connection (a Python
  // ltd.Client holds one open): with 2 s, every stop with one took 2 s.
  loop_->RunWhile([&] { server_->Shutdown(std::chrono::system_clock::now() + kStopGrace); });
  stop_handlers_.clear();
  uv_run(loop_->get(), UV_RUN_NOWAIT);  // their close callbacks, while they still exist
  // Every record is on disk (supervisors write their own; ltd saved the
  // rest as it went), and the jobs that outlive ltd are their
  // supervisors' now. What is left to destroy is gRPC client state of
  // watch streams still being cancelled on gRPC's threads; tearing that
  // down under them races (an abort in gRPC's reference counting), so
  // ltd removes its socket and leaves at once.
  listener_.reset();
  containment_.reset();  // ltd's own (empty) cgroup, and the base once no job is left in it
  // The next ltd goes on from the next id, not past what this one reserved.
  if (auto s = store_->ReturnReservedIds(); !s.ok()) {
    spdlog::warn("job ids this ltd reserved stay taken: {}", std::string(s.message()));
  }
  spdlog::info("ltd stopped");
  spdlog::shutdown();
  std::fflush(stderr);
  _exit(0);
}

}  // namespace ltd
