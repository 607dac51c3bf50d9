#include "shim_link.h"

#include <signal.h>
#include <sys/wait.h>

#include <utility>

#include "shim_record.h"
#include "shim_spawner.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

namespace pb = shim::v1;

constexpr auto kRewatchDelay = std::chrono::milliseconds(200);

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

}  // namespace

class ShimLink::Supervised final : public Supervision {
 public:
  explicit Supervised(std::shared_ptr<ShimLink> link) : link_(std::move(link)) {}
  ~Supervised() override {
    // The job table lets go (the job ended, or ltd stops and leaves the
    // job to its supervisor): stop watching; the process is still reaped.
    link_->events_ = nullptr;
    link_->channel_->Cancel();
  }
  void Kill(KillOrder order, Done done) override { link_->Kill(std::move(order), std::move(done)); }
  void SetOutput(bool on) override { link_->WantOutput(on); }
  void Stacks(std::optional<int> rank, Millis budget, StacksDone done) override {
    link_->Stacks(rank, budget, std::move(done));
  }

 private:
  std::shared_ptr<ShimLink> link_;
};

ShimLink::ShimLink(const Context& context, std::string job_id, pid_t pid, Fd pidfd,
                   std::unique_ptr<ShimChannel> channel, SupervisionEvents& events)
    : context_(context),
      job_id_(std::move(job_id)),
      pid_(pid),
      pidfd_(std::move(pidfd)),
      channel_(std::move(channel)),
      events_(&events),
      output_(job_id_) {}

ShimLink::~ShimLink() { channel_->Cancel(); }

std::shared_ptr<ShimLink> ShimLink::Watch(const Context& context, std::string job_id, pid_t pid,
                                          Fd pidfd, std::unique_ptr<ShimChannel> channel,
                                          SupervisionEvents& events, bool from_start) {
  std::shared_ptr<ShimLink> link(
      new ShimLink(context, std::move(job_id), pid, std::move(pidfd), std::move(channel), events));
  link->exit_poll_ = UvInit<uv_poll_t>(
      [&](uv_poll_t* p) { return uv_poll_init(context.loop.get(), p, link->pidfd_.get()); });
  if (link->exit_poll_) {
    link->exit_poll_->data = link.get();
    uv_poll_start(link->exit_poll_.get(), UV_READABLE,
                  [](uv_poll_t* p, int, int) { static_cast<ShimLink*>(p->data)->OnExit(); });
  }
  link->BeginWatch(from_start);
  return link;
}

std::unique_ptr<Supervision> ShimLink::SupervisionOf(std::shared_ptr<ShimLink> link) {
  return std::make_unique<Supervised>(std::move(link));
}

void ShimLink::Detach() {
  events_ = nullptr;
  exit_poll_.reset();
  rewatch_timer_.reset();
  channel_->Cancel();
}

void ShimLink::BeginWatch(bool from_start) {
  output_.NewWatch(from_start);
  std::weak_ptr<ShimLink> weak = weak_from_this();
  watching_ = true;
  channel_->Watch(
      [weak](const pb::Event& event) {
        if (auto link = weak.lock()) link->OnEvent(event);
      },
      [weak](std::string error) {
        if (auto link = weak.lock()) link->OnStreamEnd(error);
      });
}

void ShimLink::OnEvent(const pb::Event& event) {
  if (!Reporting()) return;
  switch (event.event_case()) {
    case pb::Event::kJob:
    case pb::Event::kEnded:
    case pb::Event::kRecord: {
      std::optional<ReceivedRecord> got = RecordOf(event);
      if (!got || got->job.id != job_id_) return;
      if (got->final_record) {
        if (IsFinal(got->job.state)) End(got->job);
        return;
      }
      // The first record of a watch, and then about once a second: the
      // moment to tell the supervisor (again, after a failure) what ltd
      // wants of its output.
      Carry(output_.OnRecord());
      events_->OnChanged(got->job, Change::kCourse);
      return;
    }
    case pb::Event::kBeats:
      events_->OnBeats(BeatsOf(event.beats()));
      return;
    case pb::Event::kOutput:
      events_->OnOutput(event.output().rank(),
                        event.output().stderr() ? Stream::kStderr : Stream::kStdout,
                        event.output().data());
      return;
    case pb::Event::EVENT_NOT_SET:
      return;
  }
}

void ShimLink::End(const Job& job) {
  ended_ = true;
  SupervisionEvents* e = std::exchange(events_, nullptr);
  if (e != nullptr) e->OnEnded(job);
}

void ShimLink::OnStreamEnd(const std::string& error) {
  watching_ = false;
  if (exited_) return FinishExit();
  if (!Reporting() || !exit_poll_) return;
  // The supervisor lives (its exit would have been seen) but the watch
  // broke: watch again, over its socket.
  spdlog::warn("job={} the watch of its supervisor ended ({}); watching again", job_id_,
               error.empty() ? "before the job did" : error);
  if (!rewatch_timer_) {
    rewatch_timer_ =
        UvInit<uv_timer_t>([&](uv_timer_t* t) { return uv_timer_init(context_.loop.get(), t); });
    if (!rewatch_timer_) return;
    rewatch_timer_->data = this;
  }
  uv_timer_start(
      rewatch_timer_.get(), [](uv_timer_t* t) { static_cast<ShimLink*>(t->data)->Rewatch(); },
      static_cast<uint64_t>(kRewatchDelay.count()), 0);
}

void ShimLink::Rewatch() {
  if (!Reporting() || !exit_poll_) return;
  channel_ = channel_->Reopen();
  BeginWatch();
}

// The supervisor process is gone. What it sent before may still be on its
// way through the stream (its last output, its final record): the
// stream's end finishes the job, unless there is no stream.
void ShimLink::OnExit() {
  exit_poll_.reset();
  siginfo_t info{};
  // Ours to reap when this ltd started it; an adopted one is init's.
  if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info,
             WEXITED | WNOHANG) == 0 &&
      info.si_pid != 0) {
    exit_text_ = ExitText(info);
  }
  exited_ = true;
  if (!watching_) FinishExit();
}

bool ShimLink::Released() {
  if (exited_) return false;
  exit_poll_.reset();
  exit_text_ = "said it was free for another job";
  exited_ = true;
  if (!watching_) FinishExit();
  return true;
}

void ShimLink::FinishExit() {
  auto self = shared_from_this();  // `gone` may drop the last other reference
  if (Reporting()) {
    // It may have ended the job and written its final record before ltd
    // read the stream to the end.
    auto record = context_.store.Load(job_id_);
    if (record.ok() && IsFinal(record->state)) {
      End(*record);
    } else {
      const int killed = KillInstance(context_.plan, SupervisorInstance(job_id_));
      spdlog::error("job={} supervisor pid {} {}; killed {} process(es) it left", job_id_, pid_,
                    exit_text_, killed);
      SupervisionEvents* e = std::exchange(events_, nullptr);
      e->OnLost(Cat("its supervisor (pid ", pid_, ") ", exit_text_, "; ", killed,
                    " process(es) of the job were killed"));
    }
  }
  channel_->Cancel();
  context_.gone(this);
}

void ShimLink::WantOutput(bool on) { Carry(output_.Want(on)); }

void ShimLink::Carry(const OutputSwitch::Actions& actions, bool now) {
  if (!Reporting()) return;  // nobody listens any more
  if (actions.ask) SendOutputWish(*actions.ask);
  if (!actions.resumed) return;
  if (now) {
    if (Reporting()) events_->OnOutputResumed(actions.missed);
    return;
  }
  // On a later turn: the job table is in the middle of its own work now.
  context_.loop.Post([weak = weak_from_this(), missed = actions.missed] {
    if (auto link = weak.lock(); link && link->Reporting()) link->events_->OnOutputResumed(missed);
  });
}

void ShimLink::SendOutputWish(bool on) {
  std::weak_ptr<ShimLink> weak = weak_from_this();
  channel_->SetOutput(on, [weak, on, generation = output_.generation()](
                              absl::StatusOr<pb::SetOutputReply> got) {
    auto link = weak.lock();
    if (!link) return;
    const OutputSwitch::Answer answer = got.ok() ? OutputSwitch::Answer::kOk
                                        : absl::IsUnimplemented(got.status())
                                            ? OutputSwitch::Answer::kUnimplemented
                                            : OutputSwitch::Answer::kFailed;
    link->Carry(link->output_.Answered(answer, on, generation, std::string(got.status().message())),
                /*now=*/true);
  });
}

void ShimLink::Stacks(std::optional<int> rank, Millis budget, Supervision::StacksDone done) {
  pb::StackRequest request;
  if (rank) request.set_rank(*rank);
  request.set_budget_ms(budget.count());
  const std::string id = job_id_;
  channel_->Stack(request, [id, done = std::move(done)](absl::StatusOr<pb::StackReply> got) {
    if (absl::IsUnimplemented(got.status())) {
      return done(absl::FailedPreconditionError(
          Cat("job ", id,
              "'s supervisor is of an earlier release, which cannot take stacks; the job's next "
              "start can")));
    }
    if (absl::IsInvalidArgument(got.status()) || absl::IsResourceExhausted(got.status()) ||
        absl::IsFailedPrecondition(got.status())) {
      return done(got.status());
    }
    if (!got.ok()) {
      return done(absl::UnavailableError(Cat(
          "job ", id, "'s supervisor did not answer (",
          absl::IsDeadlineExceeded(got.status()) ? "past its budget" : "it may be ending", ")")));
    }
    LiveStacks out;
    out.took = Millis(got->took_ms());
    for (const pb::RankStack& r : got->ranks()) {
      out.ranks.push_back(
          RankStack{r.rank(), r.pid(), r.state(), r.kind(), r.frames(), r.kernel(), r.note()});
    }
    done(std::move(out));
  });
}

void ShimLink::Kill(KillOrder order, Supervision::Done done) {
  pb::KillRequest request;
  request.set_signal(order.signal);
  request.set_all_processes(order.all_processes);
  request.set_why(std::move(order.why));
  request.set_by(std::move(order.by));
  request.set_warn(std::move(order.warn));
  const std::string id = job_id_;
  channel_->Kill(request, [id, done = std::move(done)](absl::StatusOr<pb::KillReply> got) {
    if (got.ok()) return done(absl::OkStatus());
    if (absl::IsFailedPrecondition(got.status())) return done(got.status());
    done(absl::UnavailableError(
        Cat("job ", id, "'s supervisor did not answer (", got.status().message(), "); try again")));
  });
}

}  // namespace ltd
