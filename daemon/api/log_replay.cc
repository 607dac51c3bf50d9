#include "log_replay.h"

#include <deque>

#include "api_convert.h"
#include "bytes.h"
#include "stored_lines.h"
#include "str_util.h"

namespace ltd {
namespace {

// How far behind the log's end (at its last snapshot) a replay whose client
// has not taken its last write is taken to be behind its job: a read's
// worth (a replay that keeps up holds a few new lines at most).
constexpr uint64_t kBehindLogBytes = 64 * 1024;

}  // namespace

// Tells the replay that the log grew or the job ended; carries no output
// but ltd's own notices (an attach's), which are not in the log.
class LogReplay::Follower final : public JobObserver {
 public:
  Follower(LogReplay* replay, bool attach) : replay_(replay), attach_(attach) {}
  // A replay far behind its job wants no lines until it has caught up:
  // when nobody else wants them, the supervisor stops sending the job's
  // lines (they are in the log), and a stalled reader costs nothing.
  bool WantsOutput() const override { return !waiting_; }
  void OnOutput(int rank, Stream, std::string_view line) override {
    if (replay_ == nullptr) return;
    if (rank != -1 && rank != kLoggedNoticeRank && !replay_->idle_) {
      // Lines the replay reads from the log anyway, not a wake-up: counted
      // as a stream's queue counts them. Lines dropped on their way to ltd
      // (rank -2) say that ltd is behind the job already.
      behind_ += rank >= 0 ? line.size() + kLineCost : kBehindBytes;
      if (behind_ >= kBehindBytes) replay_->SetWaiting(true);
    }
    // rank -1: ltd's words for the job's users (a teardown), not in the
    // log; kLoggedNoticeRank: ltd's words the log holds (a --signal, a
    // hold), read from there; -2 and below: the supervisor's word that
    // live lines did not reach ltd, which is nothing to a reader of the log.
    if (rank == -1) {
      if (!attach_) return;
      // After the lines the log holds now: the next snapshot has them.
      if (notices_.size() >= kMaxNotices) return;
      notices_.push_back({replay_->generation_ + 1, DisplayEscape(line)});
    }
    replay_->OnGrew();
  }
  // The lines written while the job's output was off are in the log too.
  void OnOutputResumed() override {
    if (replay_ != nullptr) replay_->OnGrew();
  }
  void OnStarted(const Job& job) override {
    if (replay_ == nullptr || !attach_) return;
    v1::JobEvent ev;
    ev.set_started(job.id);
    replay_->out_->Push(std::move(ev));
  }
  void OnEnded(const Job& job) override {
    if (replay_ != nullptr) replay_->OnEnded(job);
  }
  // The notices of snapshots up to `generation`, read now.
  void Flush(uint64_t generation) {
    while (!notices_.empty() && notices_.front().first <= generation) {
      v1::JobEvent ev;
      ev.set_notice(std::move(notices_.front().second));
      notices_.pop_front();
      replay_->out_->Push(std::move(ev));
    }
  }

  // ltd's notices are a few a job (teardown, holds): past this many
  // waiting for a reader that is behind, the rest are not kept.
  static constexpr size_t kMaxNotices = 64;
  // Output a replay that is reading the log saw go by meanwhile: past this
  // much it reads on from the log without being told of each line, until
  // it reaches the log's end.
  static constexpr uint64_t kBehindBytes = 1 << 20;
  static constexpr uint64_t kLineCost = 256;
  LogReplay* replay_;  // null once the replay is gone
  const bool attach_;
  bool waiting_ = false;  // wants no live lines: far behind
  uint64_t behind_ = 0;   // bytes of output seen while not at the log's end
  std::deque<std::pair<uint64_t, std::string>> notices_;
};

absl::Status LogReplay::Start(Loop& loop, JobManager& manager, const Job& job, Request request,
                              std::shared_ptr<EventStream::Handle> out) {
  LogSnapshot snapshot = manager.TakeLog(job.id);
  // An attach reads every line as stored; `logs`, what its query shows.
  LogQuery query = request.attach ? LogQuery() : request.query;
  query.stored = request.attach;
  std::optional<uint64_t> from;
  if (request.follow && request.from) {
    const uint64_t end = snapshot.LastLineEnd();
    if ((request.from->log_id() != 0 && request.from->log_id() != snapshot.id) ||
        request.from->offset() > end) {
      return absl::FailedPreconditionError(
          Cat("job ", job.id, "'s log is not the one this client was reading (",
              snapshot.id == 0 ? "it has none now" : "it was replaced", "); `ltctl logs ", job.id,
              "` shows what it has"));
    }
    from = request.from->offset();
    query.tail = 0;
  } else if (request.attach && !request.from_start) {
    from = snapshot.LastLineEnd();  // as `docker attach`: from now on
  }
  // A follower's snapshot may end inside a line the supervisor is still
  // writing: that line waits for the next snapshot, whole.
  query.whole_lines = request.follow && !IsFinal(job.state);
  std::shared_ptr<LogReplay> owner(new LogReplay(loop, manager, job.id, query, std::move(out)));
  LogReplay* r = owner.get();
  r->self_ = std::move(owner);
  r->attach_ = request.attach;
  r->batched_ = request.batched;
  r->on_gone_ = std::move(request.on_gone);
  r->log_id_ = snapshot.id;
  // Where it starts, so that a client that loses ltd before the first
  // line knows where to go on from (a tail's start is known once read).
  std::optional<v1::JobEvent> first = std::move(request.first);
  if (request.follow && (from || query.tail == 0)) {
    r->PushAt(from.value_or(0), first ? std::move(*first) : v1::JobEvent());
  } else if (first) {
    r->out_->Push(std::move(*first));
  }
  if (request.attach && IsFinal(job.state)) {
    v1::JobEvent ev;
    FillEnded(job, ev.mutable_ended());
    r->ended_event_ = std::move(ev);
  }
  r->Begin(job, request.follow, from, std::move(snapshot));
  return absl::OkStatus();
}

void LogReplay::PushAt(uint64_t offset, v1::JobEvent ev) {
  ev.mutable_at()->set_offset(offset);
  if (log_id_ != sent_log_id_) ev.mutable_at()->set_log_id(log_id_);
  sent_log_id_ = log_id_;
  told_at_ = true;
  out_->Push(std::move(ev));
}

void LogReplay::Begin(const Job& job, bool follow, std::optional<uint64_t> from,
                      LogSnapshot snapshot) {
  std::weak_ptr<LogReplay> weak = self_;
  // The snapshot is taken and the follower registered in this one loop
  // turn: every line before is in the snapshot, every line after makes the
  // follower take another.
  log_id_ = snapshot.id;
  snapshot_end_ = snapshot.End();
  cursor_.emplace(std::move(snapshot), query_, from);
  if (follow && !IsFinal(job.state)) {
    follower_ = std::make_shared<Follower>(this, attach_);
    observer_ = manager_.Observe(job.id, follower_);
    following_ = observer_.has_value();
  }
  if (following_ || attach_) {
    // OnGone runs on a gRPC thread; the loop takes it from there.
    Loop& loop = loop_;
    if (!out_->OnGone([&loop, weak] {
          loop.Post([weak] {
            if (auto live = weak.lock()) live->OnGone();
          });
        })) {
      gone_ = true;
    }
  }
  Step();
}

LogReplay::LogReplay(Loop& loop, JobManager& manager, std::string job_id, LogQuery query,
                     std::shared_ptr<EventStream::Handle> out)
    : loop_(loop),
      manager_(manager),
      job_id_(std::move(job_id)),
      query_(query),
      out_(std::move(out)) {
  req_.data = this;
}

void LogReplay::Step() {
  if (gone_) return Done(false);
  reading_ = true;
  idle_ = false;
  if (cursor_->NothingLeft()) {
    // Nothing to read (a job that printed nothing, or nothing new since
    // the last snapshot: most snapshots): the answer in the next loop turn,
    // as the pool's would come, without the pool's two thread hand-offs.
    more_ = cursor_->Next(&chunk_);
    chunk_end_ = cursor_->position();
    std::weak_ptr<LogReplay> weak = self_;
    loop_.Post([weak] {
      if (auto live = weak.lock()) live->Deliver();
    });
    return;
  }
  uv_queue_work(
      loop_.get(), &req_,
      [](uv_work_t* w) {
        auto* r = static_cast<LogReplay*>(w->data);
        r->more_ = r->cursor_->Next(&r->chunk_);
        r->chunk_end_ = r->cursor_->position();
      },
      [](uv_work_t* w, int) { static_cast<LogReplay*>(w->data)->Deliver(); });
}

bool LogReplay::Push(std::string chunk) {
  const uint64_t id = log_id_ != sent_log_id_ ? log_id_ : 0;
  sent_log_id_ = log_id_;
  told_at_ = true;
  if (!attach_) {
    v1::JobEvent ev;
    ev.set_log(std::move(chunk));
    ev.mutable_at()->set_offset(chunk_end_);
    if (id != 0) ev.mutable_at()->set_log_id(id);
    return out_->Push(std::move(ev));
  }
  std::vector<v1::JobEvent> events;
  StoredLinesToEvents(chunk, chunk_end_, id, batched_, &events);
  for (v1::JobEvent& ev : events) {
    if (!out_->Push(std::move(ev))) return false;
  }
  return true;
}

void LogReplay::Deliver() {
  reading_ = false;
  if (gone_) return Done(false);
  // A read that showed nothing of what it read (a filter, a tail's search)
  // and has more: the next read queues behind other readers' in the pool.
  if (more_ && chunk_.empty()) return Step();
  if (more_) return Send();
  if (follower_) follower_->Flush(generation_);
  if (!following_) return End();
  if (follower_ && follower_->waiting_) {
    // Nobody told it of the lines written since its snapshot: another one
    // says. One that brought nothing new is the log's end: from there, lines
    // wake it up again.
    if (cursor_->position() == snapshot_from_) {
      SetWaiting(false);
    } else {
      grew_ = true;
    }
  }
  if (grew_ || (ended_ && !snapshot_after_end_)) return Snapshot();
  if (ended_) return End();  // every line up to the job's end is sent: now its end
  // Until the log grows or the job ends. The snapshot's fds go now: an
  // idle follower holds only its position, so followers cost ltd no fd
  // while their jobs are quiet.
  idle_ = true;
  if (follower_) follower_->behind_ = 0;
  position_ = cursor_->position();
  // A tail that showed nothing yet: where it is now.
  if (!told_at_) PushAt(position_);
  cursor_.reset();
}

// One chunk in the stream at a time: the next, read ahead, waits as the
// log's text until gRPC has written every event before it. A client that
// stopped reading holds one write gRPC has not finished and one chunk of
// text, and costs no work: nothing polls, the write's completion wakes
// the replay.
void LogReplay::Send() {
  std::weak_ptr<LogReplay> weak = self_;
  Loop& loop = loop_;
  if (!out_->OnDrained([&loop, weak] {
        loop.Post([weak] {
          if (auto live = weak.lock()) live->Drained();
        });
      })) {
    return Drained();  // nothing queued: at once
  }
  // Its client has not taken the last write, and more of the log waits
  // behind this chunk: the replay is behind its job, not keeping up with it,
  // and wants no live lines until it reaches the log's end.
  if (snapshot_end_ - std::min(snapshot_end_, chunk_end_) >= kBehindLogBytes) SetWaiting(true);
}

void LogReplay::Drained() {
  if (gone_) return Done(false);
  if (!Push(std::exchange(chunk_, {}))) return Done(false);  // the client is gone
  Step();  // the next chunk, read while this one is written
}

// A reader far behind wants no live lines (Follower::WantsOutput); once it
// reaches the log's end it wants them again, and the log has what was
// written meanwhile.
void LogReplay::SetWaiting(bool waiting) {
  if (!follower_ || !observer_ || follower_->waiting_ == waiting) return;
  follower_->waiting_ = waiting;
  follower_->behind_ = 0;
  if (!waiting) grew_ = true;  // the lines written meanwhile told nobody
  manager_.WantsOutputChanged(job_id_);
}

void LogReplay::Snapshot() {
  const uint64_t from = cursor_ ? cursor_->position() : position_;
  snapshot_from_ = from;
  grew_ = false;
  ++generation_;
  snapshot_after_end_ = ended_;
  query_.tail = 0;               // past the first snapshot, everything new
  query_.whole_lines = !ended_;  // the last one has every byte, a torn last line too
  LogSnapshot snapshot = manager_.TakeLog(job_id_);
  log_id_ = snapshot.id;
  snapshot_end_ = snapshot.End();
  cursor_.emplace(std::move(snapshot), query_, from);
  Step();
}

void LogReplay::OnGrew() {
  if (idle_) return Snapshot();
  grew_ = true;
}

void LogReplay::OnEnded(const Job& job) {
  ended_ = true;
  v1::JobEvent ev;
  FillEnded(job, ev.mutable_ended());
  ended_event_ = std::move(ev);
  observer_.reset();  // the manager forgets its observers at a job's end
  if (idle_) Snapshot();
}

void LogReplay::OnGone() {
  gone_ = true;
  if (on_gone_ && !ended_) std::exchange(on_gone_, nullptr)();
  if (!reading_) Done(false);  // else the read in flight ends it (the pool holds `this`)
}

void LogReplay::End() {
  if (!ended_event_) return Done(true);
  (void)out_->PushAndFinish(std::move(*ended_event_), grpc::Status::OK);
  Done(false);
}

void LogReplay::Done(bool finish) {
  if (follower_) follower_->replay_ = nullptr;
  if (observer_) manager_.Unobserve(job_id_, *observer_);
  observer_.reset();
  if (finish) out_->Finish(grpc::Status::OK);
  self_.reset();  // the last owner: `this` is gone from here on
}

}  // namespace ltd
