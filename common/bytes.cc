#include "bytes.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "absl/strings/escaping.h"

namespace ltd {
namespace {

// The length of the valid UTF-8 sequence that starts `s`, or 0 if none
// does (a stray continuation byte, an overlong form, a surrogate, a code
// point above U+10FFFF, a sequence cut short).
size_t SequenceLength(std::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 == 0xE0) {
    len = 3, lo = 0xA0;  // below: overlong
  } else if (b0 == 0xED) {
    len = 3, hi = 0x9F;  // above: UTF-16 surrogates
  } else if (b0 >= 0xE1 && b0 <= 0xEF) {
    len = 3;
  } else if (b0 == 0xF0) {
    len = 4, lo = 0x90;  // below: overlong
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    len = 4;
  } else if (b0 == 0xF4) {
    len = 4, hi = 0x8F;  // above: beyond U+10FFFF
  } else {
    return 0;  // 0x80..0xC1 (continuation, overlong lead), 0xF5..0xFF
  }
  if (s.size() < len) return 0;
  if (byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < len; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return len;
}

void AppendHex(std::string& out, const char* prefix, unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%s%0*X", prefix, digits, value);
  out += buf;
}

// The text for the character of `len` bytes at the start of `s` (len 0:
// one invalid byte).
void AppendUnit(std::string& out, std::string_view s, size_t len, Controls controls) {
  if (len == 0) return AppendHex(out, "\\x", static_cast<unsigned char>(s[0]), 2);
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (controls != Controls::kKeep) {
    if (len == 1 && (b0 < 0x20 || b0 == 0x7F) && b0 != '\t' &&
        !(b0 == '\n' && controls == Controls::kKeepNewlines)) {
      if (b0 == '\n') return void(out += "\\n");
      if (b0 == '\r') return void(out += "\\r");
      return AppendHex(out, "\\x", b0, 2);
    }
    const auto b1 = len == 2 ? static_cast<unsigned char>(s[1]) : 0;
    if (len == 2 && b0 == 0xC2 && b1 <= 0x9F) return AppendHex(out, "\\u", b1, 4);  // C1
  }
  out.append(s.data(), len);
}

// The escaped text of `bytes`, at most `limit` bytes of it; `*consumed`:
// how many bytes of the input it covers.
std::string Escape(std::string_view bytes, Controls controls, size_t limit, size_t* consumed) {
  std::string out;
  out.reserve(std::min(bytes.size(), limit));
  size_t i = 0;
  std::string unit;
  while (i < bytes.size()) {
    const std::string_view rest = bytes.substr(i);
    const size_t len = SequenceLength(rest);
    unit.clear();
    AppendUnit(unit, rest, len, controls);
    if (out.size() + unit.size() > limit) break;
    out += unit;
    i += len == 0 ? 1 : len;
  }
  *consumed = i;
  return out;
}

}  // namespace

bool IsValidUtf8(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    // ASCII runs are most of everything; skip them a byte at a time cheaply.
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t len = SequenceLength(bytes.substr(i));
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string DisplayEscape(std::string_view bytes, Controls controls) {
  if (controls == Controls::kKeep && IsValidUtf8(bytes)) return std::string(bytes);
  size_t consumed = 0;
  return Escape(bytes, controls, std::numeric_limits<size_t>::max(), &consumed);
}

std::string DisplayEscapePrefix(std::string_view bytes, size_t limit, size_t* consumed,
                                Controls controls) {
  return Escape(bytes, controls, limit, consumed);
}

std::string ElisionMark(size_t omitted_bytes) {
  return "… [+" + std::to_string(omitted_bytes) + " bytes]";
}

std::string_view CutAtCharacter(std::string_view bytes, size_t max) {
  if (bytes.size() <= max) return bytes;
  const auto continuation = [&](size_t i) {
    return (static_cast<unsigned char>(bytes[i]) & 0xC0) == 0x80;
  };
  // Back to the lead byte of a sequence `max` ends inside: three steps at
  // most.
  size_t keep = max;
  for (int back = 0; back < 3 && keep > 0 && continuation(keep); ++back) --keep;
  return bytes.substr(0, continuation(keep) ? max : keep);
}

std::string CutElided(std::string_view bytes, size_t max) {
  if (bytes.size() <= max) return std::string(bytes);
  // The mark's length grows with the count; the whole size's is a bound.
  const std::string_view kept =
      CutAtCharacter(bytes, max - std::min(max, ElisionMark(bytes.size()).size()));
  return std::string(kept) + ElisionMark(bytes.size() - kept.size());
}

std::string DisplayEscapeElided(std::string_view bytes, size_t limit, Controls controls) {
  if (bytes.size() <= limit && controls == Controls::kKeep && IsValidUtf8(bytes)) {
    return std::string(bytes);
  }
  size_t consumed = 0;
  std::string out = Escape(bytes, controls, limit, &consumed);
  if (consumed < bytes.size()) out += ElisionMark(bytes.size() - consumed);
  return out;
}

nlohmann::json BytesToJson(std::string_view bytes) {
  if (IsValidUtf8(bytes)) return std::string(bytes);
  std::string encoded;
  absl::Base64Escape(absl::string_view(bytes.data(), bytes.size()), &encoded);
  return {{"base64", encoded}};
}

std::optional<std::string> BytesFromJson(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (!j.is_object() || j.size() != 1) return std::nullopt;
  auto it = j.find("base64");
  if (it == j.end() || !it->is_string()) return std::nullopt;
  const std::string& encoded = it->get_ref<const std::string&>();
  std::string decoded;
  if (!absl::Base64Unescape(absl::string_view(encoded.data(), encoded.size()), &decoded)) {
    return std::nullopt;
  }
  return decoded;
}

}  // namespace ltd
