#include "duration.h"

#include <charconv>
#include <cmath>

namespace ltd {

std::optional<Millis> ParseDuration(std::string_view text) {
  struct Unit {
    std::string_view suffix;
    double ms;
  };
  // Longest suffixes first so "ms" is not read as "m" + garbage.
  static constexpr Unit kUnits[] = {{"ms", 1}, {"s", 1e3}, {"m", 60e3}, {"h", 3600e3}};
  double scale = 1e3;  // plain numbers are seconds
  for (const Unit& unit : kUnits) {
    if (text.size() > unit.suffix.size() && text.ends_with(unit.suffix)) {
      text.remove_suffix(unit.suffix.size());
      scale = unit.ms;
      break;
    }
  }
  if (text.empty() ||
      !(std::isdigit(static_cast<unsigned char>(text.front())) || text.front() == '.')) {
    return std::nullopt;
  }
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  const double ms = value * scale;
  // A year is far beyond any sane timeout; rejecting it keeps arithmetic safe.
  if (!std::isfinite(ms) || ms < 0 || ms > 365.0 * 24 * 3600e3) return std::nullopt;
  return Millis(static_cast<int64_t>(std::llround(ms)));
}

std::string FormatDuration(Millis d) {
  const int64_t ms = d.count();
  if (ms % 3600000 == 0 && ms != 0) return std::to_string(ms / 3600000) + "h";
  if (ms % 60000 == 0 && ms != 0) return std::to_string(ms / 60000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace ltd
