// Formatting of heartbeat protocol lines (docs/protocol.md, "Heartbeats").
//
// Pure functions over caller-provided buffers: the C API formats on the
// stack, so a heartbeat costs no allocation, and tests check the exact bytes
// without any fd.
#ifndef LTWORKER_SRC_LINE_FORMAT_H_
#define LTWORKER_SRC_LINE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace ltworker::internal {

// The longest line we ever write, '\n' included. It stays below PIPE_BUF
// (4096 on Linux) so a write to a pipe is atomic and concurrent writers never
// interleave; ltd also treats longer lines as malformed.
inline constexpr std::size_t kMaxLineBytes = 4095;

// Enough for "hb " or "timeout " plus any int64 and a unit and '\n'.
inline constexpr std::size_t kShortLineBytes = 40;

// Appended to error text that had to be cut.
inline constexpr std::string_view kTruncationMark = "...";

// Each function writes one complete line, '\n' included, into `out` and
// returns its length. It returns 0 when the argument is invalid (a negative
// step or timeout) or `out` is too small; nothing useful is in `out` then.

// "hb\n".
std::size_t FormatHeartbeat(std::span<char> out);

// "hb STEP\n"; `step` must be >= 0.
std::size_t FormatHeartbeatStep(std::int64_t step, std::span<char> out);

// "timeout DUR\n" where DUR is "0" (watchdog off), "Ns" for whole seconds or
// "Nms" otherwise, all spellings ltd's duration parser accepts. More than
// LT_MAX_TIMEOUT_MS (ltworker.h) is written as LT_MAX_TIMEOUT_MS.
std::size_t FormatTimeout(std::int64_t milliseconds, std::span<char> out);

// "error TEXT\n" with control characters (newlines included) turned into
// spaces and non-ASCII bytes into '?'. When the line would exceed
// min(kMaxLineBytes, out.size()) the text is cut and ends in kTruncationMark.
// An empty text gives "error\n".
std::size_t FormatError(std::string_view text, std::span<char> out);

}  // namespace ltworker::internal

#endif  // LTWORKER_SRC_LINE_FORMAT_H_
