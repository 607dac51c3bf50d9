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

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <tuple>

#include "auto_instrument.h"
#include "bytes.h"
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
#include "mutex_mode.h"
#include "output_files.h"
#include "output_pattern.h"
#include "ports.h"
#include "rank_console.h"
#include "record_auth.h"
#include "resource_limits.h"
#include "slurm_env.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "stack_sampler.h"
#include "stale_runs.h"
#include "str_util.h"
#include "torchrun_args.h"
#include "torchrun_launch.h"
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

using Options = LaunchArgs;

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
  // `opt`: torchrun's --local-ranks-filter and --redirects, which keep
  // some ranks' lines off the console.
  Terminal(Loop& loop, const Options& opt)
      : loop_(loop), opt_(opt), console_(stdout, stderr, "ltrun: ") {
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
    const bool err = stream == Stream::kStderr;
    if (!opt_.local_ranks_filter.empty() && !opt_.local_ranks_filter.contains(rank)) return;
    if ((opt_.redirects.For(rank) & (err ? 2 : 1)) != 0) return;  // in its log file only
    console_.Line(rank, err, line);
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
  const Options& opt_;
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
  const TorchrunLogs logs = OrDie(TorchrunLogDirs(opt));
  if (!logs.where.empty())
    std::fprintf(stderr, "ltrun: the ranks' logs are in %s\n", logs.where.c_str());
  for (auto [flag, pattern, field] : {std::tuple{"--output", &logs.output, &spec.output},
                                      std::tuple{"--error", &logs.error, &spec.error}}) {
    if (pattern->empty()) continue;
    auto parsed = ParseOutputPattern(flag, *pattern);
    if (!parsed.ok()) Die(std::string(parsed.status().message()));
    // ltrun runs one job, no array task: %a has nothing to fill in.
    if (PatternHasArrayTask(*parsed)) {
      Die(Cat(flag, ": %a is an array task's id, and ltrun runs no array; drop %a"));
    }
    *field = pattern->front() == '/' ? *pattern : Cat(spec.cwd, "/", *pattern);
  }
  spec.umask = CurrentUmask();
  spec.nodes = NodesFor(opt);
  // The ranks get the limits ltrun was started with (its user's), not the
  // fd limit it raises for itself below.
  spec.rlimits = OwnLimits();
  spec.nodes.rdzv_timeout = OrDie(DurationFlag("--rdzv-timeout", opt.rdzv_timeout));
  spec.nodes.rdzv_lease = OrDie(DurationFlag("--rdzv-lease", opt.rdzv_lease));
  if (auto s = rdzv::CheckRdzvAuth(opt.rdzv_auth); !s.ok()) Die(std::string(s.message()));
  if (opt.munge_socket.empty() || opt.munge_socket.front() != '/') {
    Die(Cat("--munge-socket '", opt.munge_socket,
            "' is not an absolute path; give munged's socket"));
  }
  if (!spec.nodes.rdzv.empty()) {
    spec.nodes.rdzv_auth = rdzv::ResolveRdzvAuth(opt.rdzv_auth, opt.munge_socket);
    spec.nodes.munge_socket = opt.munge_socket;
    spec.nodes.etcd_ca = opt.etcd_ca;
    spec.nodes.etcd_cert = opt.etcd_cert;
    spec.nodes.etcd_key = opt.etcd_key;
    spec.nodes.etcd_auth_file = opt.etcd_auth_file;
  }
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
  std::unique_ptr<PrivateEtcd> c10d;
  if (!opt.c10d_endpoint.empty()) c10d = OrDie(HostC10d(opt, Cat(dir, "/c10d-etcd")));
  if (!job.spec.nodes.rdzv.empty()) {
    // As under ltd: the wait is no longer than the job's --time.
    NodeSpec& nodes = job.spec.nodes;
    if (job.spec.time_limit.count() > 0 && nodes.rdzv_timeout > job.spec.time_limit) {
      nodes.rdzv_timeout = job.spec.time_limit;
    }
    // The host of a c10d run is known to the others by the endpoint's address.
    const std::string here = c10d ? c10d->ip() : opt.local_addr;
    auto joined = rdzv::JoinRun(
        job, [&loop](std::function<void()> fn) { loop.Post(std::move(fn)); }, here);
    if (!joined.ok()) Die(std::string(joined.status().message()));
    fence = std::move(*joined);
    spdlog::info("run {}: node {} of {}, master {}:{}", job.spec.nodes.run_id,
                 job.spec.nodes.node_rank, job.spec.nodes.nnodes, job.spec.nodes.master_addr,
                 job.master_port);
  }

  // A stop signal that comes while ltrun starts waits for the loop.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  // torchrun's --signals-to-handle adds to these: a Ctrl-C that killed
  // ltrun outright would leave the ranks running.
  std::vector<int> stops = {SIGINT, SIGTERM, SIGHUP};
  for (int s : opt.stop_signals) {
    if (std::find(stops.begin(), stops.end(), s) == stops.end()) stops.push_back(s);
  }
  for (int s : stops) sigaddset(&stop_signals, s);
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
    // ltrun is its user's own process, whose CPU is theirs: output is read
    // as fast as it comes (a buffer a turn still).
    launcher.set_output_bytes_per_second(0);
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
    Terminal terminal(loop, opt);
    JobRunner runner(clock, launcher, *store, &sampler, config, job, terminal);
    if (fence) runner.SetFence(fence.get());
    // A c10d run's guest: the host's death takes the rendezvous with it.
    std::unique_ptr<C10dHostWatch> host_watch;
    if (fence && !opt.c10d_endpoint.empty() && !c10d) {
      const std::string rdzv = job.spec.nodes.rdzv.substr(std::string_view("etcd://").size());
      const std::string host_ip =
          ResolveIpv4(opt.c10d_endpoint.substr(0, opt.c10d_endpoint.rfind(':')));
      const int host_node = C10dHostNode(rdzv, job.spec.nodes.run_id, host_ip);
      if (host_node >= 0) {
        host_watch = std::make_unique<C10dHostWatch>(
            runner, [&runner] { return runner.job().restart_count; }, host_node, rdzv);
        fence->SetEvents(host_watch.get());
      }
    }

    struct Stop {
      JobRunner* runner;
      ProcessLauncher* launcher;
      int presses = 0;
    } stop{&runner, &launcher};
    std::vector<UvPtr<uv_signal_t>> handlers;
    for (int signum : stops) {
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
    if (!opt.report.empty()) WriteReport(opt.report, ToReportJson(final_job).dump(2) + "\n");
  }
  // This node's end goes to the others before it leaves the run.
  if (fence) fence->Close();
  if (c10d) {
    // The others may still be ending: they need the rendezvous to say so.
    c10d->WaitForOthers(job.spec.nodes.run_id, std::chrono::seconds(30));
    c10d.reset();
  }
  if (temporary) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  } else {
    std::fprintf(stderr, "ltrun: the job's record and log are in %s\n",
                 store->JobDir(job.id).c_str());
  }
  return exit_code;
}

// --help: what ltrun is, its options (torchrun's among them), its usage.
void PrintHelp() {
  std::printf(
      "ltrun: runs one multi-rank job in the foreground, without ltd\n"
      "usage: ltrun [options] [--] PROGRAM [ARGS...]\n"
      "       ltrun [torchrun's options] SCRIPT.py [ARGS...]   (run as python3 -u SCRIPT.py)\n\n"
      "options:\n%s",
      ArgHelp(LtrunArgTable()).c_str());
}

std::optional<std::string> FromEnv(std::string_view name) {
  const char* v = std::getenv(std::string(name).c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

}  // namespace
}  // namespace ltd

int main(int argc, char** argv) {
  ltd::NoMutexDeadlockGraph();
  if (argc == 2 && std::string(argv[1]) == "--list-options") {  // for the bash completion
    std::fputs(ltd::ArgList(ltd::LtrunArgTable()).c_str(), stdout);
    return 0;
  }
  const std::vector<std::string> words(argv + 1, argv + argc);
  auto read = ltd::ReadLaunchArgs(words, ltd::FromEnv, ltd::ThisMachine());
  if (!read.ok()) {
    // "did you mean --x?" is the way on; else --help is.
    const std::string why(read.status().message());
    std::fprintf(stderr, "ltrun: %s%s\n", why.c_str(),
                 why.ends_with('?') ? "" : "; see `ltrun --help`");
    return ltd::kErrorExit;
  }
  ltd::Options& opt = *read;
  if (opt.help) {
    ltd::PrintHelp();
    return 0;
  }
  if (opt.version) {
    std::printf("%s\n", LTD_VERSION_LINE("ltrun"));
    return 0;
  }
  if (opt.command.empty()) {
    std::fprintf(stderr,
                 "ltrun: no program given; usage: ltrun [options] [--] PROGRAM [ARGS...]\n");
    return ltd::kErrorExit;
  }
  if (opt.check_args) return 0;
  if (std::string line = ltd::NoEffectLine(opt); !line.empty()) {
    std::fprintf(stderr, "ltrun: %s\n", line.c_str());
  }
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
