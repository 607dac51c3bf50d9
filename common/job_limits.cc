#include "job_limits.h"

#include <cctype>

namespace ltd {

std::optional<uint32_t> ParseCpus(std::string_view text) {
  // N or N.DDD, at most 3 decimals: thousandths of a CPU.
  uint64_t whole = 0, frac = 0;
  size_t i = 0, digits = 0, decimals = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++digits) {
    whole = whole * 10 + static_cast<uint64_t>(text[i] - '0');
    if (whole > 1000000) return std::nullopt;
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
      if (++decimals > 3) return std::nullopt;
      frac = frac * 10 + static_cast<uint64_t>(text[i] - '0');
    }
  }
  if (i != text.size() || digits + decimals == 0) return std::nullopt;
  while (decimals++ < 3) frac *= 10;
  const uint64_t millis = whole * 1000 + frac;
  if (millis == 0) return std::nullopt;
  return static_cast<uint32_t>(millis);
}

std::string FormatCpus(uint32_t millis) {
  std::string out = std::to_string(millis / 1000);
  if (uint32_t frac = millis % 1000; frac != 0) {
    std::string f = std::to_string(1000 + frac).substr(1);
    while (f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out;
}

}  // namespace ltd
