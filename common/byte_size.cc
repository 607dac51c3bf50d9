#include "byte_size.h"

#include <cctype>
#include <utility>

namespace ltd {

std::optional<uint64_t> ParseByteSize(std::string_view text) {
  if (text.empty()) return std::nullopt;
  uint64_t value = 0;
  size_t i = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    // Checked before it is computed: 2^62 * 10 wraps around 2^64, and
    // "36893488147419103240" would read as 8.
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > ((1ull << 62) - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  if (i == 0) return std::nullopt;
  std::string_view unit = text.substr(i);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.remove_suffix(1);
  int shift = 0;
  if (unit == "K" || unit == "k" || unit == "Ki") {
    shift = 10;
  } else if (unit == "M" || unit == "m" || unit == "Mi") {
    shift = 20;
  } else if (unit == "G" || unit == "g" || unit == "Gi") {
    shift = 30;
  } else if (unit == "T" || unit == "t" || unit == "Ti") {
    shift = 40;
  } else if (!unit.empty()) {
    return std::nullopt;
  }
  if (value > ((1ull << 62) >> shift)) return std::nullopt;
  return value << shift;
}

std::string FormatByteSize(uint64_t bytes) {
  static constexpr std::pair<int, char> kUnits[] = {{40, 'T'}, {30, 'G'}, {20, 'M'}, {10, 'K'}};
  for (const auto& [shift, unit] : kUnits) {
    const uint64_t size = 1ull << shift;
    if (bytes >= size && bytes % size == 0) return std::to_string(bytes >> shift) + unit;
  }
  return std::to_string(bytes);
}

}  // namespace ltd
