// lt-shim: the supervisor of one job at a time. ltd starts one per job it
// places, or gives the job to a spare (spare.h), which may serve job after
// job (root, in its own session, the job's record in the state dir); it
// runs the job's ranks through lt-exec, watches them, tears them down,
// restarts them, and records the job, whether or not ltd is there. ltd
// watches it over the job's connection (fd 3: a socket pair it was
// started with, or given with the job); a later ltd finds it
// again at <job dir>/supervisor.sock (proto/shim.proto's frames, no
// gRPC). With ltd gone for longer than the restore window it tears its job
// down; should the ltd that started it go before it watched it, it goes
// too, the job still PENDING (first_contact.h). Its ranks die with it
// (PDEATHSIG); what they leave, ltd kills. Built twice: lt-shim, linked
// statically and without NSS, and lt-shim-etcd, glibc shared, for a
// multi-node run (run_join.h) and for a job whose record names no groups
// (an earlier release's), which it looks up.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "containment_factory.h"
#include "control_reader.h"
#include "fd_limit.h"
#include "first_contact.h"
#include "job_runner.h"
#include "job_store.h"
#include "log_rate.h"
#include "loop.h"
#include "run_join.h"
#include "shim_service.h"
#include "signal_watch.h"
#include "spare.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "stack_sampler.h"
#include "supervisor_server.h"
#include "uv_clock.h"
#include "uv_launcher.h"

namespace ltd {
namespace {

struct Options {
  std::string state_dir;
  std::string job;
  std::string exec;  // lt-exec
  std::string containment = "auto";
  int64_t restore_window_ms = 600000;
  int64_t stack_budget_ms = 5000;
  uint64_t job_max_log_bytes = 1ull << 30;
  int64_t restart_backoff_ms = 1000;
  std::string log_level = "info";
  std::string auto_heartbeat_dir;
  int64_t auto_heartbeat_timeout_ms = 300000;
  int ltd_fd = -1;                    // a connected socket to ltd, when it started us
  std::string device_program_proven;  // ltd's cgroup with a device program
};

// The fd of the connection to ltd: the only one a supervisor inherits,
// but for a spare's socket (spare.h), down which its jobs come.
constexpr int kLtdFd = 3;
// How long a supervisor waits for an earlier one of its job to go: one
// whose ltd went before watching it, which notices in milliseconds.
constexpr std::chrono::seconds kLockWait{10};

// What a supervisor finds once, not at each job: a spare serves jobs of
// one state dir from one cgroup all its life (Spare::kMaxJobsServed).
struct Found {
  std::string state_dir;  // resolved
  std::optional<ContainmentPlan> places;
};

// What a supervisor sets once, for every job it serves.
void SetUpProcess(const Options& opt) {
  signal(SIGPIPE, SIG_IGN);
  spdlog::set_default_logger(RateLimitedStderrLogger("lt-shim"));
  spdlog::set_level(spdlog::level::from_str(opt.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ lt-shim[%P] %v");
  umask(077);
  // Its ranks hold four fds each of the supervisor's: it takes what the
  // hard limit allows, rather than count on ltd's raised one (the ranks
  // get the limits their job's record names, not this).
  if (absl::Status s = RaiseFdLimit(); !s.ok()) spdlog::warn("{}", std::string(s.message()));
}

int Run(const Options& opt, Found& found) {
  // A stop signal is the job's (its teardown) from here to the job's
  // end, taken on the loop; before and after, it ends this process.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  std::optional<BlockedSignals> blocked(std::in_place, stop_signals);

  if (found.state_dir.empty()) {
    char resolved[PATH_MAX];
    if (realpath(opt.state_dir.c_str(), resolved) == nullptr) {
      spdlog::critical("state dir {}: {}", opt.state_dir, std::strerror(errno));
      return 1;
    }
    found.state_dir = resolved;
  }
  const std::string& resolved = found.state_dir;
  // Started by ltd: its state dir, which it opened.
  absl::StatusOr<JobStore> store =
      opt.ltd_fd >= 0 ? JobStore::Opened(resolved) : JobStore::Open(resolved);
  if (!store.ok()) {
    spdlog::critical("state dir {}: {}", resolved, std::string(store.status().message()));
    return 1;
  }
  // Before anything of the job's is touched: this supervisor's turn on
  // it, and its ltd still there to watch it (first_contact.h).
  auto lock = LockJob(store->SupervisorLock(opt.job), opt.ltd_fd, kLockWait);
  if (!lock.ok()) {
    spdlog::critical("job={} {}", opt.job, std::string(lock.status().message()));
    return 1;
  }
  if (!lock->has_value() || (opt.ltd_fd >= 0 && PeerGone(opt.ltd_fd))) {
    spdlog::warn(
        "job={} the ltd that started this supervisor is gone; the job stays PENDING "
        "for the next ltd",
        opt.job);
    return 0;
  }
  auto job = store->Load(opt.job);
  if (!job.ok() || job->state != JobState::kPending) {
    spdlog::critical("job={} has no record to start from: {}", opt.job,
                     job.ok() ? "it is not PENDING" : std::string(job.status().message()));
    return 1;
  }
  // ltd starts lt-shim-etcd for a multi-node run; this one changes nothing.
  if (!job->spec.nodes.rdzv.empty() && !CanJoinRuns()) {
    spdlog::critical("job={} is a multi-node run, whose supervisor is lt-shim-etcd", opt.job);
    return 1;
  }

  Loop loop;
  UvClock clock(loop.get());
  if (!found.places) found.places = PlanPlaces(*store, opt.device_program_proven);
  const ContainmentPlan plan = ForInstance(*found.places, SupervisorInstance(opt.job));
  // ltd proved the mode it names before it started us.
  auto containment =
      SetUpContainment(loop.get(), opt.containment, plan, /*proven=*/opt.ltd_fd >= 0);
  if (!containment.ok()) {
    spdlog::critical("job={} {}", opt.job, std::string(containment.status().message()));
    return 1;
  }
  auto control = ControlReader::Create(loop.get());
  if (!control.ok()) {
    spdlog::critical("job={} {}", opt.job, std::string(control.status().message()));
    return 1;
  }
  int rc = 0;
  {
    // A multi-node run's join; its fence outlives the runner.
    std::unique_ptr<RunJoin> join = MakeRunJoin(loop);
    UvLauncher launcher(loop.get(), std::move(*containment), opt.exec, std::move(*control));
    UvStackSampler sampler(loop.get(), opt.exec);
    RunnerConfig config;
    config.stack_budget = Millis(opt.stack_budget_ms);
    config.job_max_log_bytes = opt.job_max_log_bytes;
    config.bound_errors_dir = true;  // errors/ a tmpfs of its part of the budget
    config.restart_backoff = Millis(opt.restart_backoff_ms);
    config.extra_rank_env.push_back(plan.rank_marker);
    config.auto_heartbeat_dir = opt.auto_heartbeat_dir;
    config.ltctl_stack = true;
    config.auto_heartbeat_timeout = Millis(opt.auto_heartbeat_timeout_ms);
    ShimService::Options so;
    so.job_id = opt.job;
    so.state_dir = resolved;
    so.restore_window = Millis(opt.restore_window_ms);
    ShimService service(clock, so);
    JobRunner runner(clock, launcher, *store, &sampler, config, std::move(*job), service);

    SupervisorServer server(loop, service);
    const std::string socket_path = store->JobDir(opt.job) + "/supervisor.sock";
    if (absl::Status s = server.Listen(socket_path); !s.ok()) {
      spdlog::critical("job={} cannot serve: {}", opt.job, std::string(s.message()));
      return 1;
    }
    // Until ltd watches the job (and its ranks start), ltd's going ends
    // this supervisor: the job is PENDING still, and the next ltd starts it.
    std::unique_ptr<FirstContact> first_contact;
    bool unwatched = false;
    auto leave_unwatched = [&] {
      if (unwatched) return;
      unwatched = true;
      spdlog::warn(
          "job={} the ltd that started this supervisor went before it started the job; the "
          "job stays PENDING for the next ltd",
          opt.job);
      loop.Stop();
    };
    if (opt.ltd_fd >= 0) {
      auto contact = FirstContact::Watch(loop.get(), opt.ltd_fd, leave_unwatched);
      if (!contact.ok()) {
        spdlog::critical("job={} {}", opt.job, std::string(contact.status().message()));
        return 1;
      }
      first_contact = std::move(*contact);
      if (absl::Status s = server.Adopt(opt.ltd_fd); !s.ok()) {
        spdlog::critical("job={} {}", opt.job, std::string(s.message()));
        return 1;
      }
    }

    auto start = [&] {
      // A watch that came as ltd went starts nothing: the next ltd may
      // have read the record as PENDING already, and starts the job.
      if (first_contact && first_contact->Gone()) leave_unwatched();
      if (unwatched) return;
      if (first_contact) first_contact->Watched();
      if (runner.job().spec.nodes.rdzv.empty()) return runner.Start();
      join->Start(runner);
    };
    service.Begin(runner, start, [&] { loop.Stop(); });
    auto stop = SignalWatch::Start(loop.get(), stop_signals, [&runner](int s) {
      spdlog::warn("job={} {} received: tearing the job down", runner.job().id, sigabbrev_np(s));
      (void)runner.Kill(KillOrder::Teardown(
          "", std::string("its supervisor was stopped (SIG") + sigabbrev_np(s) + ")"));
    });
    if (!stop.ok()) {
      spdlog::warn("job={} {}; a stop signal ends this supervisor without its teardown", opt.job,
                   std::string(stop.status().message()));
      blocked.reset();
    }
    loop.Run();
    if (join) join->Stop();  // this node's end reaches the others first
    if (stop.ok()) stop->reset();
    uv_run(loop.get(), UV_RUN_NOWAIT);
    if (!runner.job().record_error.empty()) {
      spdlog::error("job={} final record not saved: {}", opt.job, runner.job().record_error);
      rc = 1;
    }
    server.Close();
    uv_run(loop.get(), UV_RUN_NOWAIT);
  }
  return rc;
}

}  // namespace
}  // namespace ltd

int main(int argc, char** argv) {
  ltd::SetUpJoiningProcess();
  // lt-shim-etcd is a supervisor like any other to ps, pkill and top.
  if (ltd::CanJoinRuns()) prctl(PR_SET_NAME, "lt-shim");
  ltd::Options opt;
  CLI::App app{"lt-shim: supervises one job of ltd's; ltd starts it"};
  app.add_option("--state-dir", opt.state_dir)->required();
  app.add_option("--job", opt.job)->required();
  app.add_option("--exec", opt.exec)->required();
  app.add_option("--containment", opt.containment);
  app.add_option("--restore-window-ms", opt.restore_window_ms)->check(CLI::NonNegativeNumber);
  app.add_option("--stack-budget-ms", opt.stack_budget_ms)->check(CLI::NonNegativeNumber);
  app.add_option("--job-max-log-bytes", opt.job_max_log_bytes);
  app.add_option("--restart-backoff-ms", opt.restart_backoff_ms)->check(CLI::NonNegativeNumber);
  app.add_option("--log-level", opt.log_level);
  app.add_option("--device-program-proven", opt.device_program_proven,
                 "the cgroup2 cgroup where ltd attached a device program");
  app.add_option("--auto-heartbeat-dir", opt.auto_heartbeat_dir);
  app.add_option("--auto-heartbeat-timeout-ms", opt.auto_heartbeat_timeout_ms)
      ->check(CLI::PositiveNumber);
  bool ltd_fd = false;
  app.add_flag("--ltd-fd", ltd_fd, "fd 3 is a connection to ltd");
  bool spare = false;
  app.add_flag("--spare", spare,
               "a spare: its jobs come down fd 4, each with its connection (--job holds room "
               "for their ids)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "lt-shim: %s; it is started by ltd, not by hand\n", e.what());
    return 2;
  }
  if (ltd_fd) opt.ltd_fd = ltd::kLtdFd;
  ltd::SetUpProcess(opt);
  ltd::Found found;
  if (!spare) return ltd::Run(opt, found);
  opt.ltd_fd = ltd::kLtdFd;  // each job's connection
  ltd::Spare self(argc, argv, opt.ltd_fd);
  for (;;) {
    auto id = self.AwaitJob();
    if (!id) return 0;
    opt.job = std::move(*id);
    const int rc = ltd::Run(opt, found);
    if (rc != 0 || !self.OfferAnother()) return rc;
  }
}
