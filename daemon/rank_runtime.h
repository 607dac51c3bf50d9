// What the job manager tracks of a live rank beyond its record: output
// buffers, the heartbeat parser, the log file and the watchdog's clock.
#pragma once

#include <optional>

#include "clock.h"
#include "fd.h"
#include "heartbeat.h"
#include "line_splitter.h"

namespace ltd {

struct RankRuntime {
  static constexpr size_t kMaxOutputLine = 64 * 1024;

  LineSplitter stdout_lines{kMaxOutputLine};
  LineSplitter stderr_lines{kMaxOutputLine};
  HeartbeatParser heartbeats;
  Fd log;  // rank-R.log
  bool alive = false;
  bool malformed_logged = false;
  std::string exec_error;  // the exec shim could not start the program

  // Watchdog, in monotonic time. The deadline is derived, never stored, so a
  // heartbeat costs one assignment and no timer work.
  Millis started{0};
  std::optional<Millis> last_beat;
  std::optional<Millis> timeout;  // a `timeout DUR` from the rank overrides the job's

  // Step rate over a window of at least kRateWindow.
  static constexpr Millis kRateWindow{2000};
  Millis rate_anchor_time{0};
  int64_t rate_anchor_step = -1;

  std::optional<Millis> Deadline(Millis heartbeat_timeout, Millis startup_timeout) const {
    if (!alive) return std::nullopt;
    if (last_beat) {
      const Millis t = timeout.value_or(heartbeat_timeout);
      if (t.count() <= 0) return std::nullopt;
      return *last_beat + t;
    }
    if (timeout && timeout->count() <= 0) return std::nullopt;
    if (startup_timeout.count() <= 0) return std::nullopt;
    return started + startup_timeout;
  }
};

}  // namespace ltd
