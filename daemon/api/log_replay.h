// `ltctl logs` on the server: a job's log sent as fast as its client takes
// it, one chunk read on libuv's pool at a time, the next once the stream
// has room, so a replay holds one chunk whatever the size of the log or
// the speed of the client. Following (`-f`), it reads the log file as it
// grows, like `tail -f`, never a copy of the live output: nothing a slow
// client misses is lost, and nothing is held for it. Loop thread only.
#pragma once

#include <memory>
#include <string>

#include "event_stream.h"
#include "job_log.h"
#include "job_manager.h"
#include "loop.h"

namespace ltd {

class LogReplay {
 public:
  // Owns itself until the log (and, following, the job) has ended or the
  // client is gone.
  static void Start(Loop& loop, JobManager& manager, const Job& job, LogQuery query, bool follow,
                    std::shared_ptr<EventStream::Handle> out);

 private:
  class Follower;
  LogReplay(Loop& loop, JobManager& manager, std::string job_id, LogQuery query,
            std::shared_ptr<EventStream::Handle> out);
  void Step();     // read the next chunk
  void Deliver();  // what the read brought
  void Snapshot();
  void OnGrew();
  void OnEnded(const Job& job);
  void OnGone();
  void Done(bool finish);

  Loop& loop_;
  JobManager& manager_;
  const std::string job_id_;
  LogQuery query_;
  std::shared_ptr<EventStream::Handle> out_;
  std::optional<LogCursor> cursor_;  // none while idle
  uint64_t position_ = 0;            // idle: where the cursor was
  uv_work_t req_{};
  std::string chunk_;
  bool more_ = false;
  bool reading_ = false;  // a read is on the pool, or the stream is full
  bool idle_ = false;     // following, at the end, waiting for more
  bool grew_ = false;     // the log grew since the snapshot being read
  bool following_ = false;
  bool ended_ = false;  // the job ended
  bool snapshot_after_end_ = false;
  bool gone_ = false;  // the client is gone
  std::optional<v1::JobEvent> ended_event_;
  std::optional<JobManager::ObserverId> observer_;
  std::shared_ptr<Follower> follower_;
  // Itself, until Done: what is posted to the loop holds only a weak_ptr,
  // so a late callback finds the replay gone rather than freed memory.
  std::shared_ptr<LogReplay> self_;
};

}  // namespace ltd
