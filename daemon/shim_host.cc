#include "shim_host.h"

#include <fcntl.h>
#include <grpcpp/create_channel_posix.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "pidfd.h"
#include "posix_error.h"
#include "shim.grpc.pb.h"
#include "spawn_attr.h"
#include "spdlog/spdlog.h"
#include "str_util.h"
#include "uv_handle.h"

extern char** environ;

namespace ltd {
namespace {

namespace pb = shim::v1;

// A supervisor on this machine answers in microseconds; one that does not
// answer in this long is wedged, and ltd must not wait on it.
constexpr auto kCallTimeout = std::chrono::seconds(5);
constexpr auto kRewatchDelay = std::chrono::milliseconds(200);

// What one asynchronous unary call to a supervisor needs until its
// callback has run (the callback holds it), with the usual deadline.
template <class Request, class Reply>
struct UnaryCall {
  UnaryCall() { ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout); }
  grpc::ClientContext ctx;
  Request request;
  Reply reply;
};
// How long after a job took the spare the next one starts. Even at idle
// priority a spare's start slows the job that just took the last one:
// ltd's loop waits for its execve while placing that job, and the CPU is
// the job's ranks'. Bench: submit to exit of 8 ranks of /bin/true went
// from 104-108 ms to 91-95 ms. Jobs submitted within this of each other
// start their own supervisors, as without a spare.
constexpr auto kNextSpareDelay = std::chrono::milliseconds(250);
// A job id is a uint64 in decimal.
constexpr size_t kMaxJobIdDigits = 20;

std::optional<Job> ParseRecord(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return JobFromJson(j);
}

std::vector<RankBeat> BeatsOf(const pb::Beats& beats) {
  std::vector<RankBeat> out;
  out.reserve(static_cast<size_t>(beats.ranks_size()));
  for (const pb::RankBeat& b : beats.ranks()) {
    out.push_back(RankBeat{b.rank(), b.last_step(),
                           WallTime(std::chrono::duration_cast<WallTime::duration>(
                               std::chrono::nanoseconds(b.last_heartbeat_at_ns()))),
                           b.steps_per_second()});
  }
  return out;
}

// A job's record carries its user's bytes (a command line of up to 2 MB,
// escaped in JSON up to six times that): past gRPC's default 4 MB a record
// would break the watch for good.
constexpr int kMaxRecordBytes = 64 << 20;

std::shared_ptr<grpc::Channel> SocketChannel(const std::string& path) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxRecordBytes);
  // Local and either there or not: no reconnect backoff worth having.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  return grpc::CreateCustomChannel("unix:" + path, grpc::InsecureChannelCredentials(), args);
}

std::string ExitText(const siginfo_t& info) {
  if (info.si_code == CLD_EXITED) return Cat("exited with code ", info.si_status);
  const char* name = sigabbrev_np(info.si_status);
  return Cat("died of signal ", info.si_status, name != nullptr ? Cat(" (SIG", name, ")") : "");
}

// Reads the supervisor's Watch stream; each event goes to the loop. ltd's
// memory is bounded whatever a supervisor sends: past kMaxInFlight bytes
// handed to the loop and not yet taken, the next read waits for the loop,
// so a supervisor that sends faster than ltd handles blocks on its stream
// (a bounded queue of its own), never grows ltd.
class Watcher final : public grpc::ClientReadReactor<pb::Event> {
 public:
  // `taken` must be called (on any thread) once the event is handled or
  // dropped: it lets the next read go.
  using Sink = std::function<void(pb::Event, std::function<void()> taken)>;
  using End = std::function<void(grpc::Status)>;
  static constexpr size_t kMaxInFlight = 1 << 20;
  // And at most this many events: each output line is fanned out to every
  // attached client on the loop, and what waits in the loop's queue delays
  // every other user's call (lines past it wait in the supervisor, which
  // drops live output for a slow reader; the log has every line).
  static constexpr size_t kMaxEventsInFlight = 64;

  static std::shared_ptr<Watcher> Start(pb::Supervisor::Stub& stub, Sink sink, End end) {
    auto w = std::shared_ptr<Watcher>(new Watcher(std::move(sink), std::move(end)));
    w->self_ = w;  // alive until OnDone
    w->request_.set_beats(true);
    w->request_.set_slim_records(true);
    stub.async()->Watch(&w->ctx_, &w->request_, w.get());
    // Held until a read fails: a read may start late (from the loop, once
    // it took what came before), and OnDone must not come between.
    w->AddHold();
    w->StartRead(&w->event_);
    w->StartCall();
    return w;
  }
  void Cancel() { ctx_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return RemoveHold();  // OnDone follows
    const size_t cost = event_.ByteSizeLong() + 128;
    {
      std::lock_guard lock(mu_);
      in_flight_ += cost;
      ++events_in_flight_;
    }
    pb::Event event = std::move(event_);
    event_.Clear();
    sink_(std::move(event), [self = self_, cost] { self->Taken(cost); });
    {
      std::lock_guard lock(mu_);
      if (in_flight_ >= kMaxInFlight || events_in_flight_ >= kMaxEventsInFlight) {
        parked_ = true;  // the loop is behind: Taken reads on
        return;
      }
    }
    StartRead(&event_);
  }
  void OnDone(const grpc::Status& status) override {
    end_(status);
    self_.reset();  // last: may free this
  }

 private:
  Watcher(Sink sink, End end) : sink_(std::move(sink)), end_(std::move(end)) {}
  void Taken(size_t cost) {
    {
      std::lock_guard lock(mu_);
      in_flight_ -= std::min(in_flight_, cost);
      events_in_flight_ -= std::min<size_t>(events_in_flight_, 1);
      if (!parked_ || in_flight_ >= kMaxInFlight / 2 || events_in_flight_ >= kMaxEventsInFlight / 2)
        return;
      parked_ = false;  // this call alone starts the next read
    }
    StartRead(&event_);
  }
  grpc::ClientContext ctx_;
  pb::WatchRequest request_;
  pb::Event event_;  // written by the read in flight; one at a time
  Sink sink_;
  End end_;
  std::shared_ptr<Watcher> self_;
  std::mutex mu_;
  size_t in_flight_ = 0;         // guarded by mu_: bytes handed to the loop, not yet taken
  size_t events_in_flight_ = 0;  // guarded by mu_
  bool parked_ = false;          // guarded by mu_: no read in flight until Taken
};

}  // namespace

// One supervisor: its process (a pidfd, polled for its exit), its channel,
// the watch on it, and the events of the job table it reports to. Outlives
// its Supervision until the supervisor process is gone.
struct ShimSupervisorHost::Core : std::enable_shared_from_this<Core> {
  ShimSupervisorHost* host = nullptr;
  std::string job_id;
  pid_t pid = 0;
  Fd pidfd;
  UvPtr<uv_poll_t> exit_poll;
  UvPtr<uv_timer_t> rewatch_timer;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Supervisor::Stub> stub;
  std::shared_ptr<Watcher> watcher;
  SupervisionEvents* events = nullptr;  // null once the job table let go
  bool ended = false;
  bool exited = false;  // the process is gone (reaped when it was ours)
  std::string exit_text = "is gone";
  // Output lines: whether the job table wants them, and whether the
  // supervisor sends them as far as ltd knows. Each watch starts with them
  // on (the supervisor's default); ltd says otherwise once the watch has
  // brought its first event, so that the switch cannot overtake the watch.
  // One SetOutput call at a time carries the latest wish: toggles coalesce.
  bool want_output = true;
  bool output_on = true;
  bool output_unknown = false;          // a SetOutput failed: say it again
  bool watch_ready = false;             // the current watch brought an event
  bool output_call = false;             // a SetOutput call is in flight
  bool set_output_unsupported = false;  // a supervisor of an older release
  uint64_t watch_generation = 0;

  ~Core() {
    if (watcher) watcher->Cancel();
  }

  Loop& loop() { return host->loop_; }

  void BeginWatch() {
    ++watch_generation;
    watch_ready = false;
    output_on = true;
    output_unknown = false;
    std::weak_ptr<Core> weak = weak_from_this();
    Loop* l = &loop();
    watcher = Watcher::Start(
        *stub,
        [l, weak](pb::Event event, std::function<void()> taken) {
          l->Post([weak, event = std::move(event), taken = std::move(taken)] {
            if (auto core = weak.lock()) core->OnEvent(event);
            taken();
          });
        },
        [l, weak](grpc::Status status) {
          l->Post([weak, status] {
            if (auto core = weak.lock()) core->OnStreamEnd(status);
          });
        });
  }

  void OnEvent(const pb::Event& event) {
    if (events == nullptr || ended) return;
    switch (event.event_case()) {
      case pb::Event::kJob:
        // The first event of a watch, and then about once a second: the
        // moment to tell the supervisor (again, after a failure) what ltd
        // wants of its output.
        if (!watch_ready && want_output && want_output == output_on && !output_call) {
          PostOutputResumed();  // a watch again: output flows, missed lines are in the log
        }
        watch_ready = true;
        if (want_output != output_on || output_unknown) SendOutputWish();
        if (auto job = ParseRecord(event.job()); job && job->id == job_id) {
          events->OnChanged(*job, Change::kCourse);
        }
        return;
      case pb::Event::kBeats:
        events->OnBeats(BeatsOf(event.beats()));
        return;
      case pb::Event::kOutput:
        events->OnOutput(event.output().rank(),
                         event.output().stderr() ? Stream::kStderr : Stream::kStdout,
                         event.output().data());
        return;
      case pb::Event::kEnded:
        if (auto job = ParseRecord(event.ended());
            job && job->id == job_id && IsFinal(job->state)) {
          End(*job);
        }
        return;
      case pb::Event::EVENT_NOT_SET:
        return;
    }
  }

  void End(const Job& job) {
    ended = true;
    SupervisionEvents* e = std::exchange(events, nullptr);
    if (e != nullptr) e->OnEnded(job);
  }

  void OnStreamEnd(const grpc::Status& status) {
    watcher.reset();
    if (exited) return FinishExit();
    if (ended || events == nullptr || !exit_poll) return;
    // The supervisor lives (its exit would have been seen) but the stream
    // broke: watch again, over its socket.
    spdlog::warn("job={} supervisor stream ended ({}); watching again", job_id,
                 status.error_message());
    if (!rewatch_timer) {
      rewatch_timer =
          UvInit<uv_timer_t>([&](uv_timer_t* t) { return uv_timer_init(loop().get(), t); });
      if (!rewatch_timer) return;
      rewatch_timer->data = this;
    }
    uv_timer_start(
        rewatch_timer.get(),
        [](uv_timer_t* t) {
          auto* core = static_cast<Core*>(t->data);
          if (core->ended || core->events == nullptr || !core->exit_poll) return;
          core->channel = SocketChannel(core->host->store_.JobDir(core->job_id) + "/shim.sock");
          core->stub = pb::Supervisor::NewStub(core->channel);
          core->BeginWatch();
        },
        static_cast<uint64_t>(kRewatchDelay.count()), 0);
  }

  // The supervisor process is gone. What it sent before may still be on
  // its way through the stream (its last output, its final record): the
  // stream's end finishes the job, unless there is no stream.
  void OnExit() {
    exit_poll.reset();
    siginfo_t info{};
    // Ours to reap when this ltd started it; an adopted one is init's.
    if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd.get()), &info,
               WEXITED | WNOHANG) == 0 &&
        info.si_pid != 0) {
      exit_text = ExitText(info);
    }
    exited = true;
    if (!watcher) FinishExit();
  }

  void FinishExit() {
    auto self = shared_from_this();  // Forget may drop the last other reference
    const std::string& how = exit_text;
    if (events != nullptr && !ended) {
      // It may have ended the job and written its final record before ltd
      // read the stream to the end.
      auto record = host->store_.Load(job_id);
      if (record.ok() && IsFinal(record->state)) {
        End(*record);
      } else {
        const int killed = KillInstance(host->plan_, SupervisorInstance(job_id));
        spdlog::error("job={} supervisor pid {} {}; killed {} process(es) it left", job_id, pid,
                      how, killed);
        SupervisionEvents* e = std::exchange(events, nullptr);
        e->OnLost(Cat("its supervisor (pid ", pid, ") ", how, "; ", killed,
                      " process(es) of the job were killed"));
      }
    }
    if (watcher) watcher->Cancel();
    host->Forget(this);
  }

  void WantOutput(bool on) {
    want_output = on;
    if (set_output_unsupported) {
      if (on) PostOutputResumed();  // its output never stopped
      return;
    }
    if (want_output != output_on || output_unknown || output_call) return SendOutputWish();
    // It sends output already (a new watch, or an off that never went):
    // nothing to ask, and nothing was missed.
    if (on) PostOutputResumed();
  }

  void PostOutputResumed() {
    // On a later turn: the job table is in the middle of its own work now.
    loop().Post([weak = weak_from_this()] {
      if (auto core = weak.lock(); core && core->events != nullptr && !core->ended) {
        core->events->OnOutputResumed();
      }
    });
  }

  void SendOutputWish() {
    if (!watch_ready || output_call || set_output_unsupported || ended || events == nullptr) {
      return;
    }
    auto call = std::make_shared<UnaryCall<pb::SetOutputRequest, pb::SetOutputReply>>();
    call->request.set_on(want_output);
    output_call = true;
    std::weak_ptr<Core> weak = weak_from_this();
    Loop* l = &loop();
    stub->async()->SetOutput(
        &call->ctx, &call->request, &call->reply,
        [l, weak, call, on = want_output, generation = watch_generation](grpc::Status s) {
          l->Post([weak, s, on, generation] {
            if (auto core = weak.lock()) core->OutputAnswered(s, on, generation);
          });
        });
  }

  void OutputAnswered(const grpc::Status& s, bool on, uint64_t generation) {
    output_call = false;
    if (generation != watch_generation) {
      // A new watch began meanwhile, with output on: this answer is stale.
      return SendOutputWish();
    }
    if (s.error_code() == grpc::UNIMPLEMENTED) {
      // A supervisor of an earlier release: it sends every line, as it did.
      spdlog::info("job={} its supervisor always sends output (an earlier release)", job_id);
      set_output_unsupported = true;
      output_on = true;
      output_unknown = false;
      if (want_output && events != nullptr && !ended) events->OnOutputResumed();
      return;
    }
    if (!s.ok()) {
      // Wedged or gone: its exit or the watch's end will tell. Asked again
      // with its next record; said once.
      if (!output_unknown) {
        spdlog::warn("job={} supervisor did not take output {}: {}", job_id, on ? "on" : "off",
                     s.error_message());
      }
      output_unknown = true;
      return;
    }
    spdlog::debug("job={} supervisor output {}", job_id, on ? "on" : "off");
    output_on = on;
    output_unknown = false;
    if (on && events != nullptr && !ended) events->OnOutputResumed();
    if (want_output != output_on) SendOutputWish();  // toggled meanwhile: the latest wish
  }

  void Kill(KillOrder order, Supervision::Done done) {
    auto call = std::make_shared<UnaryCall<pb::KillRequest, pb::KillReply>>();
    call->request.set_signal(order.signal);
    call->request.set_all_processes(order.all_processes);
    call->request.set_why(std::move(order.why));
    call->request.set_by(std::move(order.by));
    Loop* l = &loop();
    const std::string id = job_id;
    stub->async()->Kill(
        &call->ctx, &call->request, &call->reply,
        [l, call, id, done = std::move(done)](grpc::Status s) {
          l->Post([s, id, done] {
            if (s.ok()) return done(absl::OkStatus());
            if (s.error_code() == grpc::FAILED_PRECONDITION) {
              return done(absl::FailedPreconditionError(s.error_message()));
            }
            done(absl::UnavailableError(Cat("job ", id, "'s supervisor did not answer (",
                                            s.error_message(), "); try again")));
          });
        });
  }
};

namespace {

class ShimSupervision final : public Supervision {
 public:
  explicit ShimSupervision(std::shared_ptr<ShimSupervisorHost::Core> core)
      : core_(std::move(core)) {}
  ~ShimSupervision() override {
    // The job table lets go (the job ended, or ltd stops and leaves the
    // job to its supervisor): stop watching; the process is still reaped.
    core_->events = nullptr;
    if (core_->watcher) core_->watcher->Cancel();
  }
  void Kill(KillOrder order, Done done) override { core_->Kill(std::move(order), std::move(done)); }
  void SetOutput(bool on) override { core_->WantOutput(on); }

 private:
  std::shared_ptr<ShimSupervisorHost::Core> core_;
};

}  // namespace

ShimSupervisorHost::ShimSupervisorHost(Loop& loop, const JobStore& store, ContainmentPlan plan,
                                       ShimConfig config)
    : loop_(loop), store_(store), plan_(std::move(plan)), config_(std::move(config)) {
  char resolved[PATH_MAX];
  canonical_state_dir_ =
      realpath(store_.state_dir().c_str(), resolved) != nullptr ? resolved : store_.state_dir();
}

ShimSupervisorHost::~ShimSupervisorHost() {
  KillSpare();
  for (const auto& core : cores_) {
    core->events = nullptr;
    core->exit_poll.reset();
    core->rewatch_timer.reset();
    if (core->watcher) core->watcher->Cancel();
  }
}

void ShimSupervisorHost::Forget(Core* core) {
  for (auto it = cores_.begin(); it != cores_.end(); ++it) {
    if (it->get() == core) {
      cores_.erase(it);
      return;
    }
  }
}

std::unique_ptr<Supervision> ShimSupervisorHost::Watch(const std::string& job_id, pid_t pid,
                                                       Fd pidfd,
                                                       std::shared_ptr<grpc::Channel> channel,
                                                       SupervisionEvents& events) {
  auto core = std::make_shared<Core>();
  core->host = this;
  core->job_id = job_id;
  core->pid = pid;
  core->pidfd = std::move(pidfd);
  core->channel = std::move(channel);
  core->stub = pb::Supervisor::NewStub(core->channel);
  core->events = &events;
  core->exit_poll = UvInit<uv_poll_t>(
      [&](uv_poll_t* p) { return uv_poll_init(loop_.get(), p, core->pidfd.get()); });
  if (core->exit_poll) {
    core->exit_poll->data = core.get();
    uv_poll_start(core->exit_poll.get(), UV_READABLE,
                  [](uv_poll_t* p, int, int) { static_cast<Core*>(p->data)->OnExit(); });
  }
  cores_.insert(core);
  core->BeginWatch();
  return std::make_unique<ShimSupervision>(core);
}

std::unique_ptr<Supervision> ShimSupervisorHost::Start(const Job& job, SupervisionEvents& events) {
  auto fail = [&](std::string why) -> std::unique_ptr<Supervision> {
    spdlog::error("job={} cannot start its supervisor: {}", job.id, why);
    events.OnLost(Cat("ltd could not start the job's supervisor: ", why));
    return nullptr;
  };
  // The supervisor starts from the record: placed, with its environment.
  if (auto s = store_.Save(job); !s.ok()) return fail(std::string(s.message()));
  std::optional<Spawned> shim = TakeSpare(job.id);
  if (!shim) {
    auto spawned = Spawn(job.id, nullptr);
    if (!spawned.ok()) return fail(std::string(spawned.status().message()));
    shim = std::move(*spawned);
  }
  PrepareSpare(kNextSpareDelay);
  spdlog::debug("job={} supervisor pid {}", job.id, shim->pid);
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(kMaxRecordBytes);
  auto channel =
      grpc::CreateCustomInsecureChannelFromFd("lt-shim", shim->channel.release(), channel_args);
  return Watch(job.id, shim->pid, std::move(shim->pidfd), std::move(channel), events);
}

absl::StatusOr<ShimSupervisorHost::Spawned> ShimSupervisorHost::Spawn(const std::string& job_id,
                                                                      Fd* assign) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0) {
    return PosixError("socketpair", "a supervisor's connection", errno);
  }
  Fd ours(pair[0]), theirs(pair[1]);
  // A spare's pipe: close-on-exec here, so that only ltd holds the end
  // that writes, and the spare reads EOF (and exits) once ltd is gone.
  Fd spare_reads;
  if (assign != nullptr) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return PosixError("pipe2", "a spare supervisor's pipe", errno);
    spare_reads.reset(p[0]);
    assign->reset(p[1]);
  }
  for (Fd* fd : {&theirs, &spare_reads}) {
    if (fd->valid()) {
      if (absl::Status s = AboveSpawnFds(*fd); !s.ok()) return s;
    }
  }
  // A spare's --job holds room for the id it is given, which it writes
  // over this, so that ps shows whose supervisor it has become.
  const std::string job_arg = assign != nullptr ? std::string(kMaxJobIdDigits, '_') : job_id;
  std::vector<std::string> args = {config_.shim_binary,
                                   "--state-dir",
                                   store_.state_dir(),
                                   "--job",
                                   job_arg,
                                   "--exec",
                                   config_.exec_binary,
                                   "--containment",
                                   config_.containment,
                                   "--restore-window-ms",
                                   std::to_string(config_.restore_window.count()),
                                   "--stack-budget-ms",
                                   std::to_string(config_.stack_budget.count()),
                                   "--restart-backoff-ms",
                                   std::to_string(config_.restart_backoff.count()),
                                   "--job-max-log-bytes",
                                   std::to_string(config_.job_max_log_bytes),
                                   "--log-level",
                                   config_.log_level,
                                   "--auto-heartbeat-dir",
                                   config_.auto_heartbeat_dir,
                                   "--auto-heartbeat-timeout-ms",
                                   std::to_string(config_.auto_heartbeat_timeout.count()),
                                   "--ltd-fd"};
  if (assign != nullptr) args.push_back("--spare");
  std::vector<char*> argv = CStrings(args);
  char* envp[] = {const_cast<char*>("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), nullptr};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, theirs.get(), 3);  // clears close-on-exec
  if (spare_reads.valid()) posix_spawn_file_actions_adddup2(&actions, spare_reads.get(), 4);
  // Its own session: a Ctrl-C or a hangup meant for ltd never reaches it.
  const CleanSpawnAttr attr(/*new_session=*/true);
  pid_t pid = 0;
  const int rc =
      posix_spawn(&pid, config_.shim_binary.c_str(), &actions, attr.get(), argv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return PosixError("posix_spawn", config_.shim_binary, rc);
  // Not reaped until ltd says so: the pid cannot be anyone else's yet.
  Fd pidfd(PidfdOpen(pid));
  if (!pidfd.valid()) {
    const int err = errno;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return PosixError("pidfd_open", "a supervisor", err);
  }
  return Spawned{pid, std::move(pidfd), std::move(ours)};
}

void ShimSupervisorHost::PrepareSpare(std::chrono::milliseconds delay) {
  if (!spares_ || spare_ ||
      (spare_timer_ && uv_is_active(reinterpret_cast<uv_handle_t*>(spare_timer_.get())))) {
    return;
  }
  if (!spare_timer_) {
    spare_timer_ = UvInit<uv_timer_t>([&](uv_timer_t* t) { return uv_timer_init(loop_.get(), t); });
    if (!spare_timer_) return;
    spare_timer_->data = this;
  }
  // At the earliest after what this turn of the loop is doing.
  uv_timer_start(
      spare_timer_.get(),
      [](uv_timer_t* t) { static_cast<ShimSupervisorHost*>(t->data)->StartSpare(); },
      static_cast<uint64_t>(delay.count()), 0);
}

void ShimSupervisorHost::StartSpare() {
  if (!spares_ || spare_) return;
  auto spare = std::make_unique<Spare>();
  auto spawned = Spawn("", &spare->assign);
  if (!spawned.ok()) {
    spdlog::warn("cannot start a spare supervisor ({}); each job's starts with it",
                 std::string(spawned.status().message()));
    return;
  }
  spare->process = std::move(*spawned);
  // Idle priority from now until it has a job: its start-up (mapping,
  // relocating, static initialisers) takes no CPU that work wants. It has
  // one thread until then, whose id is its pid.
  const sched_param idle{};
  if (sched_setscheduler(spare->process.pid, SCHED_IDLE, &idle) != 0) {
    spdlog::debug("spare supervisor pid {} stays at normal priority: {}", spare->process.pid,
                  std::strerror(errno));
  }
  spare->exit_poll = UvInit<uv_poll_t>(
      [&](uv_poll_t* p) { return uv_poll_init(loop_.get(), p, spare->process.pidfd.get()); });
  if (spare->exit_poll) {
    spare->exit_poll->data = this;
    uv_poll_start(spare->exit_poll.get(), UV_READABLE, [](uv_poll_t* p, int, int) {
      static_cast<ShimSupervisorHost*>(p->data)->OnSpareExit();
    });
  }
  spdlog::debug("spare supervisor pid {} started", spare->process.pid);
  spare_ = std::move(spare);
}

void ShimSupervisorHost::OnSpareExit() {
  // It had no job: nothing of anyone's is lost. The next job starts its
  // own supervisor and prepares another spare.
  siginfo_t info{};
  if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(spare_->process.pidfd.get()), &info,
             WEXITED | WNOHANG) != 0 ||
      info.si_pid == 0) {
    return;
  }
  spdlog::warn("spare supervisor pid {} {}", spare_->process.pid, ExitText(info));
  spare_.reset();
}

std::optional<ShimSupervisorHost::Spawned> ShimSupervisorHost::TakeSpare(
    const std::string& job_id) {
  if (!spare_) return std::nullopt;
  spare_->exit_poll.reset();
  // Normal priority before it reads its job: from then on it is the job's
  // supervisor, and starts threads that would inherit the idle policy.
  const sched_param normal{};
  if (sched_setscheduler(spare_->process.pid, SCHED_OTHER, &normal) != 0) {
    spdlog::warn(
        "cannot give the spare supervisor normal priority ({}); supervisors start with "
        "their jobs from now on",
        std::strerror(errno));
    spares_ = false;
    KillSpare();
    return std::nullopt;
  }
  const std::string line = job_id + "\n";
  if (write(spare_->assign.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    KillSpare();  // it died since it was last polled (EPIPE; ltd ignores SIGPIPE)
    return std::nullopt;
  }
  Spawned taken = std::move(spare_->process);
  spare_.reset();
  return taken;
}

void ShimSupervisorHost::KillSpare() {
  if (!spare_) return;
  spare_->exit_poll.reset();
  PidfdSendSignal(spare_->process.pidfd.get(), SIGKILL);
  siginfo_t info{};
  while (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(spare_->process.pidfd.get()),
                &info, WEXITED) != 0 &&
         errno == EINTR) {
  }
  spare_.reset();
}

std::map<std::string, ShimSupervisorHost::Found> ShimSupervisorHost::Probe(
    const std::vector<std::string>& job_ids, std::chrono::milliseconds timeout) {
  struct Call {
    std::string job_id;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pb::Supervisor::Stub> stub;
    grpc::ClientContext ctx;
    pb::HelloRequest request;
    pb::HelloReply reply;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  std::mutex mu;
  std::condition_variable cv;
  size_t pending = 0;
  // All at once, each bounded: one wedged supervisor costs `timeout`, not
  // `timeout` per job.
  for (const std::string& id : job_ids) {
    auto call = std::make_unique<Call>();
    call->job_id = id;
    call->channel = SocketChannel(store_.JobDir(id) + "/shim.sock");
    call->stub = pb::Supervisor::NewStub(call->channel);
    call->ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    Call* c = call.get();
    calls.push_back(std::move(call));
    {
      std::lock_guard lock(mu);
      ++pending;
    }
    c->stub->async()->Hello(&c->ctx, &c->request, &c->reply, [&, c](grpc::Status s) {
      std::lock_guard lock(mu);
      c->status = std::move(s);
      if (--pending == 0) cv.notify_all();
    });
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return pending == 0; });
  }
  std::map<std::string, Found> found;
  for (auto& c : calls) {
    if (!c->status.ok()) {
      spdlog::warn("job={} no supervisor answered: {}", c->job_id, c->status.error_message());
      continue;
    }
    const pb::HelloReply& r = c->reply;
    if (r.api_version() != 1 || r.job_id() != c->job_id || r.state_dir() != canonical_state_dir_ ||
        r.pid() <= 0) {
      spdlog::error(
          "job={} the supervisor on its socket is not its own (api {}, job {}, state dir {}); "
          "not adopted",
          c->job_id, r.api_version(), r.job_id(), r.state_dir());
      continue;
    }
    Fd pidfd(PidfdOpen(r.pid()));
    if (!pidfd.valid()) {
      spdlog::warn("job={} supervisor pid {} is gone: {}", c->job_id, r.pid(),
                   std::strerror(errno));
      continue;
    }
    Found f;
    f.pid = r.pid();
    f.pidfd = std::move(pidfd);
    f.release = r.release();
    f.channel = c->channel;
    found.emplace(c->job_id, std::move(f));
  }
  return found;
}

std::unique_ptr<Supervision> ShimSupervisorHost::Adopt(const Job& job, Found found,
                                                       SupervisionEvents& events) {
  spdlog::info("job={} adopted its supervisor, pid {} (release {})", job.id, found.pid,
               found.release);
  return Watch(job.id, found.pid, std::move(found.pidfd), std::move(found.channel), events);
}

}  // namespace ltd
