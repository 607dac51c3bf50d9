// A job's log sent to a client as fast as it takes it, one chunk read on
// libuv's pool at a time, the next once the stream has room, so a replay
// holds one chunk whatever the size of the log or the speed of the client.
// Following, it reads the log file as it grows, like `tail -f`, never a
// copy of the live output: a client that falls behind lags and catches up
// from disk, and misses only what the job's log itself dropped at its
// budget (it is told where). `ltctl logs` gets the log's text; an attach
// (an attached submit, `attach`) gets its lines as events. Either way each
// event says where in the log it ends, so that a follower can go on from
// there after ltd restarted.
// Loop thread only.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "event_stream.h"
#include "job_log.h"
#include "job_manager.h"
#include "loop.h"

namespace ltd {

class LogReplay {
 public:
  // What a client asks for.
  struct Request {
    // `ltctl logs`' filters; an attach reads every line as stored.
    LogQuery query;
    bool follow = false;
    // Following: where to start, a position an earlier stream of this
    // log reached (JobRef.from, LogsRequest.from). None: the log's start
    // (or its last query.tail lines); an attach's, its end unless
    // `from_start` (an attached submit's).
    std::optional<v1::LogPosition> from;
    // An attach: the log's lines as events (output, lines, notices), ltd's
    // notices for the job's users, and the job's end after its last line.
    bool attach = false;
    bool from_start = false;
    bool batched = false;  // JobRef.batched
    // An event that goes out first and carries where the stream starts
    // (an attached submit's `accepted`): one event where there were two.
    // Not sent when Start fails.
    std::optional<v1::JobEvent> first;
    // On the loop when the client goes away before the job's end.
    std::function<void()> on_gone;
  };

  // Owns itself until the log (and, following, the job) has ended or the
  // client is gone. FAILED_PRECONDITION when `from` is not in this job's
  // log: nothing is sent then.
  static absl::Status Start(Loop& loop, JobManager& manager, const Job& job, Request request,
                            std::shared_ptr<EventStream::Handle> out);

 private:
  class Follower;
  LogReplay(Loop& loop, JobManager& manager, std::string job_id, LogQuery query,
            std::shared_ptr<EventStream::Handle> out);
  void Begin(const Job& job, bool follow, std::optional<uint64_t> from, LogSnapshot snapshot);
  // `ev` (by default an event that says only that) with where the stream is.
  void PushAt(uint64_t offset, v1::JobEvent ev = {});
  void Step();     // read the next chunk
  void Deliver();  // what the read brought
  void Send();     // the chunk read, once the stream has sent what it has
  void Drained();  // the stream sent it all
  bool Push(std::string chunk);
  void Snapshot();
  void OnGrew();
  void OnEnded(const Job& job);
  void OnGone();
  void End();  // the job's end event, then the stream's
  void Done(bool finish);
  void SetWaiting(bool waiting);

  Loop& loop_;
  JobManager& manager_;
  const std::string job_id_;
  LogQuery query_;
  std::shared_ptr<EventStream::Handle> out_;
  std::optional<LogCursor> cursor_;  // none while idle
  uint64_t position_ = 0;            // idle: where the cursor was
  uint64_t snapshot_from_ = 0;       // where the snapshot being read starts
  uint64_t snapshot_end_ = 0;        // and where it ends
  uint64_t log_id_ = 0;              // of the snapshot being read
  uint64_t sent_log_id_ = 0;         // the last told to the client
  bool told_at_ = false;             // the client knows a position
  uint64_t generation_ = 0;          // snapshots taken
  uv_work_t req_{};
  std::string chunk_;
  uint64_t chunk_end_ = 0;  // the log position the chunk reaches
  bool more_ = false;
  bool reading_ = false;  // a read is on the pool
  bool idle_ = false;     // following, at the end, waiting for more
  bool grew_ = false;     // the log grew since the snapshot being read
  bool following_ = false;
  bool ended_ = false;  // the job ended
  bool snapshot_after_end_ = false;
  bool gone_ = false;  // the client is gone
  bool attach_ = false;
  bool batched_ = false;
  std::function<void()> on_gone_;
  std::optional<v1::JobEvent> ended_event_;
  std::optional<JobManager::ObserverId> observer_;
  std::shared_ptr<Follower> follower_;
  // Itself, until Done: what is posted to the loop holds only a weak_ptr,
  // so a late callback finds the replay gone rather than freed memory.
  std::shared_ptr<LogReplay> self_;
};

}  // namespace ltd
