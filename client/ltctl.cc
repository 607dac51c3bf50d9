// ltctl: the client. Every verb is one RPC to ltd over its Unix socket.
// Exit codes follow SPEC.md: the job's for submit/attach/wait, 1 for an
// error of ltctl or ltd, always with a one-line message saying what to do.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <thread>

#include "bytes.h"
#include "duration.h"
#include "job_json.h"
#include "ltd.grpc.pb.h"
#include "render.h"

extern char** environ;

namespace ltd {
namespace {

constexpr int kErrorExit = 1;

// One line on stderr, whatever bytes `message` quotes.
[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "ltctl: %s\n", DisplayEscape(message, Controls::kEscape).c_str());
  std::exit(kErrorExit);
}

struct Globals {
  std::string socket;
  bool json = false;
};

// 0 when ltd's socket at `path` takes a connection; else why not (errno).
int TryConnect(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return ENAMETOOLONG;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  const int err = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 ? 0 : errno;
  close(fd);
  return err;
}

// Reachability first, with the OS's own words, so that "ltd is not running"
// reads as such rather than as a gRPC transport error.
void CheckReachable(const std::string& path) {
  constexpr size_t kMaxPath = sizeof(sockaddr_un::sun_path) - 1;
  if (path.size() > kMaxPath) {
    Die("socket path " + path + " is longer than the " + std::to_string(kMaxPath) +
        " bytes Unix sockets allow; use a shorter --socket");
  }
  if (const int err = TryConnect(path); err != 0) {
    Die("cannot reach ltd at " + path + ": " + std::strerror(err) +
        "; start it with `ltd --socket " + path + "` or `systemctl start ltd`");
  }
}

std::unique_ptr<v1::Ltd::Stub> Connect(const Globals& g) {
  CheckReachable(g.socket);
  // ltd bounds its replies (List pages, Show's texts); room to spare all the same.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  auto channel =
      grpc::CreateCustomChannel("unix:" + g.socket, grpc::InsecureChannelCredentials(), args);
  // Connected before the first call, trying again for a while: another
  // user's flood of connects may fill ltd's backlog for a moment, and a
  // call would fail at once on that moment.
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    Die("cannot reach ltd at " + g.socket + " within 10s; is it overloaded or stopping?");
  }
  return v1::Ltd::NewStub(channel);
}

void PrintJson(const nlohmann::json& j) {
  std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

[[noreturn]] void DieRpc(const Globals& g, const grpc::Status& s) {
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE &&
      s.error_message().find("connect") != std::string::npos) {
    Die("cannot reach ltd at " + g.socket + ": " + s.error_message());
  }
  Die(s.error_message());
}

Millis DurationFlag(const std::string& flag, const std::string& value) {
  auto d = ParseDuration(value);
  if (!d)
    Die(flag + " '" + value + "' is not a duration; use e.g. 500ms, 10s, 5m, 2h or plain seconds");
  return *d;
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

// Prints one event of a stream. `prefix`: "[R] " before each rank line.
// Returns the job's exit code once `ended` arrives.
std::optional<int> PrintEvent(const v1::JobEvent& ev, bool prefix, bool quiet_end) {
  switch (ev.event_case()) {
    case v1::JobEvent::kOutput: {
      const auto& o = ev.output();
      FILE* out = o.stderr() ? stderr : stdout;
      if (prefix) std::fprintf(out, "[%d] ", o.rank());
      std::fwrite(o.data().data(), 1, o.data().size(), out);
      std::fputc('\n', out);
      if (o.stderr()) std::fflush(stderr);
      return std::nullopt;
    }
    case v1::JobEvent::kLog:
      std::fwrite(ev.log().data(), 1, ev.log().size(), stdout);
      return std::nullopt;
    case v1::JobEvent::kNotice:
      std::fflush(stdout);
      std::fprintf(stderr, "%s\n", DisplayEscape(ev.notice(), Controls::kEscape).c_str());
      return std::nullopt;
    case v1::JobEvent::kEnded: {
      const auto& e = ev.ended();
      std::fflush(stdout);
      if (!quiet_end && e.state() != v1::Job::SUCCEEDED) {
        std::fprintf(stderr, "ltctl: job %s %s: %s (exit code %d)\n", e.job_id().c_str(),
                     v1::Job::State_Name(e.state()).c_str(), DescribeCause(e.root_cause()).c_str(),
                     e.exit_code());
      }
      return e.exit_code();
    }
    default:
      return std::nullopt;
  }
}

int Drain(const Globals& g, grpc::ClientReaderInterface<v1::JobEvent>& reader, bool prefix,
          bool quiet_end = false) {
  v1::JobEvent ev;
  std::optional<int> code;
  while (reader.Read(&ev)) {
    if (auto c = PrintEvent(ev, prefix, quiet_end)) code = c;
  }
  std::fflush(stdout);
  grpc::Status s = reader.Finish();
  if (!s.ok()) DieRpc(g, s);
  return code.value_or(0);
}

// How long an attached ltctl waits for a restarting ltd (its jobs live on
// meanwhile under their supervisors).
constexpr auto kReconnectFor = std::chrono::minutes(10);

// After a stream broke because ltd went away: waits, bounded, until ltd
// accepts connections again (its jobs live on meanwhile). `say`: tell the
// user once; `resume`: the verb to run by hand should ltd not come back.
void WaitForLtd(const Globals& g, const grpc::Status& lost, bool say, const std::string& resume) {
  if (say) {
    std::fprintf(stderr, "ltctl: lost ltd (%s); waiting for it to come back\n",
                 lost.error_message().c_str());
  }
  const auto deadline = std::chrono::steady_clock::now() + kReconnectFor;
  // A stopping ltd may still accept for a moment: wait for it to go first.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  while (TryConnect(g.socket) != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      Die("ltd did not come back within 10 minutes; its jobs may still run: `ltctl " + resume +
          "` once it is back");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Follows job `id` (its output, or only its end) to the end, through
// restarts of ltd: a stream that breaks because ltd went away is opened
// again (Attach or Wait) once ltd is back, and the user is told once.
// `first` is the stream already open (an attached submit's, say).
int FollowThroughRestarts(const Globals& g, const std::string& id, bool output, bool quiet_end,
                          grpc::ClientReaderInterface<v1::JobEvent>* first) {
  std::unique_ptr<v1::Ltd::Stub> api;
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReaderInterface<v1::JobEvent>> owned;
  grpc::ClientReaderInterface<v1::JobEvent>* reader = first;
  for (bool again = false;; again = true) {
    if (reader == nullptr) {
      api = Connect(g);
      ctx = std::make_unique<grpc::ClientContext>();
      v1::JobRef req;
      req.set_job(id);
      owned = output ? api->Attach(ctx.get(), req) : api->Wait(ctx.get(), req);
      reader = owned.get();
    }
    v1::JobEvent ev;
    std::optional<int> code;
    bool first_event = true;
    while (reader->Read(&ev)) {
      if (again && first_event) {
        std::fprintf(stderr, "ltctl: ltd is back; following job %s again\n", id.c_str());
      }
      first_event = false;
      if (auto c = PrintEvent(ev, /*prefix=*/true, quiet_end)) code = c;
    }
    std::fflush(stdout);
    grpc::Status s = reader->Finish();
    if (code) return *code;
    if (s.ok()) return 0;
    const bool gone = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                      s.error_code() == grpc::StatusCode::CANCELLED;
    if (!gone) DieRpc(g, s);
    WaitForLtd(g, s, /*say=*/!again || !first_event, "attach " + id);
    reader = nullptr;
  }
}

struct SubmitArgs {
  int devices = 0;
  std::string name;
  bool detach = false;
  bool no_auto_heartbeat = false;
  std::string heartbeat_timeout, startup_timeout, grace = "10s";
  std::vector<std::string> env;
  int max_restarts = 0;
  // A multi-node run (torchrun's flags); see SubmitRequest.
  int nnodes = 1;
  std::optional<int> node_rank;
  std::string master_addr, run_id, rdzv, rdzv_timeout;
  int master_port = 0;
  std::vector<std::string> after;
  std::vector<std::string> command;
};

int Submit(const Globals& g, const SubmitArgs& a) {
  v1::SubmitRequest req;
  req.set_devices(a.devices);
  req.set_name(a.name);
  // Bytes as the OS gave them, UTF-8 or not; ltd checks them.
  for (const auto& arg : a.command) req.add_argv(arg);
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) == nullptr)
    Die(std::string("cannot read the working directory: ") + std::strerror(errno));
  req.set_cwd(cwd);
  for (char** e = environ; *e != nullptr; ++e) req.add_env(*e);
  for (const auto& kv : a.env) {
    if (kv.find('=') == std::string::npos || kv.front() == '=')
      Die("--env takes KEY=VALUE, got '" + kv + "'");
    req.add_extra_env(kv);
  }
  if (!a.heartbeat_timeout.empty())
    req.set_heartbeat_timeout_ms(DurationFlag("--heartbeat-timeout", a.heartbeat_timeout).count());
  req.set_no_auto_heartbeat(a.no_auto_heartbeat);
  if (!a.startup_timeout.empty())
    req.set_startup_timeout_ms(DurationFlag("--startup-timeout", a.startup_timeout).count());
  req.set_grace_ms(DurationFlag("--grace", a.grace).count());
  req.set_max_restarts(a.max_restarts);
  req.set_detach(a.detach);
  req.set_nnodes(a.nnodes);
  if (a.node_rank) req.set_node_rank(*a.node_rank);
  req.set_master_addr(a.master_addr);
  req.set_master_port(a.master_port);
  req.set_run_id(a.run_id);
  req.set_rdzv(a.rdzv);
  if (!a.rdzv_timeout.empty()) {
    req.set_rdzv_timeout_ms(DurationFlag("--rdzv-timeout", a.rdzv_timeout).count());
  }
  for (const auto& job : a.after) req.add_after(job);
  // This process's resource limits: the ranks get them (ltd lowers them to
  // its own), as a login's limits.conf meant for this user.
  static constexpr std::pair<__rlimit_resource, const char*> kLimits[] = {
      {RLIMIT_AS, "AS"},         {RLIMIT_CORE, "CORE"},   {RLIMIT_CPU, "CPU"},
      {RLIMIT_DATA, "DATA"},     {RLIMIT_FSIZE, "FSIZE"}, {RLIMIT_MEMLOCK, "MEMLOCK"},
      {RLIMIT_NOFILE, "NOFILE"}, {RLIMIT_NPROC, "NPROC"}, {RLIMIT_RSS, "RSS"},
      {RLIMIT_STACK, "STACK"}};
  for (const auto& [resource, name] : kLimits) {
    rlimit lim{};
    if (getrlimit(resource, &lim) != 0) continue;
    v1::ResourceLimit* l = req.add_rlimits();
    l->set_resource(name);
    l->set_soft(lim.rlim_cur);
    l->set_hard(lim.rlim_max);
  }

  // Ctrl-C while attached: the first tears the job down, ltctl stays to
  // report the outcome; a second one leaves at once. Blocked before gRPC
  // starts any thread, so that only the waiting thread below takes it.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  if (!a.detach) pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto api = Connect(g);
  grpc::ClientContext ctx;
  auto reader = api->Submit(&ctx, req);
  v1::JobEvent ev;
  if (!reader->Read(&ev)) DieRpc(g, reader->Finish());
  const std::string id = ev.accepted();
  if (a.detach) {
    std::printf("%s\n", id.c_str());
    while (reader->Read(&ev)) {
    }
    grpc::Status s = reader->Finish();
    if (!s.ok()) DieRpc(g, s);
    return 0;
  }
  std::thread([&g, id, set] {
    int sig = 0;
    int presses = 0;
    while (sigwait(&set, &sig) == 0) {
      if (++presses > 1) std::_Exit(130);
      std::fprintf(stderr, "ltctl: tearing down job %s (Ctrl-C again to leave without waiting)\n",
                   id.c_str());
      auto killer = v1::Ltd::NewStub(
          grpc::CreateChannel("unix:" + g.socket, grpc::InsecureChannelCredentials()));
      grpc::ClientContext kctx;
      kctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      v1::KillRequest kreq;
      kreq.set_job(id);
      v1::KillReply kreply;
      (void)killer->Kill(&kctx, kreq, &kreply);
    }
  }).detach();
  return FollowThroughRestarts(g, id, /*output=*/true, /*quiet_end=*/false, reader.get());
}

std::vector<v1::Job> ListJobs(const Globals& g, bool all) {
  auto api = Connect(g);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::ListRequest req;
  req.set_all(all);
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

int Ps(const Globals& g, bool all) {
  auto jobs = ListJobs(g, all);
  if (g.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& j : jobs) list.push_back(ToJsonValue(j));
    PrintJson(list);
  } else {
    PrintJobTable(jobs, stdout);
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
  auto api = Connect(g);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::JobRef req;
  req.set_job(job);
  v1::Job reply;
  grpc::Status s = api->Show(&ctx, req, &reply);
  if (!s.ok()) DieRpc(g, s);
  if (g.json) {
    PrintJson(ToJsonValue(reply));
  } else {
    PrintJob(reply, stdout);
  }
  return 0;
}

// JOB (an id or a name) as the id ltd resolves it to now.
std::string JobId(const Globals& g, const std::string& job) {
  auto api = Connect(g);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::JobRef req;
  req.set_job(job);
  v1::Job found;
  grpc::Status s = api->Show(&ctx, req, &found);
  if (!s.ok()) DieRpc(g, s);
  return found.id();
}

int Logs(const Globals& g, const std::string& job, int rank, bool follow, int64_t tail) {
  if (tail < 0) Die("--tail must be >= 0");
  if (!follow || tail > 0) {
    auto api = Connect(g);
    grpc::ClientContext ctx;
    v1::LogsRequest req;
    req.set_job(job);
    req.set_rank(rank);
    req.set_follow(follow);
    req.set_tail(tail);
    auto reader = api->Logs(&ctx, req);
    Drain(g, *reader, /*prefix=*/rank < 0, /*quiet_end=*/true);
    return 0;
  }
  // `logs -f` follows the log through restarts of ltd: the log only grows,
  // so the replay after a reconnect goes on from what was printed (counted
  // here) and nothing is shown twice. By id, so no name can change jobs.
  const std::string id = JobId(g, job);
  uint64_t printed_bytes = 0, printed_lines = 0;
  for (bool again = false;; again = true) {
    auto api = Connect(g);
    grpc::ClientContext ctx;
    v1::LogsRequest req;
    req.set_job(id);
    req.set_rank(rank);
    req.set_follow(true);
    auto reader = api->Logs(&ctx, req);
    uint64_t skip_bytes = printed_bytes, skip_lines = printed_lines;
    v1::JobEvent ev;
    bool told = false;
    while (reader->Read(&ev)) {
      if (again && !told) {
        std::fprintf(stderr, "ltctl: ltd is back; following the log of job %s again\n", id.c_str());
        told = true;
      }
      if (ev.has_log()) {
        std::string_view chunk = ev.log();
        const uint64_t drop = std::min<uint64_t>(skip_bytes, chunk.size());
        skip_bytes -= drop;
        chunk.remove_prefix(drop);
        std::fwrite(chunk.data(), 1, chunk.size(), stdout);
        std::fflush(stdout);  // as `tail -f`: out as it comes, into a pipe or file too
        printed_bytes += chunk.size();
        continue;
      }
      if (ev.has_output()) {
        if (skip_lines > 0) {
          --skip_lines;
          continue;
        }
        ++printed_lines;
      }
      PrintEvent(ev, /*prefix=*/rank < 0, /*quiet_end=*/true);
      std::fflush(stdout);
    }
    std::fflush(stdout);
    grpc::Status s = reader->Finish();
    if (s.ok()) return 0;
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
        s.error_code() != grpc::StatusCode::CANCELLED) {
      DieRpc(g, s);
    }
    WaitForLtd(g, s, /*say=*/!again || told, "logs -f " + id);
  }
}

int Follow(const Globals& g, const std::string& job, bool output) {
  // By id, so that a reconnect cannot resolve a name to another job.
  return FollowThroughRestarts(g, JobId(g, job), output, /*quiet_end=*/!output, nullptr);
}

int Kill(const Globals& g, const std::string& job, const std::string& signal) {
  auto api = Connect(g);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::KillRequest req;
  req.set_job(job);
  if (!signal.empty()) req.set_signal(ParseSignal(signal));
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

std::string ParseErrorText(const CLI::App& app, const CLI::ParseError& e) {
  const bool have_verb = !app.get_subcommands().empty();
  for (const std::string& extra : app.remaining(/*recurse=*/true)) {
    if (extra == "--") continue;
    if (extra.starts_with("-")) return "unknown option " + extra;
    if (!have_verb) return "unknown verb '" + extra + "'";
  }
  return e.what();
}

}  // namespace
}  // namespace ltd

int main(int argc, char** argv) {
  using namespace ltd;
  Globals g;
  const char* env_socket = std::getenv("LTD_SOCKET");
  g.socket = env_socket != nullptr && *env_socket != '\0' ? env_socket : "/run/ltd/ltd.sock";

  CLI::App app{"ltctl: run and watch multi-rank training jobs under ltd"};
  app.require_subcommand(1);
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
  submit
      ->add_option("--devices,--nproc-per-node,--nproc_per_node", sa.devices,
                   "number of ranks (on this node), one per device")
      ->required();
  submit->add_option("--name", sa.name, "a name to refer to the job by");
  submit->add_flag("-d,--detach", sa.detach, "print the job id and exit");
  submit->add_option("--heartbeat-timeout", sa.heartbeat_timeout,
                     "hung after this long without a heartbeat");
  submit->add_flag("--no-auto-heartbeat", sa.no_auto_heartbeat,
                   "no automatic heartbeats for Python ranks (ltd watches only the ranks' own)");
  submit->add_option("--startup-timeout", sa.startup_timeout,
                     "hung if no first heartbeat within this");
  submit->add_option("--grace", sa.grace, "SIGTERM to SIGKILL")->capture_default_str();
  // One KEY=VALUE per --env, so that `--env K=V PROGRAM` leaves PROGRAM alone.
  submit->add_option("--env", sa.env, "KEY=VALUE for every rank (repeatable)")
      ->allow_extra_args(false);
  submit->add_option("--max-restarts", sa.max_restarts, "restart the whole job up to N times")
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
  submit
      ->add_option("--after", sa.after,
                   "start once JOB succeeded; cancelled if it fails (repeatable)")
      ->allow_extra_args(false);
  submit
      ->add_option("PROGRAM", sa.command,
                   "the program and its arguments, all passed on as typed (`--` before it is "
                   "optional)")
      ->required();

  bool all = false;
  auto* ps = app.add_subcommand("ps", "running and pending jobs");
  ps->add_flag("-a,--all", all, "include finished jobs");

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

  auto* attach = app.add_subcommand("attach", "stream the job's output; exit with its exit code");
  attach->add_option("JOB", job, "job id or name")->required();
  auto* wait = app.add_subcommand("wait", "block until the job ends; exit with its exit code");
  wait->add_option("JOB", job, "job id or name")->required();

  std::string signal;
  auto* kill = app.add_subcommand("kill", "tear the job down, or send a signal to every rank");
  kill->add_option("JOB", job, "job id or name")->required();
  kill->add_option("--signal,-s", signal, "only send this signal (e.g. USR1) to every rank");
  auto* shutdown =
      app.add_subcommand("shutdown", "root: tear every job down, then stop ltd (maintenance)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "ltctl: %s; see `ltctl --help`\n",
                 DisplayEscape(ParseErrorText(app, e), Controls::kEscape).c_str());
    return kErrorExit;
  }
  auto run = [&] {
    if (submit->parsed()) {
      if (sa.devices < 1) Die("--devices must be at least 1");
      return Submit(g, sa);
    }
    if (ps->parsed()) return Ps(g, all);
    if (show->parsed()) return Show(g, job);
    if (gpus->parsed()) return Gpus(g);
    if (logs->parsed()) return Logs(g, job, rank, follow, tail);
    if (attach->parsed()) return Follow(g, job, true);
    if (wait->parsed()) return Follow(g, job, false);
    if (kill->parsed()) return Kill(g, job, signal);
    if (shutdown->parsed()) return Shutdown(g);
    return kErrorExit;
  };
  const int code = run();
  // Every call has finished: leave without tearing gRPC down (closing the
  // channel, joining its threads), which took a few ms of every command.
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(code);
}
