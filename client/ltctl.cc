// ltctl: the client. Every verb is one RPC to ltd over its Unix socket.
// Exit codes follow docs/protocol.md: the job's for submit/attach/wait, 1 for an
// error of ltctl or ltd, always with a one-line message saying what to do.
#include <fcntl.h>
#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <optional>
#include <thread>

#include "array_view.h"
#include "bytes.h"
#include "cli_options.h"
#include "cli_words.h"
#include "command_line.h"
#include "connection.h"
#include "duration.h"
#include "fd.h"
#include "flag_values.h"
#include "follow.h"
#include "job_array.h"
#include "job_json.h"
#include "job_limits.h"
#include "ltd.grpc.pb.h"
#include "mutex_mode.h"
#include "render.h"
#include "stack_cmd.h"
#include "str_util.h"
#include "submit.h"
#include "version.h"
#include "warn_signal.h"

extern char** environ;

namespace ltd {
namespace {

void PrintJson(const nlohmann::json& j) {
  std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

int ParseSignal(const std::string& text) {
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) {
    const int n = std::atoi(text.c_str());
    if (n > 0 && n < NSIG) return n;
  } else {
    std::string name = text;
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (name.starts_with("SIG")) name = name.substr(3);
    for (int n = 1; n < NSIG; ++n) {
      const char* abbrev = sigabbrev_np(n);
      if (abbrev != nullptr && name == abbrev) return n;
    }
  }
  Die("--signal '" + text + "' is not a signal; use a name such as TERM, INT, USR1 or a number");
}

// `logs --timestamps --since DUR|TIME` as a request's filters.
v1::LogsRequest LogFilters(bool timestamps, const std::string& since) {
  v1::LogsRequest req;
  req.set_timestamps(timestamps);
  if (since.empty()) return req;
  int64_t us = 0;
  if (auto d = ParseDuration(since)) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    us = std::chrono::duration_cast<std::chrono::microseconds>(now - *d).count();
  } else {
    // RFC 3339 in UTC ("Z") or with an offset, fractions allowed.
    std::tm tm{};
    const char* rest = strptime(since.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
    if (rest == nullptr) {
      Die("--since '" + since +
          "' is neither a duration nor a time; use e.g. 10m, 2h or 2026-12-01T17:00:00Z");
    }
    int64_t frac_us = 0;
    if (*rest == '.') {
      int digits = 0;
      for (++rest; std::isdigit(static_cast<unsigned char>(*rest)); ++rest, ++digits) {
        if (digits < 6) frac_us = frac_us * 10 + (*rest - '0');
      }
      for (; digits < 6; ++digits) frac_us *= 10;
    }
    int64_t offset_s = 0;
    if ((*rest == '+' || *rest == '-') && std::strlen(rest) == 6 && rest[3] == ':') {
      offset_s = (std::atoi(rest + 1) * 3600 + std::atoi(rest + 4) * 60) * (*rest == '-' ? -1 : 1);
      rest += 6;
    } else if (*rest == 'Z') {
      ++rest;
    }
    if (*rest != '\0') {
      Die("--since '" + since + "': a time needs its zone, e.g. 2026-12-01T17:00:00Z or +01:00");
    }
    us = (static_cast<int64_t>(timegm(&tm)) - offset_s) * 1000000 + frac_us;
  }
  us = std::max<int64_t>(us, 0);
  req.mutable_since()->set_seconds(us / 1000000);
  req.mutable_since()->set_nanos(static_cast<int32_t>(us % 1000000) * 1000);
  return req;
}

// `ps`'s filters, as squeue's: --me, --user U, --state S[,S]; --no-trunc.
struct PsArgs {
  bool all = false, me = false, no_trunc = false;
  std::vector<std::string> users, states;
};

std::vector<v1::Job> ListJobs(const Globals& g, const PsArgs& a) {
  v1::ListRequest req;
  req.set_all(a.all);
  req.set_me(a.me);
  req.set_no_trunc(a.no_trunc);
  for (const auto& u : a.users) req.add_users(u);
  for (const auto& s : a.states) {
    std::string name = s;
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    v1::Job::State state{};
    if (!v1::Job::State_Parse(name, &state) || state == v1::Job::STATE_UNSPECIFIED)
      Die("--state '" + s +
          "' is not a job state; use PENDING, STARTING, RUNNING, SUCCEEDED, FAILED, CANCELLED, "
          "LOST, TIMEOUT, OUT_OF_MEMORY or NODE_FAIL");
    req.add_states(state);
  }
  auto api = Connect(g);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = api->List(&ctx, req);
  std::vector<v1::Job> jobs;
  v1::ListReply page;
  while (reader->Read(&page)) {
    for (auto& j : *page.mutable_jobs()) jobs.push_back(std::move(j));
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) DieRpc(g, s);
  return jobs;
}

int Ps(const Globals& g, const PsArgs& a) {
  auto jobs = ListJobs(g, a);
  if (g.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& j : jobs) list.push_back(JobToJson(j));
    PrintJson(list);
  } else {
    PrintJobTable(jobs, stdout, /*truncate=*/!a.no_trunc);
  }
  return 0;
}

int Gpus(const Globals& g) {
  auto api = Connect(g);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::GpusReply reply;
  grpc::Status s = api->Gpus(&ctx, v1::GpusRequest(), &reply);
  if (!s.ok()) DieRpc(g, s);
  if (g.json) {
    PrintJson(ToJsonValue(reply));
  } else {
    PrintSlots(reply, stdout);
  }
  return 0;
}

int Show(const Globals& g, const std::string& job) {
  const v1::Job reply = ShowJob(g, job);
  if (g.json) {
    PrintJson(JobToJson(reply));
  } else if (reply.array_tasks_size() > 0) {
    PrintArray(reply, stdout);
  } else {
    PrintJob(reply, stdout);
  }
  return 0;
}

int Follow(const Globals& g, const std::string& job, bool output) {
  const v1::Job shown = ShowJob(g, job);
  // A whole array: `wait` waits for every task; an attach takes one.
  if (shown.array_tasks_size() > 0) {
    if (!output) return WaitArray(g, shown);
    Die(Cat("job ", shown.array_job_id(), " is an array of ", shown.array_tasks_size(),
            " tasks; attach to one task, such as ", ShownId(shown)));
  }
  // By id, so that a reconnect cannot resolve a name to another job.
  return FollowThroughRestarts(g, shown.id(), output, /*quiet_end=*/!output, nullptr);
}

int Kill(const Globals& g, const std::string& job, const std::string& signal, bool all_processes) {
  if (all_processes && signal.empty())
    Die("--all-processes goes with --signal; without one, kill tears the whole job down anyway");
  auto api = Connect(g);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::KillRequest req;
  req.set_job(job);
  if (!signal.empty()) req.set_signal(ParseSignal(signal));
  req.set_all_processes(all_processes);
  v1::KillReply reply;
  grpc::Status s = api->Kill(&ctx, req, &reply);
  if (!s.ok()) DieRpc(g, s);
  std::printf("%s\n", reply.job_id().c_str());
  return 0;
}

// What was wrong, in the user's words. What CLI11 says first is not always
// the mistake: a misspelt option (`submit --devcies 2 ./train`) shows up as
// the required option missing, and a misspelt verb as no verb at all.
int Shutdown(const Globals& g) {
  auto api = Connect(g);
  grpc::ClientContext ctx;
  v1::ShutdownRequest req;
  v1::ShutdownReply reply;
  grpc::Status s = api->Shutdown(&ctx, req, &reply);
  if (!s.ok()) DieRpc(g, s);
  std::fprintf(stderr, "ltctl: every job has ended; ltd is stopping\n");
  return 0;
}

// `drain` and `resume` (root or ltd's --admin-group): where ltd stands after.
int Drain(const Globals& g, const std::optional<std::string>& reason,
          const std::string& deadline = "") {
  auto api = Connect(g);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::DrainReply reply;
  grpc::Status s;
  if (reason) {
    v1::DrainRequest req;
    req.set_reason(*reason);
    if (!deadline.empty()) {
      const Millis d = OrDie(DurationFlag("--deadline", deadline));
      if (d.count() <= 0) Die("--deadline must be more than 0 (e.g. 30m)");
      req.set_deadline_ms(d.count());
    }
    s = api->Drain(&ctx, req, &reply);
  } else {
    s = api->Resume(&ctx, v1::ResumeRequest(), &reply);
  }
  if (!s.ok()) DieRpc(g, s);
  if (reply.draining()) {
    std::printf("ltd is draining%s%s: no job starts; %d running go on, %d pending wait\n",
                reply.reason().empty() ? "" : ": ",
                DisplayEscape(reply.reason(), Controls::kEscape).c_str(), reply.running(),
                reply.pending());
    if (reply.has_deadline()) {
      std::printf("running jobs are torn down at %s (each job's --signal first)\n",
                  TimeText(reply.deadline()).c_str());
    }
  } else {
    std::printf("ltd takes jobs again: %d running, %d pending\n", reply.running(), reply.pending());
  }
  return 0;
}

}  // namespace
}  // namespace ltd

int main(int argc, char** argv) {
  using namespace ltd;
  NoMutexDeadlockGraph();
  Globals g;
  const char* env_socket = std::getenv("LTD_SOCKET");
  g.socket = env_socket != nullptr && *env_socket != '\0' ? env_socket : "/run/ltd/ltd.sock";

  CLI::App app{"ltctl: run and watch multi-rank training jobs under ltd"};
  app.require_subcommand(1);
  app.set_version_flag("--version", LTD_VERSION_LINE("ltctl"));
  // The globals are also taken after the verb (`ltctl show 7 --json`): an
  // option a verb does not know falls through to here. Set before the
  // verbs are added, which inherit it.
  app.fallthrough();
  app.add_option("--socket", g.socket,
                 "ltd's socket (default: $LTD_SOCKET, else /run/ltd/ltd.sock)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_flag("--json", g.json, "print ps and show records as JSON");

  SubmitArgs sa;
  auto* submit = app.add_subcommand("submit", "start a job of N ranks");
  // Everything from PROGRAM on is PROGRAM's, with or without `--`, as with
  // srun, docker run and torchrun: `submit --devices 2 python3 train.py
  // --lr 3e-4 --name x` passes `--lr 3e-4 --name x` on. submit's own
  // options (and the globals) come before PROGRAM.
  submit->positionals_at_end();
  submit->add_option("--devices,--nproc-per-node,--nproc_per_node", sa.devices,
                     "number of ranks (on this node), one per device (required; a #LTD line may "
                     "give it)");
  submit->add_option("--name", sa.name, "a name to refer to the job by");
  submit->add_flag("-d,--detach", sa.detach, "print the job id and exit");
  submit->add_option("--heartbeat-timeout", sa.heartbeat_timeout,
                     "a rank that sends heartbeats of its own (ltworker) is hung past this without "
                     "one; with automatic detection, the job is hung when no rank progresses for "
                     "this (default: ltd's --auto-heartbeat-timeout, 5m)");
  submit->add_flag("--no-auto-heartbeat", sa.no_auto_heartbeat,
                   "no automatic hang detection for Python ranks (on by default: no code change "
                   "needed); only ranks that send heartbeats of their own are watched");
  submit->add_option("--startup-timeout", sa.startup_timeout,
                     "hung if no first heartbeat within this");
  submit->add_option("--grace", sa.grace, "SIGTERM to SIGKILL")->capture_default_str();
  submit->add_option(
      "-t,--time", sa.time_limit,
      "torn down after running this long (exit code 124); default: ltd's --max-time");
  submit->add_option(
      "--hold-on-hang", sa.hold_on_hang,
      "after a hang report, leave the ranks as they are this long for `ltctl stack` or "
      "gdb, then tear down (ltctl kill ends it early)");
  submit->add_option("--signal", sa.warn_signal,
                     "SIG@DUR: send SIG to each rank's main process DUR before the job's end is "
                     "forced (--time, a drain's deadline, `ltctl shutdown`), e.g. USR1@90s");
  // One KEY=VALUE per --env, so that `--env K=V PROGRAM` leaves PROGRAM alone.
  submit->add_option("--env", sa.env, "KEY=VALUE for every rank (repeatable)")
      ->allow_extra_args(false);
  submit
      ->add_option("--max-restarts,--max_restarts", sa.max_restarts,
                   "restart the whole job up to N times")
      ->check(CLI::NonNegativeNumber);
  submit->add_option("--nnodes", sa.nnodes, "nodes of a multi-node run (torchrun's flag)")
      ->check(CLI::PositiveNumber);
  submit
      ->add_option("--node-rank,--node_rank", sa.node_rank,
                   "this node's rank among them, 0..NNODES-1")
      ->check(CLI::NonNegativeNumber);
  submit->add_option("--master-addr,--master_addr", sa.master_addr,
                     "node 0's host, the same on every node");
  submit->add_option("--master-port,--master_port", sa.master_port, "the run's port on node 0")
      ->check(CLI::Range(1, 65535));
  submit->add_option("--run-id,--run_id", sa.run_id, "TORCHELASTIC_RUN_ID, the same on every node");
  submit->add_option("--rdzv", sa.rdzv, "meet the other nodes at etcd://HOST:PORT");
  submit->add_option("--rdzv-timeout,--rdzv_timeout", sa.rdzv_timeout,
                     "fail when the nodes have not met within this (default 10m)");
  submit->add_option("--rdzv-lease,--rdzv_lease", sa.rdzv_lease,
                     "a node that dies is known gone this long after (default 5s)");
  submit->add_option("--rdzv-auth", sa.rdzv_auth,
                     "munge: the node's records in etcd are MUNGE credentials, and only yours "
                     "are believed; none (default: ltd's --rdzv-auth)");
  submit
      ->add_option("--after", sa.after,
                   "start once JOB succeeded; cancelled if it fails (repeatable)")
      ->allow_extra_args(false);
  submit->add_option("--dependency", sa.dependency,
                     "as sbatch's: afterok:JOB[:JOB...], afterany:JOB, afternotok:JOB, "
                     "singleton (your earlier jobs of this --name ended), joined with ','");
  submit->add_option("-o,--output", sa.output,
                     "also write every rank's output to this file, opened as you, as sbatch's -o: "
                     "%j job id, %x name, %t rank, %n node, %N host, %u user, %A array id, "
                     "%a array task, %% a %");
  submit->add_option("--array", sa.array,
                     "as sbatch's: a job per task id (0-15, 1,3,5-7, 0-15:2), %N at most N "
                     "running at once (0-15%4); tasks get LTD_ARRAY_TASK_ID");
  submit->add_option("-e,--error", sa.error, "stderr to this file instead (as --output)");
  submit->add_option("--mem", sa.mem, "memory of the whole job (512M, 4G); OOM-killed past it");
  submit->add_option("--mem-per-rank", sa.mem_per_rank, "memory of each rank with its children");
  submit->add_option("--cpus", sa.cpus, "CPU time of the whole job, in CPUs (4, 1.5)");
  submit
      ->add_option("PROGRAM", sa.command,
                   "the program and its arguments, all passed on as typed (`--` before it is "
                   "optional)")
      ->required();

  PsArgs pa;
  auto* ps = app.add_subcommand("ps", "running and pending jobs");
  ps->add_flag("-a,--all", pa.all, "include finished jobs");
  ps->add_flag("--me", pa.me, "only my jobs");
  ps->add_option("-u,--user", pa.users, "only this user's jobs: a name or uid (repeatable, or U,U)")
      ->delimiter(',')
      ->allow_extra_args(false);
  ps->add_option("-t,--state", pa.states,
                 "only jobs in these states, finished ones too: S[,S] (PENDING, STARTING, "
                 "RUNNING, SUCCEEDED, FAILED, CANCELLED, LOST, TIMEOUT, OUT_OF_MEMORY, "
                 "NODE_FAIL)")
      ->delimiter(',')
      ->allow_extra_args(false);
  ps->add_flag("--no-trunc", pa.no_trunc, "show whole commands, not cut to fit the table");

  std::string job;
  auto* gpus = app.add_subcommand(
      "gpus", "every device slot: free, busy (job, user) or quarantined (who holds its GPU)");
  auto* show = app.add_subcommand("show", "one job: state, ranks, root cause, hang report");
  show->add_option("JOB", job, "job id or name")->required();

  int rank = -1;
  bool follow = false;
  int64_t tail = 0;
  auto* logs = app.add_subcommand("logs", "rank output");
  logs->add_option("JOB", job, "job id or name")->required();
  logs->add_option("--rank", rank, "only this rank's output");
  logs->add_flag("-f,--follow", follow, "follow until the job ends");
  logs->add_option("--tail", tail, "only the last N lines");
  bool timestamps = false;
  std::string since;
  logs->add_flag("-t,--timestamps", timestamps, "each line after the time it reached ltd (UTC)");
  logs->add_option("--since", since,
                   "only lines since DUR ago (10m, 2h) or since TIME (2026-12-01T17:00:00Z)");

  auto* attach = app.add_subcommand("attach", "stream the job's output; exit with its exit code");
  attach->add_option("JOB", job, "job id or name")->required();
  auto* wait = app.add_subcommand("wait", "block until the job ends; exit with its exit code");
  wait->add_option("JOB", job, "job id or name")->required();

  std::string signal;
  bool all_processes = false;
  auto* kill = app.add_subcommand("kill", "tear the job down, or send a signal to every rank");
  kill->add_option("JOB", job, "job id or name")->required();
  kill->add_option("--signal,-s", signal,
                   "only send this signal (e.g. USR1) to each rank's main process, as torchrun "
                   "and `docker kill` do; the job goes on");
  kill->add_flag("--all-processes", all_processes,
                 "with --signal: to every process of each rank (its DataLoader workers too)");
  int stack_rank = -1;
  auto* stack =
      app.add_subcommand("stack",
                         "where each rank of a running job is now: Python or native frames, each "
                         "thread's kernel state; the job goes on");
  stack->add_option("JOB", job, "job id or name")->required();
  auto* stack_rank_opt = stack->add_option("--rank", stack_rank, "only this rank");
  auto* shutdown =
      app.add_subcommand("shutdown", "root: tear every job down, then stop ltd (maintenance)");
  std::string drain_reason;
  auto* drain = app.add_subcommand(
      "drain", "root or admin group: start no job until `resume`; running ones go on");
  drain->add_option("--reason", drain_reason, "what you are doing, shown with every pending job");
  std::string drain_deadline;
  drain->add_option("--deadline", drain_deadline,
                    "tear running jobs down this long from now (e.g. 30m); each job's --signal "
                    "comes its DUR before");
  auto* resume = app.add_subcommand("resume", "root or admin group: end a drain; jobs start again");

  if (ListOptionsAsked(argc, argv, app)) return 0;  // for the bash completion
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "ltctl: %s; see `ltctl --help`\n",
                 DisplayEscape(ParseErrorText(app, e), Controls::kEscape).c_str());
    return kErrorExit;
  }
  // A script's #LTD lines, as sbatch's #SBATCH: parsed again with them
  // before the command line's options.
  if (submit->parsed()) {
    if (std::vector<std::string> extra = ScriptOptions(*submit, sa); !extra.empty()) {
      std::vector<std::string> args(argv, argv + argc);
      auto verb = std::find(args.begin() + 1, args.end(), "submit");
      if (verb != args.end()) args.insert(verb + 1, extra.begin(), extra.end());
      std::vector<char*> again;
      for (std::string& a : args) again.push_back(a.data());
      app.clear();
      try {
        app.parse(static_cast<int>(again.size()), again.data());
      } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "ltctl: %s (with the script's #LTD lines); see `ltctl --help`\n",
                     DisplayEscape(ParseErrorText(app, e), Controls::kEscape).c_str());
        return kErrorExit;
      }
    }
  }
  auto run = [&] {
    if (submit->parsed()) {
      if (submit->get_option("--devices")->count() == 0) Die(NoDevicesText(*submit, sa));
      if (sa.devices < 1) Die("--devices must be at least 1");
      // `--array ''` is a mistake, not one job.
      if (submit->get_option("--array")->count() > 0 && sa.array.empty()) {
        Die(std::string(ParseArraySpec("").status().message()));
      }
      return Submit(g, sa);
    }
    if (ps->parsed()) return Ps(g, pa);
    if (show->parsed()) return Show(g, job);
    if (gpus->parsed()) return Gpus(g);
    if (logs->parsed()) return Logs(g, job, rank, follow, tail, LogFilters(timestamps, since));
    if (attach->parsed()) return Follow(g, job, true);
    if (wait->parsed()) return Follow(g, job, false);
    if (kill->parsed()) return Kill(g, job, signal, all_processes);
    if (stack->parsed()) {
      if (stack_rank_opt->count() == 0) return StackCommand(g, job, std::nullopt);
      if (stack_rank < 0) Die("--rank must be 0 or more (a rank of the job)");
      return StackCommand(g, job, stack_rank);
    }
    if (shutdown->parsed()) return Shutdown(g);
    if (drain->parsed()) return Drain(g, drain_reason, drain_deadline);
    if (resume->parsed()) return Drain(g, std::nullopt);
    return kErrorExit;
  };
  const int code = run();
  // Every call has finished: leave without tearing gRPC down (closing the
  // channel, joining its threads), which took a few ms of every command.
  FlushConsole();
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(code);
}
