// The libuv loop that owns all job, rank and process state, and the one
// door into it from other threads: Post() queues a closure under a mutex
// and wakes the loop with uv_async; the loop runs the closures in order.
#pragma once

#include <uv.h>

#include <functional>
#include <mutex>
#include <vector>

namespace ltd {

class Loop {
 public:
  Loop();
  ~Loop();  // closes every handle it made and checks the loop closes clean
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  uv_loop_t* get() { return &loop_; }

  // Thread-safe. Closures posted after Close() are dropped.
  void Post(std::function<void()> fn);

  // Runs until Stop(); returns uv_run's result.
  int Run();
  // Runs the loop while `fn` runs on another thread, until it returns:
  // for a gRPC server's Shutdown, which waits for calls whose last step
  // was posted here.
  void RunWhile(const std::function<void()>& fn);
  // Loop thread only: ends Run() once the current iteration is done.
  void Stop() { uv_stop(&loop_); }

 private:
  static void OnAsync(uv_async_t* handle);
  void Drain();

  uv_loop_t loop_{};
  uv_async_t async_{};
  std::mutex mu_;
  std::vector<std::function<void()>> queue_;  // guarded by mu_
  bool closed_ = false;                       // guarded by mu_
};

}  // namespace ltd
