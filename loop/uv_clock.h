// Clock on a libuv loop: uv_now for deadlines, one uv_timer_t per timer.
#pragma once

#include <uv.h>

#include <map>

#include "clock.h"
#include "uv_handle.h"

namespace ltd {

class UvClock final : public Clock {
 public:
  explicit UvClock(uv_loop_t* loop) : loop_(loop) {}
  ~UvClock() override;  // cancels every timer still pending

  WallTime Now() override { return std::chrono::system_clock::now(); }
  Millis Monotonic() override;
  TimerId StartTimer(Millis delay, std::function<void()> fn) override;
  void CancelTimer(TimerId id) override;

  size_t pending_timers() const { return timers_.size(); }

 private:
  struct Timer {
    UvClock* clock = nullptr;
    TimerId id = 0;
    std::function<void()> fn;
    UvPtr<uv_timer_t> handle;  // data: this Timer (a map node, never moved)
  };
  static void OnTimer(uv_timer_t* handle);

  uv_loop_t* loop_;
  TimerId next_id_ = 1;
  // Pending timers. Erasing one closes its handle, which stops it: no
  // callback reaches a Timer after that.
  std::map<TimerId, Timer> timers_;
};

}  // namespace ltd
