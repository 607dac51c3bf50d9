#include "service.h"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>

#include "admin_limits.h"
#include "api_convert.h"
#include "bytes.h"
#include "event_stream.h"
#include "job_store.h"
#include "list_filter.h"
#include "log_replay.h"
#include "ltd_status.h"
#include "output_files.h"
#include "page_stream.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

// How long `ltctl stack` lets a job's supervisor take: eu-stack on every
// native rank at once, each Python rank's faulthandler dump. bench/ has
// what it takes (the target: 2 s for 8 ranks).
constexpr Millis kStackBudget{5000};

std::string UserName(uid_t uid) {
  passwd pw{};
  passwd* found = nullptr;
  char buf[1024];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr) return pw.pw_name;
  return std::to_string(uid);
}

// `hide`: for a caller who may not read the job's details (another
// user's `wait`, --private-data): the root cause's kind, not its text.
v1::JobEvent EndedEvent(const Job& job, bool hide = false) {
  v1::JobEvent ev;
  FillEnded(job, ev.mutable_ended());
  if (hide && ev.ended().has_root_cause()) {
    ev.mutable_ended()->mutable_root_cause()->clear_message();
  }
  return ev;
}

absl::Status MayControl(const PeerCreds& who, const Job& job) {
  if (who.uid == 0 || who.uid == job.spec.uid) return absl::OkStatus();
  return absl::PermissionDeniedError(
      Cat("job ", job.id, " belongs to ", job.user, "; only its owner or root may do that"));
}

// A `wait`'s stream: the job's start and end, no output (an attach reads
// the log: LogReplay). Loop thread only.
class EndObserver final : public JobObserver {
 public:
  // `hide`: the ended event without what HideOthersDetails hides.
  EndObserver(std::shared_ptr<EventStream::Handle> out, bool hide)
      : out_(std::move(out)), hide_(hide) {}
  bool WantsOutput() const override { return false; }
  void OnOutput(int, Stream, std::string_view) override {}
  void OnStarted(const Job& job) override {
    v1::JobEvent ev;
    ev.set_started(job.id);
    out_->Push(std::move(ev));
  }
  void OnEnded(const Job& job) override {
    out_->PushAndFinish(EndedEvent(job, hide_), grpc::Status::OK);
  }

 private:
  std::shared_ptr<EventStream::Handle> out_;
  const bool hide_;
};

}  // namespace

grpc::Status ToGrpc(const absl::Status& s) {
  // absl and gRPC both number their codes after google.rpc.Code.
  static_assert(static_cast<int>(absl::StatusCode::kFailedPrecondition) ==
                static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
  if (s.ok()) return grpc::Status::OK;
  // Messages may quote what a user sent (a name, a path): one line of text,
  // marked as ltd's own so that clients show it (rpc/ltd_status.h).
  return grpc::Status(
      static_cast<grpc::StatusCode>(s.code()),
      DisplayEscape(std::string_view(s.message().data(), s.message().size()), Controls::kEscape),
      std::string(kLtdStatusMark));
}

absl::StatusOr<PeerCreds> LtdService::Caller(grpc::CallbackServerContext* ctx) const {
  auto who = listener_.Lookup(ctx->peer());
  if (!who) return absl::PermissionDeniedError("cannot tell who is calling");
  return *who;
}

absl::StatusOr<PeerCreds> LtdService::JobCaller(grpc::CallbackServerContext* ctx,
                                                const std::string& ref) const {
  auto who = Caller(ctx);
  if (!who.ok()) return who;
  if (auto s = CheckJobRef(ref); !s.ok()) return s;
  return who;
}

template <class Stream>
std::optional<PeerCreds> LtdService::StreamCaller(grpc::CallbackServerContext* ctx, Stream* stream,
                                                  const std::string* ref) {
  auto who = Caller(ctx);
  if (!who.ok()) {
    stream->handle()->Finish(ToGrpc(who.status()));
    return std::nullopt;
  }
  auto ticket = quota_.Take(who->uid);
  if (!ticket.ok()) {
    stream->handle()->Finish(ToGrpc(ticket.status()));
    return std::nullopt;
  }
  stream->Keep(std::move(*ticket));
  if (ref != nullptr) {
    if (auto s = CheckJobRef(*ref); !s.ok()) {
      stream->handle()->Finish(ToGrpc(s));
      return std::nullopt;
    }
  }
  return *who;
}
// List's, in service_views.cc.
template std::optional<PeerCreds> LtdService::StreamCaller(grpc::CallbackServerContext*,
                                                           PageStream*, const std::string*);

absl::StatusOr<const Job*> LtdService::JobFor(const std::string& ref, const PeerCreds& who,
                                              bool control) const {
  auto job = manager_.Resolve(ref, who.uid);
  if (!job.ok() || !control) return job;
  if (auto s = MayControl(who, **job); !s.ok()) return s;
  return job;
}

void LtdService::CancelLaunched(const std::string& id) {
  // A stream that ends with the job (its `ended` went out) or because
  // ltd stops (the job is the next ltd's) cancels nothing.
  if (closed_) return;
  const Job* job = manager_.Find(id);
  if (job == nullptr || IsFinal(job->state)) return;
  spdlog::info("job={} its client went away: tearing it down (cancel_on_disconnect)", id);
  manager_.Kill(id,
                KillOrder::Teardown(job->user, "cancelled: the client that launched it went away"),
                [id](absl::Status s) {
                  if (!s.ok()) {
                    spdlog::debug("job={} cancel on disconnect: {}", id, std::string(s.message()));
                  }
                });
}

void LtdService::UnobserveWhenGone(EventStream::Handle& out, const std::string& id,
                                   JobManager::ObserverId oid) {
  auto gone = [this, id, oid] { manager_.Unobserve(id, oid); };
  if (!out.OnGone([this, gone] { loop_.Post(gone); })) gone();  // gone already; we are on the loop
}

grpc::ServerWriteReactor<v1::JobEvent>* LtdService::Submit(grpc::CallbackServerContext* ctx,
                                                           const v1::SubmitRequest* req) {
  auto* stream = new EventStream();
  auto out = stream->handle();
  auto who = StreamCaller(ctx, stream);
  if (!who) return stream;
  if (closed_) {
    out->Finish(ToGrpc(absl::UnavailableError("ltd is shutting down")));
    return stream;
  }
  // The admin's limits for the caller (limits.conf; root's own files, read
  // here): the request may lower them, never raise them.
  auto checked = SpecFromRequest(*req, AdminLimits(who->uid, who->gid));
  if (!checked.ok()) {
    out->Finish(ToGrpc(checked.status()));
    return stream;
  }
  JobSpec spec = std::move(*checked);
  spec.uid = who->uid;
  spec.gid = who->gid;
  spec.groups = who->groups;
  // An array's tasks run apart, as sbatch's: its submit is never attached.
  const bool detach = req->detach() || !req->array().empty();
  const bool cancel = req->cancel_on_disconnect();
  const bool batched = req->batched();
  std::string user = UserName(who->uid);
  if (!OutputFiles::NeedsCheck(spec)) {
    Accept(std::move(spec), std::move(user), out, detach, cancel, batched);
    return stream;
  }
  // The user's --output and --error, checked as the user, may take the
  // helper's whole deadline on a file system that never answers: waited
  // for on a thread of file_waits_', and the call answered when it ends.
  const uid_t uid = who->uid;
  auto check = [this, spec = std::move(spec), user = std::move(user), out, detach, cancel,
                batched]() mutable {
    if (auto s = OutputFiles::Check(spec, user_files_); !s.ok()) return out->Finish(ToGrpc(s));
    Accept(std::move(spec), std::move(user), out, detach, cancel, batched);
  };
  if (auto s = file_waits_.Run(uid, std::move(check)); !s.ok()) out->Finish(ToGrpc(s));
  return stream;
}

void LtdService::Accept(JobSpec spec, std::string user, std::shared_ptr<EventStream::Handle> out,
                        bool detach, bool cancel, bool batched) {
  loop_.Post([this, spec = std::move(spec), out, detach, cancel, batched,
              user = std::move(user)]() mutable {
    // Stopping since the check began: the job would be the next ltd's to run.
    if (closed_) return out->Finish(ToGrpc(absl::UnavailableError("ltd is shutting down")));
    auto id = manager_.Submit(std::move(spec), user);
    if (!id.ok()) return out->Finish(ToGrpc(id.status()));
    v1::JobEvent accepted;
    accepted.set_accepted(*id);
    // A detached submit's one event and its end go out together.
    if (detach) {
      out->PushAndFinish(std::move(accepted), grpc::Status::OK);
      return;
    }
    // Every line of the job from its first, read from its log; the client
    // may go away first (and the job with it, when it asked for that).
    const Job* submitted = manager_.Find(*id);
    if (submitted == nullptr) {
      return (void)out->PushAndFinish(std::move(accepted),
                                      ToGrpc(absl::NotFoundError("the job is gone")));
    }
    LogReplay::Request attach;
    attach.follow = attach.attach = attach.from_start = true;
    attach.batched = batched;
    // The job's id and where its log starts, in one event.
    attach.first = std::move(accepted);
    if (cancel) attach.on_gone = [this, id = *id] { CancelLaunched(id); };
    if (auto s = LogReplay::Start(loop_, manager_, *submitted, std::move(attach), out); !s.ok()) {
      v1::JobEvent again;
      again.set_accepted(*id);
      return (void)out->PushAndFinish(std::move(again), ToGrpc(s));
    }
    // A job that waits says so at once, as srun does: a silent ltctl looks
    // hung. A placed one starts now: no wait to announce.
    if (const Job* job = manager_.Find(*id); job != nullptr && !manager_.Placed(*id)) {
      if (std::string why = manager_.PendingReason(*job); !why.empty()) {
        v1::JobEvent pending;
        pending.mutable_pending()->set_job_id(*id);
        pending.mutable_pending()->set_reason(DisplayEscape(why));
        out->Push(std::move(pending));
      }
    }
  });
}

// For everyone, as `ps` is: which slots are free, whose job holds which,
// which GPU a process outside any job holds (its pid and user, as `ps`
// would show them to anyone on the host).
grpc::ServerUnaryReactor* LtdService::Gpus(grpc::CallbackServerContext* ctx, const v1::GpusRequest*,
                                           v1::GpusReply* reply) {
  auto* reactor = ctx->DefaultReactor();
  loop_.Post([this, reply, reactor] {
    manager_.SampleGpus();
    for (const SlotView& slot : manager_.Slots()) ToProto(slot, reply->add_slots());
    reply->set_gpu_checks(manager_.gpu_checks());
    reply->set_gpu_isolation(manager_.gpu_isolation());
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* LtdService::Kill(grpc::CallbackServerContext* ctx,
                                           const v1::KillRequest* req, v1::KillReply* reply) {
  auto* reactor = ctx->DefaultReactor();
  auto who = JobCaller(ctx, req->job());
  if (!who.ok()) {
    reactor->Finish(ToGrpc(who.status()));
    return reactor;
  }
  if (req->signal() < 0 || req->signal() >= NSIG) {
    reactor->Finish(
        ToGrpc(absl::InvalidArgumentError(Cat("no signal ", req->signal(), "; use one of 1..",
                                              NSIG - 1, ", or 0 to tear the job down"))));
    return reactor;
  }
  KillOrder order = KillOrder::Signal(req->signal(), req->all_processes());
  order.by = UserName(who->uid);
  loop_.Post(
      [this, ref = req->job(), order = std::move(order), who = *who, reply, reactor]() mutable {
        // An array's id or name: every task of it.
        if (auto whole = manager_.ResolveAny(ref, who.uid); whole.ok() && whole->tasks.size() > 1) {
          auto s = KillArray(whole->tasks, std::move(order), who, reply, reactor);
          if (!s.ok()) reactor->Finish(ToGrpc(s));
          return;
        }
        auto job = JobFor(ref, who, /*control=*/true);
        if (!job.ok()) return reactor->Finish(ToGrpc(job.status()));
        // The state before the kill took effect; the answer may come later.
        reply->set_job_id((*job)->id);
        reply->set_state(ToProto((*job)->state));
        manager_.Kill((*job)->id, std::move(order), [reactor](absl::Status s) {
          reactor->Finish(s.ok() ? grpc::Status::OK : ToGrpc(s));
        });
      });
  return reactor;
}

// `ltctl stack`: the job's owner, root or the admin group, as for a kill
// (the frames show the program's state, which may be private).
grpc::ServerUnaryReactor* LtdService::Stack(grpc::CallbackServerContext* ctx,
                                            const v1::StackRequest* req, v1::StackReply* reply) {
  auto* reactor = ctx->DefaultReactor();
  auto who = JobCaller(ctx, req->job());
  if (!who.ok()) {
    reactor->Finish(ToGrpc(who.status()));
    return reactor;
  }
  std::optional<int> rank;
  if (req->has_rank()) rank = req->rank();
  loop_.Post([this, ref = req->job(), rank, who = *who, reply, reactor] {
    auto job = JobFor(ref, who, /*control=*/true);
    if (!job.ok()) return reactor->Finish(ToGrpc(job.status()));
    reply->set_job_id((*job)->id);
    reply->set_budget_ms(kStackBudget.count());
    manager_.Stacks((*job)->id, rank, kStackBudget,
                    [reactor, reply](absl::StatusOr<LiveStacks> got) {
                      if (!got.ok()) return reactor->Finish(ToGrpc(got.status()));
                      // The ranks' bytes, as text that is valid UTF-8.
                      for (const RankStack& s : got->ranks) {
                        v1::RankStack* out = reply->add_ranks();
                        out->set_rank(s.rank);
                        out->set_pid(s.pid);
                        out->set_state(DisplayEscape(s.state));
                        out->set_kind(DisplayEscape(s.kind));
                        out->set_frames(DisplayEscape(s.frames));
                        out->set_kernel(DisplayEscape(s.kernel));
                        out->set_note(DisplayEscape(s.note));
                      }
                      reply->set_took_ms(got->took.count());
                      reactor->Finish(grpc::Status::OK);
                    });
  });
  return reactor;
}

grpc::ServerUnaryReactor* LtdService::Shutdown(grpc::CallbackServerContext* ctx,
                                               const v1::ShutdownRequest*, v1::ShutdownReply*) {
  auto* reactor = ctx->DefaultReactor();
  auto who = listener_.Lookup(ctx->peer());
  if (!who || who->uid != 0) {
    reactor->Finish(
        ToGrpc(absl::PermissionDeniedError("only root may shut ltd down; ask an administrator")));
    return reactor;
  }
  loop_.Post([this, reactor] {
    if (!shutdown_ || closed_) {
      return reactor->Finish(ToGrpc(absl::UnavailableError("ltd is stopping already")));
    }
    shutdown_([reactor] { reactor->Finish(grpc::Status::OK); });
  });
  return reactor;
}

grpc::ServerWriteReactor<v1::JobEvent>* LtdService::Attach(grpc::CallbackServerContext* ctx,
                                                           const v1::JobRef* req) {
  auto* stream = new EventStream();
  auto out = stream->handle();
  auto who = StreamCaller(ctx, stream, &req->job());
  if (!who) return stream;
  loop_.Post([this, r = *req, out, who = *who] {
    // An attach is the owner's or root's.
    auto job = JobFor(r.job(), who, /*control=*/true);
    if (!job.ok()) return out->Finish(ToGrpc(job.status()));
    const std::string id = (*job)->id;
    LogReplay::Request attach;
    attach.follow = attach.attach = true;
    attach.batched = r.batched();
    if (r.has_from()) attach.from = r.from();
    if (r.cancel_on_disconnect()) attach.on_gone = [this, id] { CancelLaunched(id); };
    if (auto s = LogReplay::Start(loop_, manager_, **job, std::move(attach), out); !s.ok()) {
      return out->Finish(ToGrpc(s));
    }
    // From here on every line the job writes reaches it (from its log).
    spdlog::debug("job={} attach stream opened by uid {}", id, who.uid);
  });
  return stream;
}

grpc::ServerWriteReactor<v1::JobEvent>* LtdService::Wait(grpc::CallbackServerContext* ctx,
                                                         const v1::JobRef* req) {
  auto* stream = new EventStream();
  auto out = stream->handle();
  auto who = StreamCaller(ctx, stream, &req->job());
  if (!who) return stream;
  const bool all = SeesAllDetails(*who);
  loop_.Post([this, ref = req->job(), out, who = *who, all] {
    // A wait is anyone's.
    auto job = JobFor(ref, who, /*control=*/false);
    if (!job.ok()) return out->Finish(ToGrpc(job.status()));
    const std::string id = (*job)->id;
    const bool hide = !all && (*job)->spec.uid != who.uid;
    auto oid = manager_.Observe(id, std::make_shared<EndObserver>(out, hide));
    if (!oid) {
      out->PushAndFinish(EndedEvent(**job, hide), grpc::Status::OK);
      return;
    }
    spdlog::debug("job={} wait stream opened by uid {}", id, who.uid);
    UnobserveWhenGone(*out, id, *oid);
  });
  return stream;
}

grpc::ServerWriteReactor<v1::JobEvent>* LtdService::Logs(grpc::CallbackServerContext* ctx,
                                                         const v1::LogsRequest* req) {
  auto* stream = new EventStream();
  auto out = stream->handle();
  auto who = StreamCaller(ctx, stream, &req->job());
  if (!who) return stream;
  if (req->tail() < 0) {
    out->Finish(ToGrpc(absl::InvalidArgumentError("--tail must be >= 0 (0: everything)")));
    return stream;
  }
  if (req->has_from() && (!req->follow() || req->tail() != 0)) {
    out->Finish(ToGrpc(absl::InvalidArgumentError(
        "a log position to go on from is for following a log (logs -f), without --tail")));
    return stream;
  }
  loop_.Post([this, r = *req, out, who = *who] {
    auto job = JobFor(r.job(), who, /*control=*/true);
    if (!job.ok()) return out->Finish(ToGrpc(job.status()));
    const Job& j = **job;
    if (r.rank() >= j.spec.devices || r.rank() < -1) {
      return out->Finish(
          ToGrpc(absl::InvalidArgumentError(Cat("--rank ", r.rank(), " is out of range: job ", j.id,
                                                " has ranks 0..", j.spec.devices - 1))));
    }
    LogReplay::Request logs;
    logs.follow = r.follow();
    logs.query.rank = r.rank();
    logs.query.tail = r.tail();
    logs.query.timestamps = r.timestamps();
    if (r.has_since()) {
      const auto since = WallTime(std::chrono::seconds(r.since().seconds())) +
                         std::chrono::microseconds(r.since().nanos() / 1000);
      logs.query.since = LogStamp(since);
      logs.query.since.pop_back();  // its space
    }
    if (r.has_from()) logs.from = r.from();
    if (auto s = LogReplay::Start(loop_, manager_, j, std::move(logs), out); !s.ok()) {
      return out->Finish(ToGrpc(s));
    }
    if (r.follow()) spdlog::debug("job={} logs stream opened by uid {}", j.id, who.uid);
  });
  return stream;
}

grpc::ServerUnaryReactor* LtdService::SetDrain(grpc::CallbackServerContext* ctx,
                                               std::optional<std::string> reason,
                                               v1::DrainReply* reply, Millis deadline) {
  auto* reactor = ctx->DefaultReactor();
  auto who = listener_.Lookup(ctx->peer());
  if (!who || !IsAdmin(*who)) {
    reactor->Finish(ToGrpc(absl::PermissionDeniedError(
        Cat("only root", admin_group_.empty() ? "" : Cat(" or the group ", admin_group_), " may ",
            reason ? "drain" : "resume", " ltd; ask an administrator"))));
    return reactor;
  }
  constexpr size_t kMaxReasonBytes = 1024;
  if (reason && (reason->size() > kMaxReasonBytes || reason->find('\0') != std::string::npos)) {
    reactor->Finish(ToGrpc(absl::InvalidArgumentError(Cat("--reason is ", reason->size(),
                                                          " bytes or has a NUL byte; "
                                                          "give at most ",
                                                          kMaxReasonBytes, " bytes of text"))));
    return reactor;
  }
  constexpr Millis kMaxDeadline{30LL * 24 * 3600 * 1000};
  if (deadline.count() < 0 || deadline > kMaxDeadline) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "--deadline must be more than 0 and at most 30 days"));
    return reactor;
  }
  loop_.Post([this, reason = std::move(reason), by = UserName(who->uid), reply, reactor, deadline] {
    absl::Status s = reason ? manager_.Drain(*reason, deadline) : manager_.Resume();
    if (!s.ok()) return reactor->Finish(ToGrpc(s));
    spdlog::info("{} by {}", reason ? "drain" : "resume", by);
    reply->set_draining(manager_.drain().has_value());
    if (manager_.drain()) reply->set_reason(DisplayEscape(*manager_.drain()));
    if (const auto& at = manager_.drain_deadline()) SetTime(*at, reply->mutable_deadline());
    for (const Job* job : manager_.List(false)) {
      if (job->state == JobState::kRunning || job->state == JobState::kStarting) {
        reply->set_running(reply->running() + 1);  // it holds its devices
      }
      if (job->state == JobState::kPending) reply->set_pending(reply->pending() + 1);
    }
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* LtdService::Drain(grpc::CallbackServerContext* ctx,
                                            const v1::DrainRequest* req, v1::DrainReply* reply) {
  return SetDrain(ctx, req->reason(), reply, Millis(req->deadline_ms()));
}

grpc::ServerUnaryReactor* LtdService::Resume(grpc::CallbackServerContext* ctx,
                                             const v1::ResumeRequest*, v1::DrainReply* reply) {
  return SetDrain(ctx, std::nullopt, reply);
}

}  // namespace ltd
