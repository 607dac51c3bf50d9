// ltd: the daemon. Runs in the foreground and logs to stderr (systemd
// style). Threads: the main thread runs the libuv loop that owns all job
// state; gRPC runs on its own threads and posts work to the loop; one
// thread accepts connections on the socket.
#include <grpc/grpc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "auto_instrument.h"
#include "byte_size.h"
#include "containment_factory.h"
#include "duration.h"
#include "fd_limit.h"
#include "gpu_pool.h"
#include "helpers.h"
#include "job_manager.h"
#include "job_store.h"
#include "listener.h"
#include "loop.h"
#include "metrics.h"
#include "nvml.h"
#include "options.h"
#include "ports.h"
#include "resource_limits.h"
#include "service.h"
#include "shim_host.h"
#include "socket_activation.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "state_lock.h"
#include "systemd_notify.h"
#include "unkillable_handler.h"
#include "uv_clock.h"
#include "uv_handle.h"
#include "version.h"

namespace ltd {
namespace {

// A supervisor answers in microseconds; the ones that do not within this
// are taken for dead, and their jobs are LOST.
constexpr std::chrono::milliseconds kProbeTimeout{1000};

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

// The automatic heartbeat module: python/autoload beside ltd in a build
// tree, the installed one otherwise.
std::string FindAutoHeartbeatDir() {
  return FindDirOf("sitecustomize.py", "python/autoload", LTD_PYTHON_FROM_BIN "/autoload",
                   LTD_PYTHONDIR "/autoload");
}

int Run(const Options& opt, const ConfigSources& config_sources) {
  // SIGTERM and SIGINT wait until the loop can take them: one that comes
  // while ltd starts (its socket may answer already) must stop it cleanly,
  // not kill it. Threads started meanwhile inherit the mask, so the loop
  // thread alone ever takes them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  auto level = spdlog::level::from_str(opt.log_level);
  if (level == spdlog::level::off && opt.log_level != "off") {
    std::fprintf(stderr, "ltd: unknown --log-level '%s'; use trace, debug, info, warn or error\n",
                 opt.log_level.c_str());
    return 1;
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("ltd"));
  spdlog::set_level(level);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  ManagerConfig config;
  auto duration = [](const char* flag, const std::string& text) -> std::optional<Millis> {
    auto d = ParseDuration(text);
    if (!d) {
      std::fprintf(stderr, "ltd: %s '%s' is not a duration; use e.g. 500ms, 10s, 5m or 2h\n", flag,
                   text.c_str());
    }
    return d;
  };
  auto budget = duration("--stack-budget", opt.stack_budget);
  auto idle = duration("--idle-timeout", opt.idle_timeout);
  auto backoff = duration("--restart-backoff", opt.restart_backoff);
  auto restore_window = duration("--restore-window", opt.restore_window);
  auto auto_timeout = duration("--auto-heartbeat-timeout", opt.auto_heartbeat_timeout);
  auto gpu_sample = duration("--gpu-sample-interval", opt.gpu_sample_interval);
  auto unkillable_timeout =
      duration("--unkillable-program-timeout", opt.unkillable_program_timeout);
  if (!budget || !idle || !backoff || !restore_window || !auto_timeout || !gpu_sample ||
      !unkillable_timeout) {
    return 1;
  }
  if (!opt.unkillable_program.empty() && opt.unkillable_program.front() != '/') {
    std::fprintf(stderr, "ltd: --unkillable-program must be an absolute path\n");
    return 1;
  }
  if (*gpu_sample < Millis(100)) {
    std::fprintf(stderr, "ltd: --gpu-sample-interval must be at least 100ms\n");
    return 1;
  }
  if (auto_timeout->count() <= 0) {
    std::fprintf(stderr,
                 "ltd: --auto-heartbeat-timeout must be positive; use --auto-heartbeat=false to "
                 "turn it off\n");
    return 1;
  }
  auto log_bytes = ParseByteSize(opt.job_max_log_bytes);
  if (!log_bytes || *log_bytes < (1u << 20)) {
    std::fprintf(stderr,
                 "ltd: --job-max-log-bytes '%s' is not a size of at least 1M; use e.g. 1G\n",
                 opt.job_max_log_bytes.c_str());
    return 1;
  }
  config.keep_finished = opt.keep_jobs;
  config.max_restarts_limit = opt.max_restarts_limit;
  std::string auto_heartbeat_dir;
  if (opt.auto_heartbeat) {
    const std::string dir =
        opt.auto_heartbeat_dir.empty() ? FindAutoHeartbeatDir() : opt.auto_heartbeat_dir;
    if (std::string problem = AutoHeartbeatDirProblem(dir); problem.empty()) {
      auto_heartbeat_dir = dir;
    } else if (!opt.auto_heartbeat_dir.empty()) {
      std::fprintf(stderr, "ltd: --auto-heartbeat-dir: %s\n", problem.c_str());
      return 1;
    } else {
      spdlog::warn("automatic heartbeats are off: {}", problem);
    }
  }
  config.placement.user_max_running_jobs = opt.user_max_running_jobs;
  config.placement.user_max_pending_jobs = opt.user_max_pending_jobs;
  RaiseOwnFdLimit();
  // NVML, when the host has it: the GPUs it finds are the default slots,
  // and a GPU is reused only once NVML sees it clean. Said once ltd is up:
  // a refusal to start stays one line on stderr.
  std::unique_ptr<Nvml> nvml;
  std::string nvml_off;
  if (auto loaded = Nvml::Load(opt.nvml_library); loaded.ok()) {
    nvml = std::move(*loaded);
  } else {
    nvml_off = std::string(loaded.status().message());
  }
  int nvml_gpus = 0;
  if (nvml) {
    auto n = nvml->Count();
    if (n.ok()) {
      nvml_gpus = *n;
    } else {
      spdlog::warn("NVML: {}", std::string(n.status().message()));
    }
  }
  if (!opt.gpus.empty()) {
    std::stringstream ss(opt.gpus);
    for (std::string id; std::getline(ss, id, ',');) {
      if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
        std::fprintf(stderr, "ltd: --gpus takes GPU indices such as 0,1,2,3; got '%s'\n",
                     opt.gpus.c_str());
        return 1;
      }
      config.placement.gpu_ids.push_back(id);
    }
    config.placement.slots = static_cast<int>(config.placement.gpu_ids.size());
  } else if (opt.devices > 0) {
    config.placement.slots = opt.devices;
  } else if (nvml_gpus > 0) {
    for (int i = 0; i < nvml_gpus; ++i) config.placement.gpu_ids.push_back(std::to_string(i));
    config.placement.slots = nvml_gpus;
  } else if (const int gpus = CountGpus(); gpus > 0) {
    for (int i = 0; i < gpus; ++i) config.placement.gpu_ids.push_back(std::to_string(i));
    config.placement.slots = gpus;
  } else {
    config.placement.slots = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }

  const std::string exec = FindHelper("lt-exec", LTD_LIBEXEC_FROM_BIN, LTD_LIBEXECDIR);
  const std::string shim = FindHelper("lt-shim", LTD_LIBEXEC_FROM_BIN, LTD_LIBEXECDIR);
  if (exec.empty() || shim.empty()) {
    std::fprintf(stderr, "ltd: cannot find %s beside ltd, in %s from it or in %s; reinstall ltd\n",
                 exec.empty() ? "lt-exec" : "lt-shim", LTD_LIBEXEC_FROM_BIN, LTD_LIBEXECDIR);
    return 1;
  }
  if (auto s = CheckSocketPath(opt.socket); !s.ok()) {
    std::fprintf(stderr, "ltd: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  auto store = JobStore::Open(opt.state_dir);
  if (!store.ok()) {
    std::fprintf(
        stderr,
        "ltd: state dir %s is not usable: %s; fix its permissions or choose another --state-dir\n",
        opt.state_dir.c_str(), std::string(store.status().message()).c_str());
    return 1;
  }
  // Refuse a second ltd before touching anything the first one owns.
  auto lock = StateLock::Acquire(opt.state_dir);
  if (!lock.ok()) {
    std::fprintf(stderr, "ltd: %s\n", std::string(lock.status().message()).c_str());
    return 1;
  }
  store->RemoveLeftovers();  // pruned by an earlier ltd, not yet gone
  // Under ltd.socket systemd holds the socket; started by hand, ltd binds it.
  auto activated = ListeningSocketFromSystemd();
  if (!activated.ok()) {
    std::fprintf(stderr, "ltd: %s\n", std::string(activated.status().message()).c_str());
    return 1;
  }
  const auto max_conns = static_cast<size_t>(opt.user_max_connections);
  auto listener = *activated ? Listener::Adopt(std::move(**activated), max_conns)
                             : Listener::Bind(opt.socket, max_conns);
  if (!listener.ok()) {
    std::fprintf(stderr, "ltd: %s\n", std::string(listener.status().message()).c_str());
    return 1;
  }
  (*listener)->set_connect_rate(opt.user_max_connects, 2 * opt.user_max_connects);

  signal(SIGPIPE, SIG_IGN);
  grpc_init();  // see below: ltd keeps a reference of its own
  Loop loop;
  const ContainmentPlan plan = PlanContainment(*store);
  ShimConfig shim_config;
  shim_config.shim_binary = shim;
  shim_config.exec_binary = exec;
  shim_config.log_level = opt.log_level;
  shim_config.restore_window = *restore_window;
  shim_config.stack_budget = *budget;
  shim_config.restart_backoff = *backoff;
  shim_config.job_max_log_bytes = *log_bytes;
  shim_config.auto_heartbeat_dir = auto_heartbeat_dir;
  shim_config.auto_heartbeat_timeout = *auto_timeout;

  // Supervisors an earlier ltd left: those that answer for their job keep
  // it; the rest of what earlier processes left is swept.
  std::vector<std::string> running;
  for (const Job& job : store->LoadAll()) {
    if (job.state == JobState::kRunning) running.push_back(job.id);
  }
  std::map<std::string, ShimSupervisorHost::Found> found;
  {
    ShimSupervisorHost probe_host(loop, *store, plan, shim_config);
    found = probe_host.Probe(running, kProbeTimeout);
  }
  std::vector<std::string> keep = {plan.instance};
  for (const auto& [id, f] : found) keep.push_back(SupervisorInstance(id));
  SweepLeftovers(plan, keep);
  // Proves the mode asked for works here (and picks one for "auto"); every
  // supervisor then uses that mode for its job.
  auto containment = SetUpContainment(loop.get(), opt.containment, plan);
  if (!containment.ok()) {
    std::fprintf(stderr, "ltd: %s\n", std::string(containment.status().message()).c_str());
    return 1;
  }
  shim_config.containment = std::string((*containment)->name());
  const LimitSupport limit_support = ProbeLimitSupport(plan, shim_config.containment);
  config.no_memory_limit = limit_support.memory;
  config.no_cpu_limit = limit_support.cpu;
  config.cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (!limit_support.memory.empty()) spdlog::info("--mem off: {}", limit_support.memory);
  if (!limit_support.cpu.empty()) spdlog::info("--cpus off: {}", limit_support.cpu);
  {
    UvClock clock(loop.get());
    KernelPortAllocator ports;
    ShimSupervisorHost supervisors(loop, *store, plan, shim_config);
    supervisors.KeepSpare();
    JobManager manager(clock, supervisors, *store, ports, config);
    SystemdNotifier notifier(clock, [&manager] {
      SystemdNotifier::Counts c;
      for (const Job* job : manager.List(false)) {
        (job->state == JobState::kRunning ? c.running : c.pending) += 1;
      }
      return c;
    });
    manager.AddEvents(&notifier);
    UnkillableHandler unkillable(loop.get(), plan, opt.unkillable_program, *unkillable_timeout);
    manager.AddEvents(&unkillable);
    GpuPool gpu_pool(clock, nvml.get(), config.placement.gpu_ids,
                     GpuPool::Config{.leftover_mib = opt.gpu_leftover_mib, .sample = *gpu_sample});
    gpu_pool.SetCallbacks([&manager](int slot) { manager.GpuClean(slot); },
                          [&manager] { manager.RefreshGpuUsage(); });
    manager.SetGpuPool(&gpu_pool);
    std::optional<Metrics> metrics;
    if (!opt.metrics_listen.empty()) {
      auto slots = [&manager] {
        Metrics::Slots s;
        for (const SlotView& v : manager.Slots()) {
          if (v.state == SlotView::State::kBusy) ++s.busy;
          if (v.state == SlotView::State::kQuarantined) ++s.quarantined;
          if (v.state == SlotView::State::kFree) ++s.free;
        }
        return s;
      };
      metrics.emplace(clock, Metrics::Sources{[&manager] { return manager.List(true); }, slots});
      if (auto s = metrics->Serve(opt.metrics_listen); !s.ok()) {
        std::fprintf(stderr, "ltd: %s\n", std::string(s.message()).c_str());
        return 1;
      }
      manager.AddEvents(&*metrics);
      spdlog::info("metrics on http://{}/metrics", metrics->address());
    }
    manager.Recover([&](const Job& job, SupervisionEvents& events) -> std::unique_ptr<Supervision> {
      auto it = found.find(job.id);
      if (it == found.end()) return nullptr;
      return supervisors.Adopt(job, std::move(it->second), events);
    });
    found.clear();
    gpu_pool.Start();

    // gRPC's library shutdown (run by ~Server when it drops the last
    // reference) joins an executor thread that may sit in a 10 s poll on a
    // connection handed over by fd. ltd exits right after, so it keeps one
    // reference of its own (grpc_init above) and never shuts it down.
    LtdService service(loop, manager, **listener, static_cast<size_t>(opt.user_max_streams));
    grpc::ServerBuilder builder;
    builder.RegisterService(&service);
    // Calls one connection may have in progress; a client's further calls
    // wait in its own transport, costing ltd nothing.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, opt.connection_max_streams);
    // A connection with no call in progress is closed after a while: an
    // idle client holds an fd of ltd's and a slot of its user's limit.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               static_cast<int>(std::min<int64_t>(idle->count(), INT32_MAX)));
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server) {
      std::fprintf(stderr, "ltd: gRPC server failed to start\n");
      return 1;
    }
    (*listener)->Start(server.get());
    // Said once ltd is up, as the rest: a refusal to start is one line.
    spdlog::info("{}; {}", LTD_VERSION_LINE("ltd"), config_sources.Describe());
    spdlog::info("ltd listening on {}{}; state in {}; {} device slot(s){}; containment: {}",
                 (*listener)->path(), *activated ? " (socket from systemd)" : "", opt.state_dir,
                 config.placement.slots, config.placement.gpu_ids.empty() ? "" : " (GPUs)",
                 supervisors.containment());
    if (!nvml) {
      spdlog::info("GPU checks off: {}", nvml_off);
    } else if (!gpu_pool.checks_on()) {
      spdlog::info("GPU checks off: the slots are no GPUs (--devices)");
    }
    if (metrics) metrics->Refresh();
    // Listening, and every running job's supervisor re-attached (Recover).
    notifier.Ready();
    if (auto period = SystemdNotifier::WatchdogPeriod()) notifier.StartWatchdog(*period);
    if (const char* wedge = std::getenv("LTD_TEST_WEDGE_AFTER_MS")) {
      notifier.WedgeLoopAfter(Millis(std::strtoll(wedge, nullptr, 10)));
    }

    // SIGTERM/SIGINT: refuse new jobs, tear every job down, record, exit 0.
    bool stopping = false;
    auto on_signal = [&](int signum) {
      if (stopping) return;
      stopping = true;
      // With a restore window, running jobs stay with their supervisors
      // for the next ltd; without, they end with this one.
      const bool end_jobs = restore_window->count() == 0;
      spdlog::info("{} received: stopping{}", sigabbrev_np(signum),
                   end_jobs ? "; every job ends with ltd (--restore-window 0)" : "");
      notifier.Stopping();
      service.Close();
      manager.Shutdown(end_jobs, [&] { loop.Stop(); });
    };
    service.set_shutdown([&](std::function<void()> finished) {
      if (stopping) return finished();
      stopping = true;
      spdlog::info("shutdown asked for: tearing every job down, then stopping");
      notifier.Stopping();
      service.Close();
      manager.Shutdown(/*end_jobs=*/true, [&, finished] {
        finished();
        loop.Stop();
      });
    });
    struct SignalCtx {
      std::function<void(int)> fn;
    } ctx{on_signal};
    std::vector<UvPtr<uv_signal_t>> stop_handlers;
    for (int signum : {SIGTERM, SIGINT}) {
      UvPtr<uv_signal_t> handle =
          UvInit<uv_signal_t>([&](uv_signal_t* h) { return uv_signal_init(loop.get(), h); });
      if (!handle) continue;
      handle->data = &ctx;
      uv_signal_start(
          handle.get(), [](uv_signal_t* h, int s) { static_cast<SignalCtx*>(h->data)->fn(s); },
          signum);
      stop_handlers.push_back(std::move(handle));
    }
    pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);  // any that came: to the loop now
    loop.Run();

    (*listener)->Stop();
    // Calls in flight finish on the loop (their last step was posted there).
    loop.RunWhile(
        [&] { server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2)); });
    stop_handlers.clear();
    uv_run(loop.get(), UV_RUN_NOWAIT);  // their close callbacks, while they still exist
    // Every record is on disk (supervisors write their own; ltd saved the
    // rest as it went), and the jobs that outlive ltd are their
    // supervisors' now. What is left to destroy is gRPC client state of
    // watch streams still being cancelled on gRPC's threads; tearing that
    // down under them races (an abort in gRPC's reference counting), so
    // ltd removes its socket and leaves at once.
    listener->reset();
    containment->reset();  // ltd's own (empty) cgroup, and the base once no job is left in it
    // The next ltd goes on from the next id, not past what this one reserved.
    if (auto s = store->ReturnReservedIds(); !s.ok()) {
      spdlog::warn("job ids this ltd reserved stay taken: {}", std::string(s.message()));
    }
    spdlog::info("ltd stopped");
    spdlog::shutdown();
    std::fflush(stderr);
    _exit(0);
  }
  return 0;
}

}  // namespace
}  // namespace ltd

int main(int argc, char** argv) {
  ltd::Options opt;
  std::string config_path = "/etc/ltd/ltd.toml";
  bool print_config = false;
  CLI::App app{"ltd: supervises multi-rank training jobs; control it with ltctl"};
  auto* config = app.add_option("--config", config_path,
                                "TOML file whose keys are the options' names without --; flags "
                                "win over it (see ltd.toml(5))")
                     ->capture_default_str();
  app.add_flag("--print-config", print_config,
               "print the effective configuration and where each value came from, then exit");
  app.set_version_flag("--version", LTD_VERSION_LINE("ltd"));
  ltd::AddOptions(app, opt);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "ltd: %s; see `ltd --help`\n", e.what());
    return 1;
  }
  ltd::ConfigSources sources;
  if (auto s = ltd::ApplyConfigFile(app, config_path, config->count() > 0, &sources); !s.ok()) {
    std::fprintf(stderr, "ltd: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  if (print_config) {
    std::fputs(ltd::EffectiveConfig(app, sources).c_str(), stdout);
    return 0;
  }
  return ltd::Run(opt, sources);
}
