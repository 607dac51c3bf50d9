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

shim::v1::Event WatchSink::DroppedNotice(uint64_t dropped) {
  shim::v1::Event notice;
  // Not a notice for users (the job's log has every line; a reader of
  // ltd's takes them from there), only a sign that the log grew.
  notice.mutable_output()->set_rank(kLinesDroppedOnTheWay);
  notice.mutable_output()->set_stderr(true);
  notice.mutable_output()->set_data("ltd: " + std::to_string(dropped) +
                                    " output line(s) dropped: ltd was too slow to take them");
  return notice;
}

ShimService::ShimService(Clock& clock, Options options)
    : clock_(clock), options_(std::move(options)) {}

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

shim::v1::HelloReply ShimService::Hello() const {
  shim::v1::HelloReply reply;
  reply.set_api_version(kApiVersion);
  reply.set_job_id(options_.job_id);
  reply.set_state_dir(options_.state_dir);
  reply.set_pid(getpid());
  reply.set_release(LTD_RELEASE);
  return reply;
}

void ShimService::Watch(WatchSink* sink, const shim::v1::WatchRequest& req) {
  const Watching asked{req.beats(),
                       RecordForm{req.typed_records(), req.beats() && req.slim_records()}};
  if (runner_ == nullptr) return sink->Finish();
  // ltd is here: the job is watched again.
  if (restore_timer_ != 0) {
    CancelRestoreWindow();
    if (ever_watched_) spdlog::info("job={} ltd is back", options_.job_id);
  }
  ever_watched_ = true;
  output_on_ = true;
  // Whatever Beats follow carry every rank that moved since the last
  // record or Beats, which includes all that moved since this record.
  sink->Push(RecordEventOf(runner_->job(), ended_, RecordForm{asked.form.typed, false}));
  if (ended_) return sink->Finish();
  watchers_.insert_or_assign(sink, asked);
  if (start_) {
    // A new job's ranks start now, with ltd listening to every line.
    auto start = std::move(start_);
    start_ = nullptr;
    start();
  }
}

absl::Status ShimService::Kill(const shim::v1::KillRequest& req) {
  if (runner_ == nullptr) return absl::UnavailableError("the supervisor is starting");
  KillOrder order = KillOrder::Signal(req.signal(), req.all_processes());
  order.why = req.why();
  order.by = req.by();
  order.warn = req.warn();
  return runner_->Kill(std::move(order));
}

void ShimService::Stack(const shim::v1::StackRequest& req, StackDone done) {
  if (runner_ == nullptr) return done(absl::UnavailableError("the supervisor is starting"));
  std::optional<int> rank;
  if (req.has_rank()) rank = req.rank();
  // ltd says the budget; a supervisor bounds it all the same.
  const Millis budget = std::clamp(Millis(req.budget_ms()), Millis(100), Millis(30000));
  runner_->Stacks(rank, budget, [done = std::move(done)](absl::StatusOr<LiveStacks> got) {
    if (!got.ok()) return done(got.status());
    shim::v1::StackReply reply;
    for (RankStack& s : got->ranks) {
      shim::v1::RankStack* out = reply.add_ranks();
      out->set_rank(s.rank);
      out->set_pid(s.pid);
      out->set_state(std::move(s.state));
      out->set_kind(std::move(s.kind));
      out->set_frames(std::move(s.frames));
      out->set_kernel(std::move(s.kernel));
      out->set_note(std::move(s.note));
    }
    reply.set_took_ms(got->took.count());
    done(std::move(reply));
  });
}

void ShimService::SetOutput(bool on) {
  ++set_output_calls_;
  if (on != output_on_)
    spdlog::debug("job={} output to ltd {}", options_.job_id, on ? "on" : "off");
  output_on_ = on;
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
  for (const auto& [sink, watching] : watchers_) {
    const size_t form = (watching.form.typed ? 2 : 0) + (watching.form.slim ? 1 : 0);
    if (!forms[form].has_value()) forms[form].emplace(RecordEventOf(job, false, watching.form));
    sink->Push(*forms[form]);
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
  for (const auto& [sink, watching] : watchers_) {
    if (watching.beats) {
      sink->Push(beats);
      continue;
    }
    if (!record) record = RecordEventOf(job, false, watching.form);
    sink->Push(*record);
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
  for (const auto& [sink, watching] : watchers_) {
    auto& form = forms[watching.form.typed ? 1 : 0];
    if (!form) form = RecordEventOf(job, true, RecordForm{watching.form.typed, false});
    sink->Push(*form);
    sink->Finish();
  }
  // Done once every watcher has its final record (or is gone).
  MaybeDone();
}

void ShimService::Broadcast(const shim::v1::Event& event) {
  for (const auto& [sink, watching] : watchers_) sink->Push(event);
}

void ShimService::Unwatch(WatchSink* sink) {
  if (watchers_.erase(sink) == 0) return;
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
