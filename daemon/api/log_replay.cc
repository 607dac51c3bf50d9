#include "log_replay.h"

#include "api_convert.h"

namespace ltd {

// Tells the replay that the log grew or the job ended; carries no output.
class LogReplay::Follower final : public JobObserver {
 public:
  explicit Follower(LogReplay* replay) : replay_(replay) {}
  void OnOutput(int, Stream, std::string_view) override {
    if (replay_ != nullptr) replay_->OnGrew();
  }
  // The lines written while the job's output was off are in the log too.
  void OnOutputResumed() override {
    if (replay_ != nullptr) replay_->OnGrew();
  }
  void OnEnded(const Job& job) override {
    if (replay_ != nullptr) replay_->OnEnded(job);
  }
  LogReplay* replay_;  // null once the replay is gone
};

void LogReplay::Start(Loop& loop, JobManager& manager, const Job& job, LogQuery query, bool follow,
                      std::shared_ptr<EventStream::Handle> out) {
  std::shared_ptr<LogReplay> owner(new LogReplay(loop, manager, job.id, query, std::move(out)));
  LogReplay* r = owner.get();
  r->self_ = std::move(owner);
  std::weak_ptr<LogReplay> weak = r->self_;
  // The snapshot is taken and the follower registered in this one loop
  // turn: every line before is in the snapshot, every line after makes the
  // follower take another.
  // A follower's snapshot may end inside a line the supervisor is still
  // writing: that line waits for the next snapshot, whole.
  const bool following = follow && !IsFinal(job.state);
  r->query_.whole_lines = following;
  r->cursor_.emplace(manager.TakeLog(job.id), r->query_);
  if (following) {
    r->follower_ = std::make_shared<Follower>(r);
    r->observer_ = manager.Observe(job.id, r->follower_);
    r->following_ = r->observer_.has_value();
    if (r->following_) {
      // OnGone runs on a gRPC thread; the loop takes it from there.
      if (!r->out_->OnGone([&loop, weak] {
            loop.Post([weak] {
              if (auto live = weak.lock()) live->OnGone();
            });
          })) {
        r->gone_ = true;
      }
    }
  }
  r->Step();
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
  uv_queue_work(
      loop_.get(), &req_,
      [](uv_work_t* w) {
        auto* r = static_cast<LogReplay*>(w->data);
        r->more_ = r->cursor_->Next(&r->chunk_);
      },
      [](uv_work_t* w, int) { static_cast<LogReplay*>(w->data)->Deliver(); });
}

void LogReplay::Deliver() {
  reading_ = false;
  if (gone_) return Done(false);
  if (more_) {
    v1::JobEvent ev;
    ev.set_log(std::move(chunk_));
    chunk_.clear();
    if (!out_->Push(std::move(ev))) return Done(false);  // the client is gone
    reading_ = true;                                     // until the stream has room
    std::weak_ptr<LogReplay> weak = self_;
    if (!out_->OnRoom([this, weak] {
          loop_.Post([weak] {
            if (auto live = weak.lock()) live->Step();
          });
        })) {
      Step();
    }
    return;
  }
  if (!following_) return Done(true);
  if (grew_ || (ended_ && !snapshot_after_end_)) return Snapshot();
  if (ended_) {
    // Every line up to the job's end is sent: now its end.
    if (ended_event_) out_->Push(std::move(*ended_event_));
    return Done(true);
  }
  // Until the log grows or the job ends. The snapshot's fds go now: an
  // idle follower holds only its position, so followers cost ltd no fd
  // while their jobs are quiet.
  idle_ = true;
  position_ = cursor_->position();
  cursor_.reset();
}

void LogReplay::Snapshot() {
  const uint64_t from = cursor_ ? cursor_->position() : position_;
  grew_ = false;
  snapshot_after_end_ = ended_;
  query_.tail = 0;               // past the first snapshot, everything new
  query_.whole_lines = !ended_;  // the last one has every byte, a torn last line too
  cursor_.emplace(manager_.TakeLog(job_id_), query_, from);
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
  if (!reading_) Done(false);  // else the read in flight ends it
}

void LogReplay::Done(bool finish) {
  if (follower_) follower_->replay_ = nullptr;
  if (observer_) manager_.Unobserve(job_id_, *observer_);
  observer_.reset();
  if (finish) out_->Finish(grpc::Status::OK);
  self_.reset();  // the last owner: `this` is gone from here on
}

}  // namespace ltd
