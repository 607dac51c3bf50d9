#include "shim_service.h"

#include <unistd.h>

#include <algorithm>

#include "duration.h"
#include "shim_record.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

#ifndef LTD_RELEASE
#define LTD_RELEASE "dev"
#endif

namespace ltd {
namespace {

int64_t UnixNanos(WallTime t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

ShimService::ShimService(Loop& loop, Clock& clock, Options options)
    : loop_(loop), clock_(clock), options_(std::move(options)) {}

ShimService::~ShimService() {
  CancelRestoreWindow();
  if (progress_timer_ != 0) clock_.CancelTimer(progress_timer_);
}

void ShimService::Begin(JobRunner& runner, std::function<void()> start,
                        std::function<void()> done) {
  runner_ = &runner;
  start_ = std::move(start);
  done_ = std::move(done);
  // ltd connects right after it starts us; should it never, the job is
  // not left running unwatched for longer than the window.
  ArmRestoreWindow(std::max(options_.restore_window, kFirstContact));
}

grpc::ServerUnaryReactor* ShimService::Hello(grpc::CallbackServerContext* ctx,
                                             const shim::v1::HelloRequest*,
                                             shim::v1::HelloReply* reply) {
  reply->set_api_version(1);
  reply->set_job_id(options_.job_id);
  reply->set_state_dir(options_.state_dir);
  reply->set_pid(getpid());
  reply->set_release(LTD_RELEASE);
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<shim::v1::Event>* ShimService::Watch(grpc::CallbackServerContext*,
                                                              const shim::v1::WatchRequest* req) {
  auto* stream = new Stream();
  std::shared_ptr<Stream::Handle> handle = stream->handle();
  const Watching asked{req->beats(),
                       RecordForm{req->typed_records(), req->beats() && req->slim_records()}};
  loop_.Post([this, handle, asked] {
    if (runner_ == nullptr) return handle->Finish(grpc::Status(grpc::UNAVAILABLE, "starting"));
    // ltd is here: the job is watched again.
    if (restore_timer_ != 0) {
      CancelRestoreWindow();
      if (ever_watched_) spdlog::info("job={} ltd is back", options_.job_id);
    }
    ever_watched_ = true;
    output_on_ = true;
    // Whatever Beats follow carry every rank that moved since the last
    // record or Beats, which includes all that moved since this record.
    handle->Push(RecordEventOf(runner_->job(), ended_, RecordForm{asked.form.typed, false}));
    if (ended_) return handle->Finish(grpc::Status::OK);
    watchers_.emplace(handle, asked);
    const bool watching = handle->OnGone(
        [this, raw = handle.get()] { loop_.Post([this, raw] { WatcherGone(raw); }); });
    if (!watching) return WatcherGone(handle.get());  // it hung up already
    if (start_) {
      // A new job's ranks start now, with ltd listening to every line.
      auto start = std::move(start_);
      start_ = nullptr;
      start();
    }
  });
  return stream;
}

grpc::ServerUnaryReactor* ShimService::Kill(grpc::CallbackServerContext* ctx,
                                            const shim::v1::KillRequest* req,
                                            shim::v1::KillReply*) {
  auto* reactor = ctx->DefaultReactor();
  KillOrder order = KillOrder::Signal(req->signal(), req->all_processes());
  order.why = req->why();
  order.by = req->by();
  order.warn = req->warn();
  loop_.Post([this, reactor, order = std::move(order)]() mutable {
    absl::Status s = runner_ == nullptr ? absl::UnavailableError("the supervisor is starting")
                                        : runner_->Kill(std::move(order));
    reactor->Finish(s.ok() ? grpc::Status::OK
                           : grpc::Status(grpc::FAILED_PRECONDITION, std::string(s.message())));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ShimService::Stack(grpc::CallbackServerContext* ctx,
                                             const shim::v1::StackRequest* req,
                                             shim::v1::StackReply* reply) {
  auto* reactor = ctx->DefaultReactor();
  std::optional<int> rank;
  if (req->has_rank()) rank = req->rank();
  // ltd says the budget; a supervisor bounds it all the same.
  const Millis budget = std::clamp(Millis(req->budget_ms()), Millis(100), Millis(30000));
  loop_.Post([this, reactor, reply, rank, budget] {
    if (runner_ == nullptr) {
      return reactor->Finish(grpc::Status(grpc::UNAVAILABLE, "the supervisor is starting"));
    }
    runner_->Stacks(rank, budget, [reactor, reply](absl::StatusOr<LiveStacks> got) {
      if (!got.ok()) {
        return reactor->Finish(
            grpc::Status(absl::IsInvalidArgument(got.status())     ? grpc::INVALID_ARGUMENT
                         : absl::IsResourceExhausted(got.status()) ? grpc::RESOURCE_EXHAUSTED
                                                                   : grpc::FAILED_PRECONDITION,
                         std::string(got.status().message())));
      }
      for (RankStack& s : got->ranks) {
        shim::v1::RankStack* out = reply->add_ranks();
        out->set_rank(s.rank);
        out->set_pid(s.pid);
        out->set_state(std::move(s.state));
        out->set_kind(std::move(s.kind));
        out->set_frames(std::move(s.frames));
        out->set_kernel(std::move(s.kernel));
        out->set_note(std::move(s.note));
      }
      reply->set_took_ms(got->took.count());
      reactor->Finish(grpc::Status::OK);
    });
  });
  return reactor;
}

grpc::ServerUnaryReactor* ShimService::SetOutput(grpc::CallbackServerContext* ctx,
                                                 const shim::v1::SetOutputRequest* req,
                                                 shim::v1::SetOutputReply*) {
  auto* reactor = ctx->DefaultReactor();
  // Answered from the loop, after the switch: every line the runner
  // reported before is in the log, every later one follows the flag.
  loop_.Post([this, reactor, on = req->on()] {
    if (on != output_on_)
      spdlog::debug("job={} output to ltd {}", options_.job_id, on ? "on" : "off");
    output_on_ = on;
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

void ShimService::OnChanged(const Job& job, Change change) {
  if (ended_) return;
  if (change == Change::kCourse) return SendRecord(job);
  // Progress: at most once per interval, the latest.
  (change == Change::kDetail ? record_dirty_ : beats_dirty_) = true;
  if (progress_timer_ == 0 && !watchers_.empty()) {
    progress_timer_ = clock_.StartTimer(options_.progress_interval, [this] {
      progress_timer_ = 0;
      SendProgress();
    });
  }
}

void ShimService::SendRecord(const Job& job) {
  record_dirty_ = false;
  beats_dirty_ = false;
  beats_sent_.clear();
  for (const Rank& rank : job.ranks) beats_sent_.push_back(BeatOf(rank));
  // Each form made once, and only if some watcher takes it.
  std::optional<shim::v1::Event> forms[4];  // [typed * 2 + slim]
  for (const auto& [handle, watching] : watchers_) {
    const size_t form = (watching.form.typed ? 2 : 0) + (watching.form.slim ? 1 : 0);
    if (!forms[form].has_value()) forms[form].emplace(RecordEventOf(job, false, watching.form));
    handle->Push(*forms[form]);
  }
}

void ShimService::SendProgress() {
  if (ended_ || runner_ == nullptr) return;
  const Job& job = runner_->job();
  if (record_dirty_ || (beats_dirty_ && beats_sent_.size() != job.ranks.size())) {
    return SendRecord(job);
  }
  if (!beats_dirty_) return;
  beats_dirty_ = false;
  shim::v1::Event beats;
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    RankBeat now = BeatOf(job.ranks[i]);
    if (now == beats_sent_[i] || !now.last_heartbeat_at) continue;
    shim::v1::RankBeat* beat = beats.mutable_beats()->add_ranks();
    beat->set_rank(static_cast<int>(i));
    beat->set_last_step(now.last_step);
    beat->set_last_heartbeat_at_ns(UnixNanos(*now.last_heartbeat_at));
    beat->set_steps_per_second(now.steps_per_second);
    beats_sent_[i] = std::move(now);
  }
  if (beats.beats().ranks().empty()) return;
  std::optional<shim::v1::Event> record;  // for a watcher of an older release
  for (const auto& [handle, watching] : watchers_) {
    if (watching.beats) {
      handle->Push(beats);
      continue;
    }
    if (!record) record = RecordEventOf(job, false, watching.form);
    handle->Push(*record);
  }
}

void ShimService::OnOutput(int rank, ltd::Stream stream, std::string_view line) {
  // The log has it; nobody is attached through ltd.
  if (watchers_.empty() || !output_on_) return;
  shim::v1::Event event;
  shim::v1::Output* out = event.mutable_output();
  out->set_rank(rank);
  out->set_stderr(stream == ltd::Stream::kStderr);
  out->set_data(std::string(line));
  Broadcast(event);
}

void ShimService::OnEnded(const Job& job) {
  ended_ = true;
  CancelRestoreWindow();
  // The whole record, in each watcher's form; a typed one says whether it
  // is saved, so that ltd saves what the disk refused here.
  std::optional<shim::v1::Event> forms[2];  // [typed]
  for (const auto& [handle, watching] : watchers_) {
    auto& form = forms[watching.form.typed ? 1 : 0];
    if (!form) form = RecordEventOf(job, true, RecordForm{watching.form.typed, false});
    handle->Push(*form);
    handle->Finish(grpc::Status::OK);
  }
  // Done once every watcher has its final record (or is gone).
  MaybeDone();
}

void ShimService::Broadcast(const shim::v1::Event& event) {
  for (const auto& [handle, beats] : watchers_) handle->Push(event);
}

void ShimService::WatcherGone(Stream::Handle* raw) {
  for (auto it = watchers_.begin(); it != watchers_.end(); ++it) {
    if (it->first.get() != raw) continue;
    watchers_.erase(it);
    break;
  }
  if (ended_) return MaybeDone();
  if (watchers_.empty()) {
    spdlog::warn("job={} ltd went away; the job runs on for {} without it", options_.job_id,
                 FormatDuration(options_.restore_window));
    ArmRestoreWindow(options_.restore_window);
    ArmRestoreWarning();
  }
}

void ShimService::CancelRestoreWindow() {
  for (Clock::TimerId* t : {&restore_timer_, &restore_warn_timer_}) {
    if (*t != 0) clock_.CancelTimer(*t);
    *t = 0;
  }
}

void ShimService::ArmRestoreWarning() {
  const WarnSignal warn = runner_->job().spec.warn_signal;
  const Millis window = options_.restore_window;
  if (warn.signal == 0 || window.count() == 0) return;
  const Millis before = std::min(warn.before, window);
  restore_warn_timer_ = clock_.StartTimer(window - before, [this, warn, before] {
    restore_warn_timer_ = 0;
    if (runner_ == nullptr || ended_) return;
    KillOrder order = KillOrder::Signal(warn.signal, false);
    order.warn = Cat("ltd is away; the job is torn down in ", FormatDuration(before),
                     " unless it comes back (its --restore-window)");
    if (absl::Status s = runner_->Kill(std::move(order)); !s.ok()) {
      spdlog::info("job={} --signal not sent: {}", options_.job_id, std::string(s.message()));
    }
  });
}

void ShimService::ArmRestoreWindow(Millis window) {
  if (restore_timer_ != 0) clock_.CancelTimer(restore_timer_);
  restore_timer_ = clock_.StartTimer(window, [this, window] {
    restore_timer_ = 0;
    if (runner_ == nullptr || ended_) return;
    std::string why =
        options_.restore_window.count() == 0
            ? std::string("ltd stopped, and its jobs end with it (--restore-window 0)")
            : Cat("ltd was away for ", FormatDuration(window),
                  ", longer than its restore window; the job was torn down");
    spdlog::error("job={} {}", options_.job_id, why);
    runner_->Abandon(CauseReason::kDaemonLost, std::move(why));
  });
}

void ShimService::MaybeDone() {
  if (!ended_ || !watchers_.empty() || !done_) return;
  auto done = std::move(done_);
  done_ = nullptr;
  done();
}

}  // namespace ltd
