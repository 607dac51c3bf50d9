// libltworker for C++: the same calls as ltworker.h, with C++ types.
//
// Every function is a thin inline wrapper, so the shared library's ABI stays
// the C one. They return true when the line was written or when the program
// runs without ltd (nothing to do), false when the line was dropped (errno
// says why). A training loop normally ignores the result: a dropped
// heartbeat is simply late.
#ifndef LTWORKER_LTWORKER_HPP_
#define LTWORKER_LTWORKER_HPP_

#include <chrono>
#include <cstdint>
#include <string_view>

#include "ltworker/ltworker.h"

namespace ltworker {

// True when this process runs under ltd (LT_HEARTBEAT_FD is set and valid).
inline bool Enabled() noexcept { return lt_enabled() != 0; }

// "hb": alive, without progress information.
inline bool Heartbeat() noexcept { return lt_heartbeat() == 0; }

// "hb STEP": alive at progress counter `step` (>= 0).
inline bool Heartbeat(std::int64_t step) noexcept { return lt_heartbeat_step(step) == 0; }

// "timeout DUR": the heartbeat deadline from now on; zero turns the watchdog
// off. Seconds, minutes and hours convert implicitly.
inline bool SetTimeout(std::chrono::milliseconds timeout) noexcept {
  return lt_set_timeout_ms(timeout.count()) == 0;
}

// "error TEXT": this rank's account of a failure, kept as the job's root
// cause message if this rank is the root cause.
inline bool ReportError(std::string_view text) noexcept {
  return lt_report_error_n(text.data(), text.size()) == 0;
}

}  // namespace ltworker

#endif  // LTWORKER_LTWORKER_HPP_
