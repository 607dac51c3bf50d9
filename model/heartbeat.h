// The heartbeat protocol of docs/protocol.md: newline-terminated ASCII lines a rank
// writes to LT_HEARTBEAT_FD. Whatever arrives, the parser keeps at most one
// line in memory and never fails; bad lines are counted and skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "duration.h"
#include "line_splitter.h"

namespace ltd {

struct HeartbeatMessage {
  // kAuto*: lines of ltd's own automatic heartbeat module (docs/user-guide.md,
  // "Automatic heartbeats"): `auto on`, `auto step N`, `auto live`,
  // `auto late` (the module's own checks ran late: the interval is no
  // evidence either way), `auto stack FRAME<TAB>FRAME...` (innermost first),
  // `auto stacksig N` (faulthandler writes every thread to the stack pipe
  // on signal N: `ltctl stack`).
  enum class Kind {
    kBeat,
    kTimeout,
    kError,
    kExecFailed,
    kAutoOn,
    kAutoStep,
    kAutoLive,
    kAutoLate,
    kAutoStack,
    kAutoStackSignal
  };
  Kind kind = Kind::kBeat;
  std::optional<int64_t> step;  // kBeat, kAutoStep; kAutoStackSignal: the signal
  Millis timeout{0};            // kTimeout; 0 turns the watchdog off
  std::string text;             // kError, kExecFailed, kAutoStack
};

// nullopt for a malformed line.
std::optional<HeartbeatMessage> ParseHeartbeatLine(std::string_view line);

class HeartbeatParser {
 public:
  static constexpr size_t kMaxLine = 4096;

  // on_message(const HeartbeatMessage&); on_malformed(std::string_view why).
  template <typename OnMessage, typename OnMalformed>
  void Feed(std::string_view data, OnMessage&& on_message, OnMalformed&& on_malformed) {
    splitter_.Feed(data, [&](std::string_view line, bool overlong) {
      // The splitter marks every piece of an overlong line, its tail too.
      if (overlong) {
        if (!line_was_overlong_) on_malformed("line longer than 4096 bytes");
        line_was_overlong_ = true;
        return;
      }
      line_was_overlong_ = false;
      if (auto msg = ParseHeartbeatLine(line)) {
        on_message(*msg);
      } else {
        on_malformed(line);
      }
    });
  }

 private:
  LineSplitter splitter_{kMaxLine};
  bool line_was_overlong_ = false;  // report each overlong line once
};

}  // namespace ltd
