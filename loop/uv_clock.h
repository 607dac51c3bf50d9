// Clock on a libuv loop: uv_now for deadlines, one uv_timer_t per timer.
#pragma once

#include <uv.h>

#include <map>

#include "clock.h"

namespace ltd {

class UvClock final : public Clock {
 public:
  explicit UvClock(uv_loop_t* loop) : loop_(loop) {}
  ~UvClock() override;  // cancels every timer still pending

  WallTime Now() override { return std::chrono::system_clock::now(); }
  Millis Monotonic() override;
  TimerId StartTimer(Millis delay, std::function<void()> fn) override;
  void CancelTimer(TimerId id) override;

 private:
  struct Timer;
  static void OnTimer(uv_timer_t* handle);
  static void OnClosed(uv_handle_t* handle);

  uv_loop_t* loop_;
  TimerId next_id_ = 1;
  std::map<TimerId, Timer*> timers_;
};

}  // namespace ltd
