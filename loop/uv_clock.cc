#include "uv_clock.h"

namespace ltd {

struct UvClock::Timer {
  uv_timer_t handle{};
  UvClock* clock = nullptr;
  TimerId id = 0;
  std::function<void()> fn;
};

UvClock::~UvClock() {
  for (auto& [id, timer] : timers_) {
    uv_timer_stop(&timer->handle);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer->handle), &UvClock::OnClosed);
  }
}

Millis UvClock::Monotonic() {
  // uv_now is cached per loop iteration; hrtime is exact and cheap (vDSO).
  return Millis(uv_hrtime() / 1000000);
}

Clock::TimerId UvClock::StartTimer(Millis delay, std::function<void()> fn) {
  auto* timer = new Timer;
  timer->clock = this;
  timer->id = next_id_++;
  timer->fn = std::move(fn);
  timer->handle.data = timer;
  uv_timer_init(loop_, &timer->handle);
  uv_update_time(loop_);
  uv_timer_start(&timer->handle, &UvClock::OnTimer,
                 static_cast<uint64_t>(std::max<int64_t>(delay.count(), 0)), 0);
  timers_.emplace(timer->id, timer);
  return timer->id;
}

void UvClock::CancelTimer(TimerId id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  Timer* timer = it->second;
  timers_.erase(it);
  uv_timer_stop(&timer->handle);
  uv_close(reinterpret_cast<uv_handle_t*>(&timer->handle), &UvClock::OnClosed);
}

void UvClock::OnTimer(uv_timer_t* handle) {
  auto* timer = static_cast<Timer*>(handle->data);
  UvClock* clock = timer->clock;
  auto fn = std::move(timer->fn);
  clock->CancelTimer(timer->id);  // one-shot: free it before running
  fn();
}

void UvClock::OnClosed(uv_handle_t* handle) { delete static_cast<Timer*>(handle->data); }

}  // namespace ltd
