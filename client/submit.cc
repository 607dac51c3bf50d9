#include "submit.h"

#include <signal.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

#include "absl/status/statusor.h"
#include "bytes.h"
#include "flag_values.h"
#include "follow.h"
#include "job_array.h"
#include "job_limits.h"
#include "rpc_error.h"
#include "str_util.h"
#include "umask.h"
#include "warn_signal.h"

extern char** environ;

namespace ltd {
namespace {

v1::SubmitRequest Request(const SubmitArgs& a) {
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
    if (absl::Status s = EnvFlag(kv); !s.ok()) Die(std::string(s.message()));
    req.add_extra_env(kv);
  }
  if (!a.heartbeat_timeout.empty())
    req.set_heartbeat_timeout_ms(
        OrDie(DurationFlag("--heartbeat-timeout", a.heartbeat_timeout)).count());
  req.set_no_auto_heartbeat(a.no_auto_heartbeat);
  if (!a.startup_timeout.empty())
    req.set_startup_timeout_ms(OrDie(DurationFlag("--startup-timeout", a.startup_timeout)).count());
  req.set_grace_ms(OrDie(DurationFlag("--grace", a.grace)).count());
  if (!a.time_limit.empty())
    req.set_time_limit_ms(OrDie(TimeLimitFlag("--time", a.time_limit)).count());
  if (!a.hold_on_hang.empty())
    req.set_hold_on_hang_ms(OrDie(DurationFlag("--hold-on-hang", a.hold_on_hang)).count());
  if (!a.warn_signal.empty()) {
    const WarnSignal w = OrDie(ParseWarnSignal("--signal", a.warn_signal));
    req.set_warn_signal(w.signal);
    req.set_warn_signal_before_ms(w.before.count());
  }
  req.set_max_restarts(a.max_restarts);
  req.set_detach(a.detach);
  req.set_batched(true);  // output lines come many to an event
  req.set_nnodes(a.nnodes);
  if (a.node_rank) req.set_node_rank(*a.node_rank);
  req.set_master_addr(a.master_addr);
  req.set_master_port(a.master_port);
  req.set_run_id(a.run_id);
  req.set_rdzv(a.rdzv);
  if (!a.rdzv_timeout.empty()) {
    req.set_rdzv_timeout_ms(OrDie(DurationFlag("--rdzv-timeout", a.rdzv_timeout)).count());
  }
  if (!a.rdzv_auth.empty() && a.rdzv_auth != "munge" && a.rdzv_auth != "none") {
    Die("--rdzv-auth '" + a.rdzv_auth + "' is not munge or none; give one of them");
  }
  req.set_rdzv_auth(a.rdzv_auth);
  if (!a.rdzv_lease.empty()) {
    req.set_rdzv_lease_ms(OrDie(DurationFlag("--rdzv-lease", a.rdzv_lease)).count());
  }
  for (const auto& job : a.after) req.add_after(job);
  req.set_dependency(a.dependency);
  // Refused here in ltd's words, before anything is sent (ltd checks again).
  if (!a.array.empty()) {
    (void)OrDie(ParseArraySpec(a.array));
    req.set_array(a.array);
  }
  req.set_output(a.output);
  req.set_error(a.error);
  req.set_umask(CurrentUmask());
  if (!a.mem.empty())
    req.set_mem_bytes(OrDie(ByteSizeFlag("--mem", a.mem, kMinJobMemory, kMinJobMemoryText)));
  if (!a.mem_per_rank.empty()) {
    req.set_mem_per_rank_bytes(
        OrDie(ByteSizeFlag("--mem-per-rank", a.mem_per_rank, kMinJobMemory, kMinJobMemoryText)));
  }
  if (!a.cpus.empty()) req.set_cpu_millis(OrDie(CpusFlag("--cpus", a.cpus)));
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
  return req;
}

// 16 random bytes in hex: this submit's token (SubmitRequest.submit_token).
std::string Token() {
  unsigned char bytes[16];
  if (getrandom(bytes, sizeof bytes, 0) != sizeof bytes)
    Die(std::string("getrandom: ") + std::strerror(errno));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  return token;
}

// How long a submit waits for an ltd that went away before it answered,
// as an attached ltctl waits for a restarting one; and for one whose
// socket no one listens on when it starts (ltd crashed, or is between two
// runs of a restart).
constexpr auto kWaitForLtd = std::chrono::minutes(10);
constexpr auto kWaitForRefused = std::chrono::minutes(1);

// A refusal that means ltd is on its way out (SIGTERM, `ltctl shutdown`):
// ltd's own words for it, or a transport that broke under the request.
bool LtdGoingAway(const grpc::Status& s) {
  if (!LostLtd(s)) return false;
  return s.error_code() != grpc::StatusCode::UNAVAILABLE ||
         s.error_message().starts_with("ltd is shutting down") ||
         s.error_details().empty();  // gRPC's, not ltd's
}

// Waits until ltd takes connections (after a pause: a stopping ltd may
// still accept for a moment); past `deadline` ltctl ends saying `why`.
// `interrupt`: blocked signals (Ctrl-C) that end the wait.
void WaitForLtd(const Globals& g, std::chrono::steady_clock::time_point deadline,
                const sigset_t* interrupt, const std::string& why) {
  constexpr auto kPause = std::chrono::milliseconds(100);
  do {
    if (std::chrono::steady_clock::now() > deadline) Die(why);
    if (interrupt != nullptr) {
      const timespec wait{0, std::chrono::nanoseconds(kPause).count()};
      if (sigtimedwait(interrupt, nullptr, &wait) > 0) {
        Die("interrupted while waiting for ltd; if it took the job before it went, `ltctl ps` "
            "shows it once it is back");
      }
    } else {
      std::this_thread::sleep_for(kPause);
    }
  } while (TryConnect(g.socket) != 0);
}

struct Sent {
  std::unique_ptr<v1::Ltd::Stub> api;
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReaderInterface<v1::JobEvent>> reader;
  std::string id;
  std::optional<v1::LogPosition> at;  // where the job's log starts, when ltd said
};

// Sends the request until ltd accepts it: when ltd goes away before it
// answers, waits (bounded) for it to come back and sends the same request,
// token and all, so that ltd answers with the job it made, if it made one.
Sent Send(const Globals& g, const v1::SubmitRequest& req, const sigset_t* interrupt) {
  // Refused: the socket is there and nothing listens (ltd restarting, or
  // crashed). There is no probe before the connect that sends: a probe
  // answered by an ltd that was then killed made the connect after it
  // fail as if ltd had never run.
  std::optional<std::chrono::steady_clock::time_point> lost_since, refused_since;
  for (;;) {
    Sent sent;
    int gone = 0;
    sent.api = Connect(g, &gone);
    if (sent.api == nullptr && lost_since) {
      // Once ltd went away, it may go again between its answer to the
      // probe and this connect: then wait again.
      WaitForLtd(g, *lost_since + kWaitForLtd, interrupt,
                 "ltd did not come back within 10 minutes; if it took the job before it went, "
                 "`ltctl ps` shows it once it is back");
      continue;
    }
    if (sent.api == nullptr && gone == ECONNREFUSED) {
      if (!refused_since) {
        std::fprintf(stderr,
                     "ltctl: ltd at %s does not answer (it is restarting, or it crashed); "
                     "waiting up to a minute for it\n",
                     g.socket.c_str());
        refused_since = std::chrono::steady_clock::now();
      }
      WaitForLtd(g, *refused_since + kWaitForRefused, interrupt,
                 "ltd is not running at " + g.socket +
                     " (nothing listens on its socket); start it with `systemctl start ltd` (or "
                     "`ltd --socket " +
                     g.socket + "`)");
      continue;
    }
    // Any other failure ends ltctl saying why (unless ltd answers now).
    if (sent.api == nullptr) sent.api = Connect(g);
    sent.ctx = std::make_unique<grpc::ClientContext>();
    sent.reader = sent.api->Submit(sent.ctx.get(), req);
    v1::JobEvent ev;
    if (sent.reader->Read(&ev)) {
      sent.id = ev.accepted();
      if (ev.has_at()) sent.at = ev.at();
      if (lost_since) std::fprintf(stderr, "ltctl: ltd is back: job %s\n", sent.id.c_str());
      return sent;
    }
    const grpc::Status s = sent.reader->Finish();
    if (!LtdGoingAway(s)) DieRpc(g, s);
    if (!lost_since) {
      std::fprintf(stderr,
                   "ltctl: ltd went away before it answered (it is stopping or restarting); "
                   "waiting for it to come back to submit again\n");
      lost_since = std::chrono::steady_clock::now();
    }
    WaitForLtd(g, *lost_since + kWaitForLtd, interrupt,
               "ltd did not come back within 10 minutes; if it took the job before it went, "
               "`ltctl ps` shows it once it is back");
  }
}

}  // namespace

int Submit(const Globals& g, const SubmitArgs& a) {
  v1::SubmitRequest req = Request(a);
  // Ctrl-C while attached: the first tears the job down, ltctl stays to
  // report the outcome; a second one leaves at once. Blocked before gRPC
  // starts any thread, so that only the waiting thread below takes it.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  const bool detach = a.detach || !a.array.empty();
  if (!detach) pthread_sigmask(SIG_BLOCK, &set, nullptr);
  req.set_submit_token(Token());
  Sent sent = Send(g, req, detach ? nullptr : &set);
  auto& reader = sent.reader;
  v1::JobEvent ev;
  const std::string id = sent.id;
  if (a.detach || !a.array.empty()) {
    // An array's tasks run apart (as sbatch's): its id, and how to see them.
    std::printf("%s\n", id.c_str());
    if (!a.array.empty()) {
      std::fprintf(stderr, "ltctl: array %s: its tasks are %s_TASK in `ltctl ps`\n", id.c_str(),
                   id.c_str());
    }
    while (reader->Read(&ev)) {
    }
    // The job is made and its id out: ltd going away now changes neither.
    grpc::Status s = reader->Finish();
    if (!s.ok() && !LostLtd(s)) DieRpc(g, s);
    return 0;
  }
  // Its id first, as ltd knows it: the output below is this job's.
  std::fprintf(
      stderr, "ltd: job %s%s\n", id.c_str(),
      a.name.empty() ? "" : Cat(" (", DisplayEscape(a.name, Controls::kEscape), ")").c_str());
  std::thread([&g, id, set] {
    int sig = 0;
    int presses = 0;
    while (sigwait(&set, &sig) == 0) {
      if (++presses > 1) {
        std::fflush(stdout);  // what was printed, out before leaving
        std::_Exit(130);
      }
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
  return FollowThroughRestarts(g, id, /*output=*/true, /*quiet_end=*/false, reader.get(),
                               std::move(sent.at));
}

}  // namespace ltd
