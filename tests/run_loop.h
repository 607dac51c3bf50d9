// Driving a libuv loop from a test: run it until a condition holds, with a
// deadline, and count the handles left on it.
#pragma once

#include <uv.h>

#include <chrono>
#include <functional>

#include "uv_handle.h"

namespace ltd::test {

// Runs `loop` until `done` holds, at most `timeout`; false on the deadline.
inline bool RunLoopUntil(uv_loop_t* loop, const std::function<bool()>& done,
                         std::chrono::milliseconds timeout, uint64_t tick_ms = 20) {
  // A timer bounds each blocking loop iteration, so the deadline holds
  // even when no event ever comes.
  auto tick = UvInit<uv_timer_t>([&](uv_timer_t* t) { return uv_timer_init(loop, t); });
  uv_timer_start(
      tick.get(), [](uv_timer_t*) {}, tick_ms, tick_ms);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool ok = true;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ok = false;
      break;
    }
    uv_run(loop, UV_RUN_ONCE);
  }
  tick.reset();
  uv_run(loop, UV_RUN_NOWAIT);  // let the close complete
  return ok;
}

// Handles on `loop`, closing ones included (libuv's own are not listed).
inline size_t LoopHandles(uv_loop_t* loop) {
  size_t n = 0;
  uv_walk(
      loop, [](uv_handle_t*, void* arg) { ++*static_cast<size_t*>(arg); }, &n);
  return n;
}

}  // namespace ltd::test
