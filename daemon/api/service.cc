#include "service.h"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <deque>

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

// Forwards a job's live events to one stream. Loop thread only. While
// `held`, events wait here so that a log file's older bytes go out first.
class StreamObserver final : public JobObserver,
                             public std::enable_shared_from_this<StreamObserver> {
 public:
  StreamObserver(std::shared_ptr<EventStream::Handle> out, bool output, int rank)
      : out_(std::move(out)), output_(output), rank_(rank) {}

  // An attach streams from the moment the job's supervisor sends output
  // again, as `docker attach` streams from now: what came before is in
  // the log, not here. A client whose queue is full wants nothing until
  // it has room again: when every attach of a job is stalled so (clients
  // stopped, or on a slow link), the supervisor stops sending the job's
  // lines, which ltd would only drop, at a cost to everyone of its CPU.
  bool WantsOutput() const override { return output_ && !stalled_; }
  void OnOutputResumed() override {
    if (!opened_.empty()) spdlog::debug("{}", opened_);
    opened_.clear();
  }
  // `changed` runs on the loop when WantsOutput changes.
  void OnWantChanged(std::function<void()> changed,
                     std::function<void(std::function<void()>)> post) {
    changed_ = std::move(changed);
    post_ = std::move(post);
  }
  // Logs `line` once the output flows: from then on nothing is missed.
  void LogWhenFlowing(std::string line) { opened_ = std::move(line); }

  void OnOutput(int rank, Stream stream, std::string_view line) override {
    if (!output_ || (rank_ >= 0 && rank != rank_)) return;
    if (rank >= 0 && !held_) {
      if (stalled_) return;  // said when it has room again
      // A reader that is behind costs a count, not a copy of the line;
      // one that stays behind stalls (Stall).
      if (out_->DropIfFull()) return Stall();
    }
    v1::JobEvent ev;
    if (rank < 0) {
      ev.set_notice(DisplayEscape(line));  // ltd's words, maybe quoting a rank's
    } else {
      auto* out = ev.mutable_output();
      out->set_rank(rank);
      out->set_stderr(stream == Stream::kStderr);
      out->set_data(std::string(line));
    }
    Send(std::move(ev));
  }

  void OnStarted(const Job& job) override {
    v1::JobEvent ev;
    ev.set_started(job.id);
    Send(std::move(ev));
  }

  // The ended event without what HideOthersDetails hides.
  void HideDetails() { hide_ = true; }

  void OnEnded(const Job& job) override {
    Send(EndedEvent(job, hide_));
    ended_ = true;
    if (!held_) out_->Finish(grpc::Status::OK);
  }

  void Release() {
    held_ = false;
    if (held_dropped_ > 0) {
      v1::JobEvent notice;
      notice.set_notice(Cat("ltd: ", held_dropped_,
                            " output line(s) dropped while the log was sent: the client was too "
                            "slow; `ltctl logs` has them"));
      out_->Push(std::move(notice));
    }
    for (auto& ev : backlog_) out_->Push(std::move(ev));
    backlog_.clear();
    if (ended_) out_->Finish(grpc::Status::OK);
  }
  void Hold() { held_ = true; }

 private:
  // The queue is full: no more lines for it until it has drained to half
  // (OnRoom), then a notice that lines are missing here.
  void Stall() {
    if (changed_ == nullptr || stalled_) return;
    std::weak_ptr<StreamObserver> weak = weak_from_this();
    auto post = post_;
    if (!out_->OnRoom([weak, post] {
          post([weak] {
            if (auto self = weak.lock()) self->Unstall();
          });
        })) {
      return;  // room already, or the stream is gone
    }
    stalled_ = true;
    changed_();
  }
  void Unstall() {
    if (!stalled_) return;
    stalled_ = false;
    v1::JobEvent notice;
    notice.set_notice(
        "ltd: output lines dropped here: the client was too slow; `ltctl logs` has every line");
    out_->Push(std::move(notice));
    changed_();
  }

  void Send(v1::JobEvent ev) {
    if (!held_) {
      out_->Push(std::move(ev));
      return;
    }
    // Held while the log before it goes out: bounded like any stream.
    const size_t size = ev.ByteSizeLong();
    if (ev.has_output() && held_bytes_ + size > EventStream::kMaxQueuedBytes) {
      ++held_dropped_;
      return;
    }
    held_bytes_ += size;
    backlog_.push_back(std::move(ev));
  }

  std::shared_ptr<EventStream::Handle> out_;
  const bool output_;
  const int rank_;
  std::function<void()> changed_;
  std::function<void(std::function<void()>)> post_;  // onto the loop
  bool stalled_ = false;
  bool held_ = false;
  bool ended_ = false;
  bool hide_ = false;  // HideDetails
  std::string opened_;
  std::vector<v1::JobEvent> backlog_;
  size_t held_bytes_ = 0;
  uint64_t held_dropped_ = 0;
};

// A stalled attach tells the job's supervision (JobManager) that it
// wants no lines for now, and again when it has room.
void WhenStalledTellSupervision(StreamObserver& observer, JobManager& manager, Loop& loop,
                                const std::string& id) {
  observer.OnWantChanged([&manager, id] { manager.WantsOutputChanged(id); },
                         [&loop](std::function<void()> fn) { loop.Post(std::move(fn)); });
}

}  // namespace

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

absl::StatusOr<const Job*> LtdService::JobFor(const std::string& ref, const PeerCreds& who,
                                              bool control) const {
  auto job = manager_.Resolve(ref, who.uid);
  if (!job.ok() || !control) return job;
  if (auto s = MayControl(who, **job); !s.ok()) return s;
  return job;
}

void LtdService::UnobserveWhenGone(EventStream::Handle& out, const std::string& id,
                                   JobManager::ObserverId oid, bool cancel) {
  auto gone = [this, id, oid, cancel] {
    manager_.Unobserve(id, oid);
    // A stream that ends with the job (its `ended` went out) or because
    // ltd stops (the job is the next ltd's) cancels nothing.
    if (!cancel || closed_) return;
    auto job = manager_.Resolve(id);
    if (!job.ok() || IsFinal((*job)->state)) return;
    spdlog::info("job={} its client went away: tearing it down (cancel_on_disconnect)", id);
    manager_.Kill(
        id, KillOrder::Teardown((*job)->user, "cancelled: the client that launched it went away"),
        [id](absl::Status s) {
          if (!s.ok()) {
            spdlog::debug("job={} cancel on disconnect: {}", id, std::string(s.message()));
          }
        });
  };
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
  auto checked = SpecFromRequest(*req);
  if (!checked.ok()) {
    out->Finish(ToGrpc(checked.status()));
    return stream;
  }
  JobSpec spec = std::move(*checked);
  spec.uid = who->uid;
  spec.gid = who->gid;
  if (auto s = OutputFiles::Check(spec, user_files_); !s.ok()) {
    out->Finish(ToGrpc(s));
    return stream;
  }
  const bool detach = req->detach();
  const bool cancel = req->cancel_on_disconnect();
  loop_.Post([this, spec = std::move(spec), out, detach, cancel,
              user = UserName(who->uid)]() mutable {
    auto id = manager_.Submit(std::move(spec), user);
    if (!id.ok()) return out->Finish(ToGrpc(id.status()));
    v1::JobEvent accepted;
    accepted.set_accepted(*id);
    out->Push(std::move(accepted));
    if (detach) return out->Finish(grpc::Status::OK);
    auto observer = std::make_shared<StreamObserver>(out, true, -1);
    WhenStalledTellSupervision(*observer, manager_, loop_, *id);
    auto oid = manager_.Observe(*id, observer);
    if (!oid) {  // ended already (the program could not start)
      auto job = manager_.Resolve(*id);
      if (job.ok()) out->Push(EndedEvent(**job));
      return out->Finish(grpc::Status::OK);
    }
    // The client may go away first; its observer must go with it (and
    // the job too, when it asked for that).
    UnobserveWhenGone(*out, *id, *oid, cancel);
    // A job that waits says so at once, as srun does: a silent ltctl looks hung.
    if (auto job = manager_.Resolve(*id);
        job.ok() && (*job)->state == JobState::kPending && !(*job)->table.pending_reason.empty()) {
      v1::JobEvent pending;
      pending.mutable_pending()->set_job_id(*id);
      pending.mutable_pending()->set_reason(DisplayEscape((*job)->table.pending_reason));
      out->Push(std::move(pending));
    }
  });
  return stream;
}

grpc::ServerWriteReactor<v1::ListReply>* LtdService::List(grpc::CallbackServerContext* ctx,
                                                          const v1::ListRequest* req) {
  auto* stream = new PageStream();
  // Its pages are every job's summary: bounded per user like any stream.
  auto who = StreamCaller(ctx, stream);
  if (!who) return stream;
  auto filter = FilterFromRequest(*req, who->uid);
  if (!filter.ok()) {
    stream->handle()->Finish(ToGrpc(filter.status()));
    return stream;
  }
  // --no-trunc: each command up to what a finished job's summary keeps and more.
  const ViewLimits limits = req->no_trunc() ? ViewLimits{16 * 1024, kListLimits.text} : kListLimits;
  const bool all = SeesAllDetails(*who);
  loop_.Post(
      [this, filter = std::move(*filter), limits, uid = who->uid, all, out = stream->handle()] {
        // Pages of a bounded size whatever the number and size of the records
        // (gRPC refuses a message over 4 MB); each job's text is cut short.
        constexpr int kPageJobs = 500;
        constexpr size_t kPageBytes = 1 << 20;
        std::deque<v1::ListReply> pages;
        size_t page_bytes = 0;
        for (const Job* job : manager_.List(/*all=*/true)) {
          if (!filter.Matches(*job)) continue;
          v1::Job view;
          ToProto(*job, limits, &view);
          ForCaller(*job, uid, all, &view);
          const size_t size = view.ByteSizeLong();
          if (pages.empty() || pages.back().jobs_size() >= kPageJobs ||
              (page_bytes + size > kPageBytes && pages.back().jobs_size() > 0)) {
            pages.emplace_back();
            page_bytes = 0;
          }
          page_bytes += size;
          *pages.back().add_jobs() = std::move(view);
        }
        out->Send(std::move(pages), grpc::Status::OK);
      });
  return stream;
}

grpc::ServerUnaryReactor* LtdService::Show(grpc::CallbackServerContext* ctx, const v1::JobRef* req,
                                           v1::Job* reply) {
  auto* reactor = ctx->DefaultReactor();
  if (auto s = CheckJobRef(req->job()); !s.ok()) {
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  // Anyone may read a job, as `ps` shows anyone's processes.
  auto who = Caller(ctx);
  const PeerCreds caller = who.ok() ? *who : PeerCreds{.uid = JobManager::kAnyone};
  // Its details are its owner's (--private-data): one who cannot be told
  // sees none.
  const bool all = who.ok() && SeesAllDetails(caller);
  loop_.Post([this, ref = req->job(), caller, all, reply, reactor] {
    auto job = JobFor(ref, caller, /*control=*/false);
    if (!job.ok()) return reactor->Finish(ToGrpc(job.status()));
    // A finished job's summary: its whole record is on disk, read on
    // libuv's pool (a record may be megabytes); the summary should that
    // fail, or while kMaxShowReads are being read (what they hold is
    // memory too).
    if ((*job)->table.argv_cut == 0 || show_reads_ >= kMaxShowReads) {
      ToProto(**job, kShowLimits, reply);
      ForCaller(**job, caller.uid, all, reply);
      return reactor->Finish(grpc::Status::OK);
    }
    struct Read {
      uv_work_t req{};
      const JobStore* store;
      std::string id;
      Job summary;
      absl::StatusOr<Job> loaded = absl::UnknownError("not read");
      v1::Job* reply;
      grpc::ServerUnaryReactor* reactor;
      int* reads;
      uid_t caller;
      bool all;
    };
    auto* read =
        new Read{{},    &manager_.store(), (*job)->id,   **job,      absl::UnknownError(""),
                 reply, reactor,           &show_reads_, caller.uid, all};
    ++show_reads_;
    read->req.data = read;
    uv_queue_work(
        loop_.get(), &read->req,
        [](uv_work_t* w) {
          auto* r = static_cast<Read*>(w->data);
          r->loaded = r->store->Load(r->id);
        },
        [](uv_work_t* w, int) {
          std::unique_ptr<Read> r(static_cast<Read*>(w->data));
          --*r->reads;
          const Job* full = r->loaded.ok() ? &*r->loaded : &r->summary;
          ToProto(*full, kShowLimits, r->reply);
          // The summary's owner: a record read from disk is not trusted to say whose.
          ForCaller(r->summary, r->caller, r->all, r->reply);
          r->reactor->Finish(grpc::Status::OK);
        });
  });
  return reactor;
}

// For everyone, as `ps` is: which slots are free, whose job holds which,
// which GPU a process outside any job holds (its pid and user, as `ps`
// would show them to anyone on the host).
grpc::ServerUnaryReactor* LtdService::Gpus(grpc::CallbackServerContext* ctx, const v1::GpusRequest*,
                                           v1::GpusReply* reply) {
  auto* reactor = ctx->DefaultReactor();
  loop_.Post([this, reply, reactor] {
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
  return Follow(ctx, req->job(), /*output=*/true, req->cancel_on_disconnect());
}

grpc::ServerWriteReactor<v1::JobEvent>* LtdService::Wait(grpc::CallbackServerContext* ctx,
                                                         const v1::JobRef* req) {
  return Follow(ctx, req->job(), /*output=*/false);
}

grpc::ServerWriteReactor<v1::JobEvent>* LtdService::Follow(grpc::CallbackServerContext* ctx,
                                                           const std::string& ref, bool output,
                                                           bool cancel_on_disconnect) {
  auto* stream = new EventStream();
  auto out = stream->handle();
  auto who = StreamCaller(ctx, stream, &ref);
  if (!who) return stream;
  const bool all = SeesAllDetails(*who);
  loop_.Post([this, ref, output, cancel_on_disconnect, out, who = *who, all] {
    // A wait is anyone's; an attach (output) is the owner's or root's.
    auto job = JobFor(ref, who, /*control=*/output);
    if (!job.ok()) return out->Finish(ToGrpc(job.status()));
    const std::string id = (*job)->id;
    const bool hide = !all && (*job)->spec.uid != who.uid;
    auto observer = std::make_shared<StreamObserver>(out, output, -1);
    if (hide) observer->HideDetails();
    if (output) WhenStalledTellSupervision(*observer, manager_, loop_, id);
    auto oid = manager_.Observe(id, observer);
    if (!oid) {
      out->Push(EndedEvent(**job, hide));
      return out->Finish(grpc::Status::OK);
    }
    // An attach is open once the supervisor sends output again (Observe
    // asked it to): every line from then on reaches it.
    std::string opened =
        Cat("job=", id, " ", output ? "attach" : "wait", " stream opened by uid ", who.uid);
    if (!output || manager_.OutputFlowing(id)) {
      spdlog::debug("{}", opened);
    } else {
      observer->LogWhenFlowing(std::move(opened));
    }
    // JobFor above checked an attach: only the owner or root gets here.
    UnobserveWhenGone(*out, id, *oid, output && cancel_on_disconnect);
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
  loop_.Post([this, r = *req, out, who = *who] {
    auto job = JobFor(r.job(), who, /*control=*/true);
    if (!job.ok()) return out->Finish(ToGrpc(job.status()));
    const Job& j = **job;
    if (r.rank() >= j.spec.devices || r.rank() < -1) {
      return out->Finish(
          ToGrpc(absl::InvalidArgumentError(Cat("--rank ", r.rank(), " is out of range: job ", j.id,
                                                " has ranks 0..", j.spec.devices - 1))));
    }
    LogQuery query;
    query.rank = r.rank();
    query.tail = r.tail();
    query.timestamps = r.timestamps();
    if (r.has_since()) {
      const auto since = WallTime(std::chrono::seconds(r.since().seconds())) +
                         std::chrono::microseconds(r.since().nanos() / 1000);
      query.since = LogStamp(since);
      query.since.pop_back();  // its space
    }
    LogReplay::Start(loop_, manager_, j, std::move(query), r.follow(), out);
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
    if (const auto& at = manager_.drain_deadline()) {
      const auto ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(at->time_since_epoch()).count();
      reply->mutable_deadline()->set_seconds(ns / 1000000000);
      reply->mutable_deadline()->set_nanos(static_cast<int32_t>(ns % 1000000000));
    }
    for (const Job* job : manager_.List(false)) {
      if (job->state == JobState::kRunning) reply->set_running(reply->running() + 1);
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
