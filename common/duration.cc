#include "duration.h"

#include <charconv>
#include <cmath>
#include <cstdint>

namespace ltd {
namespace {

// A year is far beyond any sane timeout; rejecting more keeps arithmetic safe.
constexpr double kMaxMs = 365.0 * 24 * 3600e3;

std::optional<Millis> Checked(double ms) {
  if (!std::isfinite(ms) || ms < 0 || ms > kMaxMs) return std::nullopt;
  return Millis(static_cast<int64_t>(std::llround(ms)));
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A non-negative decimal number at the front of `text` ("12", "1.5", ".5"),
// taken off it; nullopt when there is none.
std::optional<double> TakeNumber(std::string_view& text) {
  size_t n = 0;
  while (n < text.size() && (IsDigit(text[n]) || text[n] == '.')) ++n;
  if (n == 0) return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + n, value);
  if (ec != std::errc() || end != text.data() + n) return std::nullopt;
  text.remove_prefix(n);
  return value;
}

// Digits only ("07"), at most 9 of them, as Slurm's clock fields.
std::optional<int64_t> Field(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  int64_t value = 0;
  for (char c : text) {
    if (!IsDigit(c)) return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

// Slurm's "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS". The first
// field may be as large as it likes ("90:00"); a later one past 59 is a
// typo, refused.
std::optional<Millis> ParseClock(std::string_view text) {
  int64_t days = 0;
  const bool has_days = text.find('-') != std::string_view::npos;
  if (has_days) {
    const size_t dash = text.find('-');
    auto d = Field(text.substr(0, dash));
    if (!d) return std::nullopt;
    days = *d;
    text.remove_prefix(dash + 1);
  }
  int64_t fields[3] = {0, 0, 0};
  size_t count = 0;
  while (true) {
    const size_t colon = text.find(':');
    if (count == 3) return std::nullopt;
    auto f = Field(text.substr(0, colon));
    if (!f) return std::nullopt;
    if (count > 0 && *f > 59) return std::nullopt;
    fields[count++] = *f;
    if (colon == std::string_view::npos) break;
    text.remove_prefix(colon + 1);
  }
  int64_t seconds = 0;
  if (has_days) {
    if (fields[0] > 23) return std::nullopt;
    seconds = days * 86400 + fields[0] * 3600 + fields[1] * 60 + fields[2];  // D-HH[:MM[:SS]]
  } else if (count == 2) {
    seconds = fields[0] * 60 + fields[1];  // MM:SS
  } else if (count == 3) {
    seconds = fields[0] * 3600 + fields[1] * 60 + fields[2];  // HH:MM:SS
  } else {
    return std::nullopt;  // a plain number is not a clock
  }
  return Checked(static_cast<double>(seconds) * 1e3);
}

}  // namespace

std::optional<Millis> ParseDuration(std::string_view text, Millis bare) {
  if (text.find_first_of(":-") != std::string_view::npos) return ParseClock(text);
  if (text.empty()) return std::nullopt;
  struct Unit {
    std::string_view suffix;
    double ms;
  };
  // Largest first: each unit at most once and in this order ("1h30m",
  // not "30m1h"); "ms" before "m" so that "500ms" is not "500m" + "s".
  static constexpr Unit kUnits[] = {
      {"d", 86400e3}, {"h", 3600e3}, {"ms", 1}, {"m", 60e3}, {"s", 1e3}};
  static constexpr int kOrder[] = {0, 1, 3, 4, 2};  // d h m s ms
  double total = 0;
  int next = 0;  // index into kOrder of the smallest unit still allowed
  bool any = false;
  while (!text.empty()) {
    auto value = TakeNumber(text);
    if (!value) return std::nullopt;
    if (text.empty()) {
      if (any) return std::nullopt;  // "1h30": 30 of what?
      return Checked(*value * static_cast<double>(bare.count()));
    }
    const Unit* unit = nullptr;
    int rank = -1;
    for (int i = 0; i < 5; ++i) {
      if (text.starts_with(kUnits[i].suffix)) {
        unit = &kUnits[i];
        for (int o = 0; o < 5; ++o)
          if (kOrder[o] == i) rank = o;
        break;
      }
    }
    if (unit == nullptr || rank < next) return std::nullopt;
    text.remove_prefix(unit->suffix.size());
    total += *value * unit->ms;
    next = rank + 1;
    any = true;
  }
  return Checked(total);
}

std::optional<Millis> ParseTimeLimit(std::string_view text) {
  return ParseDuration(text, std::chrono::minutes(1));
}

std::string FormatDuration(Millis d) {
  const int64_t ms = d.count();
  if (ms % 3600000 == 0 && ms != 0) return std::to_string(ms / 3600000) + "h";
  if (ms % 60000 == 0 && ms != 0) return std::to_string(ms / 60000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace ltd
