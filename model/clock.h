// Time as the job manager sees it: wall time for records, a monotonic clock
// for deadlines, and one-shot timers. Production uses libuv (uv_clock.h);
// tests use a fake that only moves when told, so nothing sleeps.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "job.h"

namespace ltd {

using Millis = std::chrono::milliseconds;

class Clock {
 public:
  using TimerId = uint64_t;

  virtual ~Clock() = default;
  virtual WallTime Now() = 0;
  virtual Millis Monotonic() = 0;
  // Runs `fn` once on the loop after `delay`. Ids are never reused, so
  // cancelling a timer that already fired is harmless.
  virtual TimerId StartTimer(Millis delay, std::function<void()> fn) = 0;
  virtual void CancelTimer(TimerId id) = 0;
};

}  // namespace ltd
