#include "service.h"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>

#include "event_stream.h"
#include "hang_report.h"
#include "job_store.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  // absl and gRPC both number their codes after google.rpc.Code.
  static_assert(static_cast<int>(absl::StatusCode::kFailedPrecondition) ==
                static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

std::string UserName(uid_t uid) {
  passwd pw{};
  passwd* found = nullptr;
  char buf[1024];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr) return pw.pw_name;
  return std::to_string(uid);
}

void FillEnded(const Job& job, v1::Ended* ended) {
  ended->set_job_id(job.id);
  ended->set_state(std::string(ToString(job.state)));
  ended->set_exit_code(job.exit_code.value_or(1));
  if (job.root_cause) {
    const RootCause& c = *job.root_cause;
    auto* rc = ended->mutable_root_cause();
    rc->set_rank(c.rank);
    rc->set_reason(std::string(ToString(c.reason)));
    rc->set_exit_code(c.exit_code);
    rc->set_signal(c.signal);
    rc->set_at(FormatTime(c.at));
    rc->set_message(c.message);
  }
}

v1::JobEvent EndedEvent(const Job& job) {
  v1::JobEvent ev;
  FillEnded(job, ev.mutable_ended());
  return ev;
}

absl::Status MayControl(const PeerCreds& who, const Job& job) {
  if (who.uid == 0 || who.uid == job.spec.uid) return absl::OkStatus();
  return absl::PermissionDeniedError(
      Cat("job ", job.id, " belongs to ", job.user, "; only its owner or root may do that"));
}

// Forwards a job's live events to one stream. Loop thread only. While
// `held`, events wait here so that a log file's older bytes go out first.
class StreamObserver final : public JobObserver {
 public:
  StreamObserver(std::shared_ptr<EventStream::Handle> out, bool output, int rank)
      : out_(std::move(out)), output_(output), rank_(rank) {}

  void OnOutput(int rank, Stream stream, std::string_view line) override {
    if (!output_ || (rank_ >= 0 && rank != rank_)) return;
    v1::JobEvent ev;
    if (rank < 0) {
      ev.set_notice(std::string(line));
    } else {
      auto* out = ev.mutable_output();
      out->set_rank(rank);
      out->set_stderr(stream == Stream::kStderr);
      out->set_data(std::string(line));
    }
    Send(std::move(ev));
  }

  void OnEnded(const Job& job) override {
    Send(EndedEvent(job));
    ended_ = true;
    if (!held_) out_->Finish(grpc::Status::OK);
  }

  void Release() {
    held_ = false;
    for (auto& ev : backlog_) out_->Push(std::move(ev));
    backlog_.clear();
    if (ended_) out_->Finish(grpc::Status::OK);
  }
  void Hold() { held_ = true; }

 private:
  void Send(v1::JobEvent ev) {
    if (held_) {
      backlog_.push_back(std::move(ev));
    } else {
      out_->Push(std::move(ev));
    }
  }

  std::shared_ptr<EventStream::Handle> out_;
  const bool output_;
  const int rank_;
  bool held_ = false;
  bool ended_ = false;
  std::vector<v1::JobEvent> backlog_;
};

struct LogWork {
  uv_work_t req{};
  LogSnapshot snapshot;
  LogQuery query;
  std::shared_ptr<EventStream::Handle> out;
  std::function<void()> after;  // on the loop
};

}  // namespace

nlohmann::json JobView(const Job& job) {
  Job view = job;
  int64_t max_step = -1;
  for (const Rank& r : view.ranks) max_step = std::max(max_step, r.last_step);
  for (Rank& r : view.ranks) {
    r.straggler = view.state == JobState::kRunning && IsStraggler(r.last_step, max_step);
    if (r.state != RankState::kRunning) r.steps_per_second = 0;
  }
  return ToJson(view);
}

void LtdService::UnobserveWhenGone(EventStream::Handle& out, const std::string& id,
                                   JobManager::ObserverId oid) {
  auto unobserve = [this, id, oid] {
    loop_.Post([this, id, oid] { manager_.Unobserve(id, oid); });
  };
  if (!out.OnGone(unobserve)) manager_.Unobserve(id, oid);  // gone already; we are on the loop
}

grpc::ServerWriteReactor<v1::JobEvent>* LtdService::Submit(grpc::CallbackServerContext* ctx,
                                                           const v1::SubmitRequest* req) {
  auto* stream = new EventStream();
  auto out = stream->handle();
  auto who = listener_.Lookup(ctx->peer());
  if (!who) {
    out->Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "cannot tell who is calling"));
    return stream;
  }
  if (closed_) {
    out->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "ltd is shutting down"));
    return stream;
  }
  JobSpec spec;
  spec.devices = req->devices();
  spec.name = req->name();
  spec.argv.assign(req->argv().begin(), req->argv().end());
  spec.cwd = req->cwd();
  spec.env.assign(req->env().begin(), req->env().end());
  for (const std::string& kv : req->extra_env()) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      out->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                               "--env takes KEY=VALUE, got '" + kv + "'"));
      return stream;
    }
    const std::string key = kv.substr(0, eq + 1);
    std::erase_if(spec.env, [&](const std::string& e) { return e.starts_with(key); });
    spec.env.push_back(kv);
  }
  spec.uid = who->uid;
  spec.gid = who->gid;
  spec.heartbeat_timeout = Millis(req->heartbeat_timeout_ms());
  spec.startup_timeout = Millis(req->startup_timeout_ms());
  spec.grace = Millis(req->grace_ms());
  spec.max_restarts = req->max_restarts();
  const bool detach = req->detach();
  loop_.Post([this, spec = std::move(spec), out, detach, user = UserName(who->uid)]() mutable {
    auto id = manager_.Submit(std::move(spec), user);
    if (!id.ok()) return out->Finish(ToGrpc(id.status()));
    v1::JobEvent accepted;
    accepted.set_accepted(*id);
    out->Push(std::move(accepted));
    if (detach) return out->Finish(grpc::Status::OK);
    auto observer = std::make_shared<StreamObserver>(out, true, -1);
    auto oid = manager_.Observe(*id, observer);
    if (!oid) {  // ended already (the program could not start)
      auto job = manager_.Resolve(*id);
      if (job.ok()) out->Push(EndedEvent(**job));
      return out->Finish(grpc::Status::OK);
    }
    // The client may go away first; its observer must go with it.
    UnobserveWhenGone(*out, *id, *oid);
  });
  return stream;
}

grpc::ServerUnaryReactor* LtdService::List(grpc::CallbackServerContext* ctx,
                                           const v1::ListRequest* req, v1::ListReply* reply) {
  auto* reactor = ctx->DefaultReactor();
  loop_.Post([this, all = req->all(), reply, reactor] {
    for (const Job* job : manager_.List(all)) reply->add_jobs()->set_json(JobView(*job).dump());
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* LtdService::Show(grpc::CallbackServerContext* ctx, const v1::JobRef* req,
                                           v1::Job* reply) {
  auto* reactor = ctx->DefaultReactor();
  auto who = listener_.Lookup(ctx->peer());
  const uid_t caller = who ? who->uid : JobManager::kAnyone;
  loop_.Post([this, ref = req->job(), caller, reply, reactor] {
    auto job = manager_.Resolve(ref, caller);
    if (!job.ok()) return reactor->Finish(ToGrpc(job.status()));
    reply->set_json(JobView(**job).dump());
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* LtdService::Kill(grpc::CallbackServerContext* ctx,
                                           const v1::KillRequest* req, v1::KillReply* reply) {
  auto* reactor = ctx->DefaultReactor();
  auto who = listener_.Lookup(ctx->peer());
  if (!who) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "cannot tell who is calling"));
    return reactor;
  }
  if (req->signal() < 0 || req->signal() >= NSIG) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no such signal"));
    return reactor;
  }
  loop_.Post([this, ref = req->job(), sig = req->signal(), who = *who, reply, reactor] {
    auto job = manager_.Resolve(ref, who.uid);
    if (!job.ok()) return reactor->Finish(ToGrpc(job.status()));
    if (auto s = MayControl(who, **job); !s.ok()) return reactor->Finish(ToGrpc(s));
    const std::string id = (*job)->id;
    if (auto s = manager_.Kill(id, sig); !s.ok()) return reactor->Finish(ToGrpc(s));
    reply->set_job_id(id);
    reply->set_state(std::string(ToString((*job)->state)));
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerWriteReactor<v1::JobEvent>* LtdService::Attach(grpc::CallbackServerContext* ctx,
                                                           const v1::JobRef* req) {
  return Follow(ctx, req->job(), /*output=*/true);
}

grpc::ServerWriteReactor<v1::JobEvent>* LtdService::Wait(grpc::CallbackServerContext* ctx,
                                                         const v1::JobRef* req) {
  return Follow(ctx, req->job(), /*output=*/false);
}

grpc::ServerWriteReactor<v1::JobEvent>* LtdService::Follow(grpc::CallbackServerContext* ctx,
                                                           const std::string& ref, bool output) {
  auto* stream = new EventStream();
  auto out = stream->handle();
  auto who = listener_.Lookup(ctx->peer());
  if (!who) {
    out->Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "cannot tell who is calling"));
    return stream;
  }
  loop_.Post([this, ref, output, out, who = *who] {
    auto job = manager_.Resolve(ref, who.uid);
    if (!job.ok()) return out->Finish(ToGrpc(job.status()));
    if (output) {
      if (auto s = MayControl(who, **job); !s.ok()) return out->Finish(ToGrpc(s));
    }
    const std::string id = (*job)->id;
    auto oid = manager_.Observe(id, std::make_shared<StreamObserver>(out, output, -1));
    if (!oid) {
      out->Push(EndedEvent(**job));
      return out->Finish(grpc::Status::OK);
    }
    spdlog::debug("job={} {} stream opened by uid {}", id, output ? "attach" : "wait", who.uid);
    UnobserveWhenGone(*out, id, *oid);
  });
  return stream;
}

grpc::ServerWriteReactor<v1::JobEvent>* LtdService::Logs(grpc::CallbackServerContext* ctx,
                                                         const v1::LogsRequest* req) {
  auto* stream = new EventStream();
  auto out = stream->handle();
  auto who = listener_.Lookup(ctx->peer());
  if (!who) {
    out->Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "cannot tell who is calling"));
    return stream;
  }
  loop_.Post([this, r = *req, out, who = *who] {
    auto job = manager_.Resolve(r.job(), who.uid);
    if (!job.ok()) return out->Finish(ToGrpc(job.status()));
    if (auto s = MayControl(who, **job); !s.ok()) return out->Finish(ToGrpc(s));
    const Job& j = **job;
    if (r.rank() >= j.spec.devices || r.rank() < -1) {
      return out->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                      Cat("--rank ", r.rank(), " is out of range: job ", j.id,
                                          " has ranks 0..", j.spec.devices - 1)));
    }
    auto work = new LogWork;
    work->req.data = work;
    work->snapshot = manager_.TakeLog(j.id);
    work->query.rank = r.rank();
    work->query.tail = r.tail();
    work->out = out;
    std::shared_ptr<StreamObserver> observer;
    if (r.follow() && !IsFinal(j.state)) {
      observer = std::make_shared<StreamObserver>(out, true, r.rank());
      observer->Hold();
      auto oid = manager_.Observe(j.id, observer);
      if (oid) {
        UnobserveWhenGone(*out, j.id, *oid);
      } else {
        observer.reset();
      }
    }
    // The snapshot was taken and the observer registered in this one loop
    // turn: every line before is in the snapshot, every line after reaches
    // the observer, which holds it until the snapshot is sent.
    work->after = [observer, out] {
      if (!observer) return out->Finish(grpc::Status::OK);
      observer->Release();
    };
    uv_queue_work(
        loop_.get(), &work->req,
        [](uv_work_t* w) {
          auto* lw = static_cast<LogWork*>(w->data);
          ReadLog(std::move(lw->snapshot), lw->query, [&](std::string_view chunk) {
            v1::JobEvent ev;
            ev.set_log(std::string(chunk));
            return lw->out->Push(std::move(ev));
          });
        },
        [](uv_work_t* w, int) {
          auto* lw = static_cast<LogWork*>(w->data);
          lw->after();
          delete lw;
        });
  });
  return stream;
}

}  // namespace ltd
