// libltworker for C++: the same calls as ltworker.h, with C++ types.
//
// Every function is a thin inline wrapper, so the shared library's ABI stays
// the C one. They return true when the line was written or when the program
// runs without ltd (nothing to do), false when the line was dropped (errno
// says why). A training loop normally ignores the result: a dropped
// heartbeat is simply late.
#ifndef LTWORKER_LTWORKER_HPP_
#define LTWORKER_LTWORKER_HPP_

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "ltworker/ltworker.h"

namespace ltworker {

// True when this process runs under ltd (LT_HEARTBEAT_FD is set and valid).
inline bool Enabled() noexcept { return lt_enabled() != 0; }

// "hb": alive, without progress information.
inline bool Heartbeat() noexcept { return lt_heartbeat() == 0; }

// "hb STEP": alive at progress counter `step` (>= 0).
inline bool Heartbeat(std::int64_t step) noexcept { return lt_heartbeat_step(step) == 0; }

// "timeout DUR": the heartbeat deadline from now on, for any std::chrono
// duration. Only a zero duration turns the watchdog off: a positive one
// rounds up to whole milliseconds (microseconds(400) is "timeout 1ms", never
// "timeout 0"), and one longer than LT_MAX_TIMEOUT_MS is sent as that,
// without overflowing on the way. A negative or not-finite one fails with
// EINVAL. Floating-point durations are rounded to whole microseconds before
// rounding up, so duration<double>(1.1) is 1100ms, not 1101ms.
template <typename Rep, typename Period>
inline bool SetTimeout(std::chrono::duration<Rep, Period> timeout) noexcept {
  constexpr std::int64_t kMaxMs = LT_MAX_TIMEOUT_MS;
  if constexpr (std::is_floating_point_v<Rep>) {
    const Rep count = timeout.count();
    if (!(count >= 0) || std::isinf(count)) return lt_set_timeout_ms(-1) == 0;  // EINVAL
    if (count == 0) return lt_set_timeout_ms(0) == 0;
    // Finite and positive, but the conversion may still overflow to inf or
    // underflow to 0.
    const double us = std::chrono::duration<double, std::micro>(timeout).count();
    if (!(us < static_cast<double>(kMaxMs) * 1000)) return lt_set_timeout_ms(kMaxMs) == 0;
    const std::int64_t whole_us = std::max<std::int64_t>(1, std::llround(us));
    return lt_set_timeout_ms((whole_us + 999) / 1000) == 0;
  } else {
    if constexpr (std::is_signed_v<Rep>) {
      if (timeout.count() < 0) return lt_set_timeout_ms(-1) == 0;
    }
    if (timeout.count() == 0) return lt_set_timeout_ms(0) == 0;
    // Compared in floating point: converting hours::max() to milliseconds
    // would overflow. Below the limit the exact integer ceil is safe.
    if (std::chrono::duration<long double, std::milli>(timeout).count() >= kMaxMs) {
      return lt_set_timeout_ms(kMaxMs) == 0;
    }
    return lt_set_timeout_ms(std::chrono::ceil<std::chrono::milliseconds>(timeout).count()) == 0;
  }
}

// "error TEXT": this rank's account of a failure, kept as the job's root
// cause message if this rank is the root cause.
inline bool ReportError(std::string_view text) noexcept {
  return lt_report_error_n(text.data(), text.size()) == 0;
}

}  // namespace ltworker

#endif  // LTWORKER_LTWORKER_HPP_
