#include "uv_clock.h"

#include <cstdlib>

#include "spdlog/spdlog.h"

namespace ltd {

UvClock::~UvClock() {
  // Taken out first: a callback's captures, destroyed with it, may cancel
  // timers of their own.
  auto timers = std::move(timers_);
  timers_.clear();
}

Millis UvClock::Monotonic() {
  // uv_now is cached per loop iteration; hrtime is exact and cheap (vDSO).
  return Millis(uv_hrtime() / 1000000);
}

Clock::TimerId UvClock::StartTimer(Millis delay, std::function<void()> fn) {
  auto handle = UvInit<uv_timer_t>([&](uv_timer_t* h) { return uv_timer_init(loop_, h); });
  if (!handle) {
    // uv_timer_init cannot fail; a timer that never fires would be worse
    // than stopping here (a watchdog or a grace period silently lost).
    spdlog::critical("uv_timer_init failed");
    std::abort();
  }
  const TimerId id = next_id_++;
  Timer& timer = timers_[id];
  timer.clock = this;
  timer.id = id;
  timer.fn = std::move(fn);
  timer.handle = std::move(handle);
  timer.handle->data = &timer;
  uv_update_time(loop_);
  uv_timer_start(timer.handle.get(), &UvClock::OnTimer,
                 static_cast<uint64_t>(std::max<int64_t>(delay.count(), 0)), 0);
  return id;
}

void UvClock::CancelTimer(TimerId id) {
  // Out of the map before it is destroyed: its callback's captures may
  // cancel other timers from their destructors.
  auto gone = timers_.extract(id);
}

void UvClock::OnTimer(uv_timer_t* handle) {
  auto* timer = static_cast<Timer*>(handle->data);
  UvClock* clock = timer->clock;
  auto fn = std::move(timer->fn);
  clock->CancelTimer(timer->id);  // one-shot: gone before it runs, `timer` with it
  fn();
}

}  // namespace ltd
