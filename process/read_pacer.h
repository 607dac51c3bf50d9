// How fast the ranks' stdout and stderr are read. Each stream gets one
// buffer a loop turn: libuv would read a readable stream up to 32 buffers
// at once, and a rank writing as fast as it can would keep its
// supervisor's loop from ltd's calls, heartbeats, exits and timers. And a
// job's streams together are read at most a rate over time (a token
// bucket of a second's worth): past it they are left unread until the
// budget has grown back, so the ranks' writes wait on their full pipes,
// as on a slow terminal, and the supervisor's CPU, which no job pays for,
// stays bounded (about 12 ms a MiB on the project's VM: a fifth of a
// core at 16 MiB a second).
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "token_bucket.h"
#include "uv_handle.h"

namespace ltd {

class ReadPacer {
 public:
  // What a job's streams may still read, shared by them.
  using Budget = TokenBucket;
  // A stream as the pacer sees it; its owner keeps it beside the handle.
  struct Stream {
    uv_stream_t* handle = nullptr;
    std::shared_ptr<Budget> budget;  // none: read a buffer a turn, unmetered
    bool waiting = false;            // not reading until its turn or its budget
  };

  // `bytes_per_second`: each budget's rate (0: none, a buffer a turn
  // alone); `alloc` and `read`: the callbacks each stream reads with.
  ReadPacer(uv_loop_t* loop, double bytes_per_second, uv_alloc_cb alloc, uv_read_cb read);
  ReadPacer(const ReadPacer&) = delete;
  ReadPacer& operator=(const ReadPacer&) = delete;

  // A new budget, of a second's worth; none when the rate is 0.
  std::shared_ptr<Budget> NewBudget() const;
  // Starts reading `s` (its handle and budget set); a libuv error else.
  int Start(Stream& s);
  // After a read of `n` bytes into a buffer of `len`: a full buffer waits
  // for the next turn, a spent budget until it has grown back.
  void Took(Stream& s, size_t n, size_t len);
  // Before `s` is closed or freed.
  void Forget(Stream& s);

  void set_bytes_per_second(double rate) { rate_ = rate; }  // tests

 private:
  static void OnPrepare(uv_prepare_t* prepare);

  uv_loop_t* loop_;
  double rate_;
  uv_alloc_cb alloc_;
  uv_read_cb read_;
  UvPtr<uv_prepare_t> prepare_;  // before each turn's poll: reads again
  UvPtr<uv_timer_t> wake_;       // a loop with nothing else to do wakes for a budget
  std::vector<Stream*> waiting_;
};

}  // namespace ltd
