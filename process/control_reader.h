// The ranks' heartbeat fds, read in batches. They sit in an epoll set of
// their own, which the loop watches as one fd: a wakeup reads every fd that
// is ready. Past kCoalesceAbove reads a second the loop stops watching the
// set and a timer reads whatever is ready instead, every 0.5 ms per fd
// (1 ms to kMaxBatchDelayMs), so that many ranks' beats come in one wakeup,
// and, with many ranks, several beats of a rank in one read: a read costs
// a system call, and 1,000 ranks beating 10 times a second would cost
// 10,000 of them a second, read one beat each. Reads stay near
// kCoalesceAbove a second however many ranks beat, the loop never blocks
// (exits, output and timers go on meanwhile), and a beat is read at most
// kMaxBatchDelayMs late; whoever judges a deadline calls ReadNow first.
// The mode is chosen once a second, back to readiness only well below the
// threshold; switching costs one epoll_ctl of the set, whose size the
// kernel walks, so it is never done per batch.
//
// Each fd is read at most kBytesPerSecond (a token bucket of as many bytes):
// a rank that writes faster is parked, left unread until its budget has
// grown back, so that its writes block on the full pipe and it, not the
// supervisor, pays for them. Heartbeat lines are tens of bytes; the bound
// is thousands of times what a rank beating every step needs.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "fd.h"
#include "token_bucket.h"
#include "uv_handle.h"

namespace ltd {

class ControlReader {
 public:
  using Id = uint64_t;
  using OnData = std::function<void(std::string_view)>;

  static absl::StatusOr<std::unique_ptr<ControlReader>> Create(uv_loop_t* loop);
  ~ControlReader();  // closes every fd still added, and its handles
  ControlReader(const ControlReader&) = delete;
  ControlReader& operator=(const ControlReader&) = delete;

  // Takes `fd` (a non-blocking read end) and calls `on_data` with whatever
  // arrives on it, until EOF, when the fd is closed and forgotten.
  // `on_data` must not add or remove fds.
  // `name` says whose fd it is in the one warning a fast writer gets.
  absl::StatusOr<Id> Add(Fd fd, OnData on_data, std::string name = "");
  // Delivers what can be read now without blocking, then closes the fd.
  // Unknown ids (gone at EOF already) are fine.
  void DrainAndRemove(Id id);
  // Delivers whatever has arrived on every fd, now.
  void ReadNow() { ReadBatch(); }

  uint64_t wakeups() const { return wakeups_; }

  static constexpr uint64_t kCoalesceAbove = 2000;  // reads a second
  static constexpr uint64_t kMaxBatchDelayMs = 500;
  static constexpr double kBytesPerSecond = 1 << 20;
  // Tests: another byte budget for fds added from now on.
  void set_bytes_per_second(double rate) { bytes_per_second_ = rate; }
  bool batching() const { return ticking_; }

 private:
  struct Entry {
    Fd fd;
    OnData on_data;
    std::string name;
    TokenBucket budget;
    bool parked = false;  // over budget: left unread until it grew back
    bool warned = false;
  };
  ControlReader(uv_loop_t* loop, Fd epoll, UvPtr<uv_poll_t> poll, UvPtr<uv_timer_t> tick,
                UvPtr<uv_timer_t> unpark);
  void ReadBatch();
  void Watch();  // wake on readiness (below kCoalesceAbove)
  void Tick();   // wake every TickMs() (above it)
  uint64_t TickMs() const;
  // Reads until EAGAIN, EOF or the end of its budget (then parks it);
  // false at EOF or on an error.
  bool ReadAll(Id id, Entry& entry);
  void Park(Id id, Entry& entry);
  // Reads the parked fds whose budget grew back; rearms the timer for the rest.
  void Unpark();
  void Remove(std::map<Id, Entry>::iterator it);

  uv_loop_t* loop_;
  Fd epoll_;
  UvPtr<uv_poll_t> poll_;     // of epoll_: readiness of any rank's fd
  UvPtr<uv_timer_t> tick_;    // batched reads of a large job
  UvPtr<uv_timer_t> unpark_;  // reads parked fds again
  std::vector<Id> parked_;
  double bytes_per_second_ = kBytesPerSecond;
  std::map<Id, Entry> entries_;
  Id next_id_ = 1;
  uint64_t wakeups_ = 0;
  uint64_t window_start_ms_ = 0;
  uint64_t window_reads_ = 0;
  bool ticking_ = false;
  uint64_t tick_ms_ = 0;
  char buf_[64 * 1024];
};

}  // namespace ltd
