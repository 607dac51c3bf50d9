#include "line_format.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "ltworker/ltworker.h"

namespace ltworker::internal {
namespace {

// Copies `s` to out[pos...]; returns the new position or 0 when it does not
// fit (0 is never a valid end of a line).
std::size_t Append(std::string_view s, std::span<char> out, std::size_t pos) {
  if (pos + s.size() > out.size()) return 0;
  std::memcpy(out.data() + pos, s.data(), s.size());
  return pos + s.size();
}

std::size_t AppendInt(std::int64_t value, std::span<char> out, std::size_t pos) {
  auto [end, ec] = std::to_chars(out.data() + pos, out.data() + out.size(), value);
  if (ec != std::errc()) return 0;
  return static_cast<std::size_t>(end - out.data());
}

// Finishes a line: prefix + number + suffix + '\n'.
std::size_t NumberLine(std::string_view prefix, std::int64_t value, std::string_view suffix,
                       std::span<char> out) {
  std::size_t pos = Append(prefix, out, 0);
  if (pos == 0) return 0;
  pos = AppendInt(value, out, pos);
  if (pos == 0) return 0;
  if (!suffix.empty() && (pos = Append(suffix, out, pos)) == 0) return 0;
  return Append("\n", out, pos);
}

char Sanitize(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x80) return '?';
  if (u < 0x20 || u == 0x7f) return ' ';
  return c;
}

}  // namespace

std::size_t FormatHeartbeat(std::span<char> out) { return Append("hb\n", out, 0); }

std::size_t FormatHeartbeatStep(std::int64_t step, std::span<char> out) {
  if (step < 0) return 0;
  return NumberLine("hb ", step, "", out);
}

std::size_t FormatTimeout(std::int64_t milliseconds, std::span<char> out) {
  if (milliseconds < 0) return 0;
  // ltd ignores a longer timeout as malformed, which would silently keep the
  // old deadline; the longest it accepts is the closest to what was asked.
  milliseconds = std::min(milliseconds, LT_MAX_TIMEOUT_MS);
  if (milliseconds % 1000 == 0) {
    // "timeout 0" is how the protocol spells "off"; keep it unit-less.
    return NumberLine("timeout ", milliseconds / 1000, milliseconds == 0 ? "" : "s", out);
  }
  return NumberLine("timeout ", milliseconds, "ms", out);
}

std::size_t FormatError(std::string_view text, std::span<char> out) {
  constexpr std::string_view kPrefix = "error ";
  const std::size_t limit = std::min(out.size(), kMaxLineBytes);
  if (text.empty()) return limit >= 6 ? Append("error\n", out, 0) : 0;
  // The smallest useful line: prefix, the mark, '\n'.
  if (limit < kPrefix.size() + kTruncationMark.size() + 1) return 0;

  std::size_t pos = Append(kPrefix, out, 0);
  const std::size_t room = limit - pos - 1;  // bytes of text that fit before '\n'
  const bool cut = text.size() > room;
  const std::size_t keep = cut ? room - kTruncationMark.size() : text.size();
  char* dst = out.data() + pos;
  for (std::size_t i = 0; i < keep; ++i) dst[i] = Sanitize(text[i]);
  pos += keep;
  if (cut) pos = Append(kTruncationMark, out, pos);
  out[pos++] = '\n';
  return pos;
}

}  // namespace ltworker::internal
