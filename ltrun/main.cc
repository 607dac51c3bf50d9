// ltrun: one job in the foreground, as the calling user, with no daemon and
// no root: the supervisor ltd runs per job (supervisor/), on this terminal.
//
//   ltrun --devices 4 --heartbeat-timeout 60s -- python train.py
//
// Output is "[RANK] line" on stdout/stderr; the exit code follows ltctl's
// rules; Ctrl-C tears the job down (a second one kills it at once). Jobs
// are held in a cgroup where this user may make one (inside a delegated
// scope: `systemd-run --user --scope -p Delegate=yes ltrun ...`), else by
// ltrun as a child subreaper. This is what runs inside a cluster
// scheduler's job step, a notebook, or CI.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <tuple>

#include "auto_instrument.h"
#include "bytes.h"
#include "cli_options.h"
#include "containment_factory.h"
#include "control_reader.h"
#include "duration.h"
#include "end_report.h"
#include "fd_limit.h"
#include "file_io.h"
#include "flag_values.h"
#include "helpers.h"
#include "job_limits.h"
#include "job_runner.h"
#include "job_store.h"
#include "join_run.h"
#include "loop.h"
#include "output_files.h"
#include "output_pattern.h"
#include "ports.h"
#include "rank_console.h"
#include "resource_limits.h"
#include "slurm_env.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "stack_sampler.h"
#include "stale_runs.h"
#include "str_util.h"
#include "user_io.h"
#include "uv_clock.h"
#include "uv_handle.h"
#include "uv_launcher.h"
#include "version.h"
#include "warn_signal.h"

extern char** environ;

namespace ltd {
namespace {

// An error of ltrun itself, a wrong command line included: ltctl's code.
constexpr int kErrorExit = 1;

struct Options {
  int devices = 1;
  std::string name;
  std::string heartbeat_timeout = "0", startup_timeout = "0", grace = "10s";
  std::string time_limit = "0", hold_on_hang = "0";
  std::string warn_signal;  // --signal SIG@DUR
  std::string stack_budget = "5s";
  int max_restarts = 0;
  std::string mem, mem_per_rank, cpus;
  std::vector<std::string> env;
  std::string output, error;  // --output, --error patterns
  std::string report;
  std::string state_dir;
  std::string containment = "auto";
  std::string log_level = "error";
  bool auto_heartbeat = true;
  // A multi-node run (torchrun's flags); what is not given comes from
  // Slurm's variables inside a job step, unless --no-slurm.
  std::optional<int> nnodes, node_rank, master_port;
  std::optional<std::string> master_addr, run_id;
  std::string rdzv, rdzv_timeout = "10m", rdzv_lease = "5s";
  bool slurm = true;
  // Tear the job down when ltrun's parent dies (a notebook kernel that
  // crashed or was shut down), as a SIGTERM to ltrun would.
  bool die_with_parent = false;
  std::vector<std::string> command;
};

// The state dir ltrun made for the job (no --state-dir), which a refusal
// after it was made removes as the run's end does; "" until then.
std::string g_temporary_dir;

// The job's final record (--report), whole or not at all: a script polling
// for the file never reads half of it. A path that is there and is not a
// plain file (/dev/stdout, a pipe, a link) is written as it is.
void WriteReport(const std::string& path, const std::string& record) {
  struct stat st {};
  absl::Status s;
  if (lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    std::ofstream out(path, std::ios::trunc);
    out << record;
    if (!out) s = absl::UnknownError(std::strerror(errno));
  } else {
    s = ReplaceFile(path, record, 0666);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "ltrun: cannot write the report to %s: %s\n",
                 DisplayEscape(path, Controls::kEscape).c_str(),
                 DisplayEscape(std::string(s.message()), Controls::kEscape).c_str());
  }
}

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "ltrun: %s\n", DisplayEscape(message, Controls::kEscape).c_str());
  if (!g_temporary_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(g_temporary_dir, ec);
  }
  std::exit(kErrorExit);
}

// A flag's value (flag_values.h), or ltrun ends with why.
template <typename T>
T OrDie(absl::StatusOr<T> value) {
  if (!value.ok()) Die(std::string(value.status().message()));
  return *std::move(value);
}

// The run's nodes: Slurm's job step (inside one), then the flags given,
// which win.
NodeSpec NodesFor(const Options& opt) {
  NodeSpec nodes;
  if (opt.slurm) {
    auto slurm = NodesFromSlurm(ProcessEnv());
    if (!slurm.ok()) Die(std::string(slurm.status().message()));
    if (*slurm) {
      nodes = **slurm;
      spdlog::info("Slurm job step: node {} of {}, master {}:{}, run {}", nodes.node_rank,
                   nodes.nnodes, nodes.master_addr, nodes.master_port, nodes.run_id);
    }
  }
  if (opt.nnodes) nodes.nnodes = *opt.nnodes;
  if (opt.node_rank) nodes.node_rank = *opt.node_rank;
  if (opt.master_addr) nodes.master_addr = *opt.master_addr;
  if (opt.master_port) nodes.master_port = *opt.master_port;
  if (opt.run_id) nodes.run_id = *opt.run_id;
  nodes.rdzv = opt.rdzv;
  return nodes;
}

// The job's lines on this terminal (or pipe, or file): out once the loop
// has read all there is for now, so live wherever they go.
class Terminal final : public SupervisionEvents {
 public:
  explicit Terminal(Loop& loop) : loop_(loop), console_(stdout, stderr, "ltrun: ") {
    // A prepare handle runs just before the loop waits for more I/O: the
    // lines of this turn are all in hand.
    idle_ = UvInit<uv_prepare_t>([&](uv_prepare_t* p) { return uv_prepare_init(loop.get(), p); });
    if (idle_ == nullptr) return;  // then stdio's own buffering, flushed at the end
    idle_->data = &console_;
    uv_prepare_start(idle_.get(),
                     [](uv_prepare_t* p) { static_cast<RankConsole*>(p->data)->Idle(); });
    uv_unref(reinterpret_cast<uv_handle_t*>(idle_.get()));  // keeps no loop alive
  }
  void OnChanged(const Job&, Change) override {}
  void OnOutput(int rank, Stream stream, std::string_view line) override {
    if (rank < 0) return console_.Notice(line);
    console_.Line(rank, stream == Stream::kStderr, line);
  }
  void OnEnded(const Job& job) override {
    console_.Idle();
    ended_ = job;
    loop_.Stop();
  }
  void OnLost(std::string) override {}
  const std::optional<Job>& ended() const { return ended_; }

 private:
  Loop& loop_;
  RankConsole console_;
  UvPtr<uv_prepare_t> idle_;
  std::optional<Job> ended_;
};

int Run(const Options& opt) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("ltrun"));
  spdlog::set_level(spdlog::level::from_str(opt.log_level));
  spdlog::set_pattern("ltrun: %v");

  JobSpec spec;
  spec.devices = opt.devices;
  spec.name = opt.name;
  spec.argv = opt.command;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) == nullptr) Die(Cat("getcwd: ", std::strerror(errno)));
  spec.cwd = cwd;
  for (char** e = environ; *e != nullptr; ++e) spec.env.emplace_back(*e);
  for (const std::string& kv : opt.env) {
    if (absl::Status s = EnvFlag(kv); !s.ok()) Die(std::string(s.message()));
    spec.env.push_back(kv);
  }
  spec.uid = getuid();
  spec.gid = getgid();
  spec.heartbeat_timeout = OrDie(DurationFlag("--heartbeat-timeout", opt.heartbeat_timeout));
  spec.startup_timeout = OrDie(DurationFlag("--startup-timeout", opt.startup_timeout));
  spec.grace = OrDie(DurationFlag("--grace", opt.grace));
  spec.time_limit = OrDie(TimeLimitFlag("--time", opt.time_limit));
  spec.hold_on_hang = OrDie(DurationFlag("--hold-on-hang", opt.hold_on_hang));
  if (!opt.warn_signal.empty())
    spec.warn_signal = OrDie(ParseWarnSignal("--signal", opt.warn_signal));
  spec.max_restarts = opt.max_restarts;
  spec.auto_heartbeat = opt.auto_heartbeat;
  for (auto [flag, pattern, field] : {std::tuple{"--output", &opt.output, &spec.output},
                                      std::tuple{"--error", &opt.error, &spec.error}}) {
    if (pattern->empty()) continue;
    if (auto s = CheckOutputPattern(flag, *pattern); !s.ok()) Die(std::string(s.message()));
    *field = pattern->front() == '/' ? *pattern : Cat(spec.cwd, "/", *pattern);
  }
  spec.nodes = NodesFor(opt);
  // The ranks get the limits ltrun was started with (its user's), not the
  // fd limit it raises for itself below.
  spec.rlimits = OwnLimits();
  spec.nodes.rdzv_timeout = OrDie(DurationFlag("--rdzv-timeout", opt.rdzv_timeout));
  spec.nodes.rdzv_lease = OrDie(DurationFlag("--rdzv-lease", opt.rdzv_lease));
  if (!opt.mem.empty())
    spec.limits.memory_bytes =
        OrDie(ByteSizeFlag("--mem", opt.mem, kMinJobMemory, kMinJobMemoryText));
  if (!opt.mem_per_rank.empty()) {
    spec.limits.memory_per_rank_bytes =
        OrDie(ByteSizeFlag("--mem-per-rank", opt.mem_per_rank, kMinJobMemory, kMinJobMemoryText));
  }
  if (!opt.cpus.empty()) spec.limits.cpu_millis = OrDie(CpusFlag("--cpus", opt.cpus));
  SpecLimits limits;
  limits.slots = 1 << 16;
  if (auto s = ValidateSpec(spec, limits); !s.ok()) Die(std::string(s.message()));
  const Millis stack_budget = OrDie(DurationFlag("--stack-budget", opt.stack_budget));
  if (absl::Status s = RaiseFdLimit(FdsForRanks(static_cast<uint64_t>(spec.devices))); !s.ok())
    Die(Cat("--devices ", spec.devices, ": ", s.message()));

  const std::string exec = FindHelper("lt-exec", LTD_LIBEXEC_FROM_BIN, LTD_LIBEXECDIR);
  if (exec.empty()) Die(HelperMissing("lt-exec", "ltrun"));
  if (!spec.output.empty() || !spec.error.empty()) {
    UserIo user_io(UserIo::Beside(exec));
    if (auto s = OutputFiles::Check(spec, user_io); !s.ok()) Die(std::string(s.message()));
  }

  // The job's record and log: a directory of the user's, removed at the
  // end unless they asked for it (--state-dir).
  std::string dir = opt.state_dir;
  const bool temporary = dir.empty();
  if (temporary) {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = Cat(base != nullptr && *base != '\0' ? base : "/tmp", "/ltrun.XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) Die(Cat("mkdtemp(", tmpl, "): ", std::strerror(errno)));
    dir = tmpl;
    g_temporary_dir = dir;
  }
  auto store = JobStore::Open(dir);
  if (!store.ok()) Die(Cat("state dir ", dir, ": ", store.status().message()));
  auto id = store->TakeId(1);
  if (!id.ok()) Die(std::string(id.status().message()));
  Job job;
  job.id = std::to_string(*id);
  const char* user = std::getenv("USER");
  job.user = user != nullptr ? user : std::to_string(spec.uid);
  job.spec = std::move(spec);
  job.submitted_at = std::chrono::system_clock::now();
  if (auto s = store->CreateJobDir(job.id); !s.ok()) {
    Die(std::string(s.message()));
  }
  // A multi-node run's port is the run's, on node 0's host; a single
  // node's is any free one here unless the user gave one.
  job.master_port = job.spec.nodes.master_port;
  if (!IsMultiNode(job.spec.nodes) && job.master_port == 0) {
    KernelPortAllocator ports;
    auto port = ports.Pick({});
    if (!port.ok()) Die(std::string(port.status().message()));
    job.master_port = *port;
  }
  for (int r = 0; r < job.spec.devices; ++r) job.device_slots.push_back(r);

  // A run that meets at a rendezvous: node rank, master address and port
  // are the run's, agreed before anything starts (Ctrl-C ends the wait).
  Loop loop;
  std::unique_ptr<rdzv::EtcdFence> fence;
  if (!job.spec.nodes.rdzv.empty()) {
    // As under ltd: the wait is no longer than the job's --time.
    NodeSpec& nodes = job.spec.nodes;
    if (job.spec.time_limit.count() > 0 && nodes.rdzv_timeout > job.spec.time_limit) {
      nodes.rdzv_timeout = job.spec.time_limit;
    }
    auto joined =
        rdzv::JoinRun(job, [&loop](std::function<void()> fn) { loop.Post(std::move(fn)); });
    if (!joined.ok()) Die(std::string(joined.status().message()));
    fence = std::move(*joined);
    spdlog::info("run {}: node {} of {}, master {}:{}", job.spec.nodes.run_id,
                 job.spec.nodes.node_rank, job.spec.nodes.nnodes, job.spec.nodes.master_addr,
                 job.master_port);
  }

  // A stop signal that comes while ltrun starts waits for the loop.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_signals, s);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  int exit_code = 1;
  {
    UvClock clock(loop.get());
    const ContainmentPlan plan = PlanContainment(*store, LtrunInstance(getpid()));
    SweepStaleLtruns(plan);
    auto containment = SetUpContainment(loop.get(), opt.containment, plan);
    if (!containment.ok()) Die(std::string(containment.status().message()));
    if (job.spec.limits.any()) {
      // As ltd refuses a submit: never run without the limits asked for.
      SpecLimits here;
      here.slots = 1 << 16;
      const LimitSupport support = ProbeLimitSupport(plan, (*containment)->name());
      here.no_memory_limit = support.memory;
      here.no_cpu_limit = support.cpu;
      here.cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
      if (auto s = ValidateSpec(job.spec, here); !s.ok()) Die(std::string(s.message()));
    }
    auto control = ControlReader::Create(loop.get());
    if (!control.ok()) Die(std::string(control.status().message()));
    UvLauncher launcher(loop.get(), std::move(*containment), exec, std::move(*control));
    UvStackSampler sampler(loop.get(), exec);
    RunnerConfig config;
    config.stack_budget = stack_budget;
    config.extra_rank_env.push_back(plan.rank_marker);
    if (opt.auto_heartbeat) {
      // ltd's module for Python ranks, where this ltrun finds it.
      const std::string dir = FindAutoHeartbeatDir();
      if (std::string problem = AutoHeartbeatDirProblem(dir); problem.empty()) {
        config.auto_heartbeat_dir = dir;
      } else {
        spdlog::warn("automatic heartbeats are off: {}", problem);
      }
    }
    Terminal terminal(loop);
    JobRunner runner(clock, launcher, *store, &sampler, config, job, terminal);
    if (fence) runner.SetFence(fence.get());

    struct Stop {
      JobRunner* runner;
      ProcessLauncher* launcher;
      int presses = 0;
    } stop{&runner, &launcher};
    std::vector<UvPtr<uv_signal_t>> handlers;
    for (int signum : {SIGINT, SIGTERM, SIGHUP}) {
      auto h = UvInit<uv_signal_t>([&](uv_signal_t* s) { return uv_signal_init(loop.get(), s); });
      h->data = &stop;
      uv_signal_start(
          h.get(),
          [](uv_signal_t* s, int signum) {
            auto* st = static_cast<Stop*>(s->data);
            if (++st->presses > 1) {
              std::fprintf(stderr, "ltrun: killing job now\n");
              st->launcher->KillJob(st->runner->job().id);
              return;
            }
            std::fprintf(stderr, "ltrun: tearing the job down (%s again to kill it at once)\n",
                         signum == SIGINT ? "Ctrl-C" : "the signal");
            (void)st->runner->Kill(
                KillOrder::Teardown("", Cat("interrupted (SIG", sigabbrev_np(signum), ")")));
          },
          signum);
      handlers.push_back(std::move(h));
    }
    pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
    runner.Start();
    if (!terminal.ended()) loop.Run();
    handlers.clear();
    const Job& final_job = terminal.ended() ? *terminal.ended() : runner.job();
    PrintEnd(final_job);
    exit_code = final_job.exit_code.value_or(1);
    if (!opt.report.empty()) WriteReport(opt.report, ToJson(final_job).dump(2) + "\n");
  }
  // This node's end goes to the others before it leaves the run.
  if (fence) fence->Close();
  if (temporary) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  } else {
    std::fprintf(stderr, "ltrun: the job's record and log are in %s\n",
                 store->JobDir(job.id).c_str());
  }
  return exit_code;
}

}  // namespace
}  // namespace ltd

int main(int argc, char** argv) {
  ltd::Options opt;
  CLI::App app{"ltrun: runs one multi-rank job in the foreground, without ltd"};
  app.add_option("--devices,-n,--nproc-per-node,--nproc_per_node", opt.devices,
                 "ranks to start (on this node)")
      ->capture_default_str();
  app.add_option("--name", opt.name, "a name for the job");
  app.add_option("--heartbeat-timeout", opt.heartbeat_timeout,
                 "a rank silent this long is hung; 0: off")
      ->capture_default_str();
  app.add_option("--startup-timeout", opt.startup_timeout,
                 "a rank's first heartbeat must come within this; 0: off")
      ->capture_default_str();
  app.add_option("--grace", opt.grace, "SIGTERM to SIGKILL at teardown")->capture_default_str();
  app.add_option("-t,--time", opt.time_limit,
                 "torn down after running this long (exit code 124); 0: no limit")
      ->capture_default_str();
  app.add_option("--hold-on-hang", opt.hold_on_hang,
                 "after a hang report, leave the ranks as they are this long for eu-stack or gdb, "
                 "then tear down (Ctrl-C ends it early); 0: tear down at once")
      ->capture_default_str();
  app.add_option("--signal", opt.warn_signal,
                 "SIG@DUR: send SIG to each rank's main process DUR before --time runs out, "
                 "e.g. USR1@90s");
  app.add_option("--stack-budget", opt.stack_budget,
                 "time a hung job's stacks may take before its teardown")
      ->capture_default_str();
  app.add_option("--max-restarts", opt.max_restarts, "restarts after a failure")
      ->capture_default_str();
  app.add_option("--mem", opt.mem, "memory of the whole job (512M, 4G); OOM-killed past it");
  app.add_option("--mem-per-rank", opt.mem_per_rank, "memory of each rank with its children");
  app.add_option("--cpus", opt.cpus, "CPU time of the whole job, in CPUs (4, 1.5)");
  // One KEY=VALUE per --env, so that `--env K=V PROGRAM` leaves PROGRAM alone.
  app.add_option("--env", opt.env, "KEY=VALUE for every rank (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--output,-o", opt.output,
                 "also write every rank's output to this file: %j job id, %r rank, %n name");
  app.add_option("--error,-e", opt.error, "stderr to this file instead (as --output)");
  app.add_option("--report", opt.report, "write the job's final record (JSON) to this file");
  app.add_option("--state-dir", opt.state_dir,
                 "keep the job's record and log here (default: a temporary dir, removed)");
  app.add_option("--containment", opt.containment, "auto, cgroup, subreaper or process-group")
      ->check(CLI::IsMember({"auto", "cgroup", "subreaper", "process-group"}))
      ->capture_default_str();
  app.add_flag("!--no-auto-heartbeat", opt.auto_heartbeat,
               "do not watch Python ranks for hangs automatically");
  app.add_option("--nnodes", opt.nnodes, "nodes of a multi-node run (torchrun's flag)")
      ->check(CLI::PositiveNumber);
  app.add_option("--node-rank,--node_rank", opt.node_rank,
                 "this node's rank among them, 0..NNODES-1")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--master-addr,--master_addr", opt.master_addr,
                 "node 0's host, the same on every node");
  app.add_option("--master-port,--master_port", opt.master_port, "the run's port on node 0")
      ->check(CLI::Range(1, 65535));
  app.add_option("--run-id,--run_id", opt.run_id, "TORCHELASTIC_RUN_ID, the same on every node");
  app.add_option("--rdzv", opt.rdzv, "meet the other nodes at etcd://HOST:PORT");
  app.add_flag("!--no-slurm", opt.slurm,
               "ignore Slurm's variables (by default a job step's nodes are the run's)");
  app.add_option("--rdzv-timeout,--rdzv_timeout", opt.rdzv_timeout,
                 "fail when the nodes have not met within this")
      ->capture_default_str();
  app.add_option("--rdzv-lease", opt.rdzv_lease,
                 "a node that dies is known gone this long after (etcd lease TTL)")
      ->capture_default_str();
  app.add_option("--log-level", opt.log_level, "ltrun's own messages: info, warn, error")
      ->capture_default_str();
  app.add_flag("--die-with-parent", opt.die_with_parent,
               "tear the job down when the process that started ltrun dies");
  // Hidden: parse the command line and stop (the docs' examples are
  // checked against the parser with it: tests/docs/).
  bool check_args = false;
  app.add_flag("--check-args", check_args)->group("");
  // Everything from PROGRAM on is the program's (`--` before it is optional).
  app.set_version_flag("--version", LTD_VERSION_LINE("ltrun"));
  app.prefix_command();
  app.footer("usage: ltrun [options] [--] PROGRAM [ARGS...]");
  if (ltd::ListOptionsAsked(argc, argv, app)) return 0;  // for the bash completion
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "ltrun: %s; see `ltrun --help`\n", ltd::CliErrorText(e).c_str());
    return ltd::kErrorExit;
  }
  opt.command = app.remaining();
  // An option ltrun does not know stops at PROGRAM for CLI11, which would
  // run `--devcies` as the program; before PROGRAM it is a mistake, as in
  // ltctl (a program whose name starts with '-' comes after `--`).
  if (!opt.command.empty() && opt.command.front().starts_with("-") && opt.command.front() != "--") {
    std::fprintf(stderr, "ltrun: unknown option %s; see `ltrun --help`\n",
                 ltd::DisplayEscape(opt.command.front(), ltd::Controls::kEscape).c_str());
    return ltd::kErrorExit;
  }
  if (!opt.command.empty() && opt.command.front() == "--") opt.command.erase(opt.command.begin());
  if (opt.command.empty()) {
    std::fprintf(stderr,
                 "ltrun: no program given; usage: ltrun [options] [--] PROGRAM [ARGS...]\n");
    return ltd::kErrorExit;
  }
  if (check_args) return 0;
  if (opt.die_with_parent) {
    // SIGTERM, not SIGKILL: ltrun's handler tears the job down with its
    // grace period. A parent that died before prctl took effect left ltrun
    // to another (init, a subreaper): then nothing starts at all.
    const pid_t parent = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) {
      std::fprintf(stderr, "ltrun: prctl(PR_SET_PDEATHSIG): %s\n", std::strerror(errno));
      return ltd::kErrorExit;
    }
    if (getppid() != parent) {
      std::fprintf(stderr, "ltrun: the process that started ltrun is gone; not starting\n");
      return ltd::kErrorExit;
    }
  }
  return ltd::Run(opt);
}
