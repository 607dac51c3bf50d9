// The libuv loop that owns all job, rank and process state, and the one
// door into it from other threads: Post() queues a closure under a mutex
// and wakes the loop with uv_async; the loop runs the closures in order.
// A closure posted from the loop's own thread while Run() runs needs no
// wake-up (an eventfd's write, and its read by the loop): an idle handle
// runs it on the next turn, whose poll does not wait meanwhile.
#pragma once

#include <uv.h>

#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "uv_handle.h"

namespace ltd {

class Loop {
 public:
  Loop();
  ~Loop();  // closes every handle it made and checks the loop closes clean
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  uv_loop_t* get() { return &loop_; }

  // Thread-safe; never runs `fn` before it returns. Closures posted after
  // Close() are dropped.
  void Post(std::function<void()> fn);

  // Runs until Stop(); returns uv_run's result.
  int Run();
  // Runs the loop while `fn` runs on another thread, until it returns:
  // for a gRPC server's Shutdown, which waits for calls whose last step
  // was posted here.
  void RunWhile(const std::function<void()>& fn);
  // Loop thread only: ends Run() once the current iteration is done.
  void Stop() { uv_stop(&loop_); }

  // Loop thread only: closes the loop's own handle and runs the loop until
  // every close callback ran; then uv_loop_close's result (0: no handle
  // was left open). Posts are dropped from here on. The destructor does
  // this, and logs a leak, when it was not done before.
  int Close();

 private:
  void Drain();
  void DrainSoon();

  uv_loop_t loop_{};
  bool loop_closed_ = false;
  std::mutex mu_;
  // Closed with the loop; other threads reach it only under mu_, so none
  // wakes a handle that is gone.
  UvPtr<uv_async_t> async_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  // The thread in Run(), none outside it: its posts start soon_.
  std::thread::id runner_ ABSL_GUARDED_BY(mu_);
  UvPtr<uv_idle_t> soon_;  // loop thread only
};

}  // namespace ltd
