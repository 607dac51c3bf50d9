#include "hostlist.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>

#include "bytes.h"
#include "str_util.h"

namespace ltd {
namespace {

// Longer than any node list Slurm hands out; a bound for what is parsed.
constexpr size_t kMaxListBytes = 1 << 20;
// Node numbers fit comfortably in 64 bits with this many digits.
constexpr size_t kMaxDigits = 18;
// A host name no resolver takes past (DNS's 253); it bounds what a list
// expands to at max_hosts names of this.
constexpr size_t kMaxHostBytes = 253;

struct Range {
  uint64_t lo = 0, hi = 0;
  size_t width = 0;  // the low bound's digits: its zero padding
};

// A piece of one host pattern: literal text, or a bracket group.
struct Part {
  std::string text;
  std::vector<Range> ranges;  // empty: literal
};

using Pattern = std::vector<Part>;

bool HostChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

absl::Status Bad(std::string_view list, const std::string& why) {
  return absl::InvalidArgumentError(
      Cat("host list '", DisplayEscapeElided(list, 80, Controls::kEscape), "': ", why));
}

size_t SaturatingMul(size_t a, size_t b) {
  if (a != 0 && b > std::numeric_limits<size_t>::max() / a) {
    return std::numeric_limits<size_t>::max();
  }
  return a * b;
}

size_t SaturatingAdd(size_t a, size_t b) {
  return b > std::numeric_limits<size_t>::max() - a ? std::numeric_limits<size_t>::max() : a + b;
}

absl::StatusOr<uint64_t> Number(std::string_view list, std::string_view digits) {
  if (digits.empty() || digits.size() > kMaxDigits ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Bad(list, Cat("'", DisplayEscapeElided(digits, 40, Controls::kEscape),
                         "' in brackets is not a number"));
  }
  uint64_t n = 0;
  for (char c : digits) n = n * 10 + static_cast<uint64_t>(c - '0');
  return n;
}

// "01-04,07" (the inside of a bracket group).
absl::StatusOr<std::vector<Range>> ParseRanges(std::string_view list, std::string_view inside) {
  std::vector<Range> ranges;
  size_t start = 0;
  while (true) {
    const size_t comma = inside.find(',', start);
    const std::string_view item = inside.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const size_t dash = item.find('-');
    Range r;
    auto lo = Number(list, item.substr(0, dash));
    if (!lo.ok()) return lo.status();
    r.lo = r.hi = *lo;
    r.width = dash == std::string_view::npos ? item.size() : dash;
    if (dash != std::string_view::npos) {
      auto hi = Number(list, item.substr(dash + 1));
      if (!hi.ok()) return hi.status();
      if (*hi < *lo) {
        return Bad(list, Cat("range ", DisplayEscape(item, Controls::kEscape), " runs backwards"));
      }
      r.hi = *hi;
    }
    ranges.push_back(r);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return ranges;
}

size_t Digits(uint64_t n) {
  size_t d = 1;
  while (n >= 10) n /= 10, ++d;
  return d;
}

// The longest name a pattern makes: its text, and each group's widest number.
size_t LongestHost(const Pattern& pattern) {
  size_t n = 0;
  for (const Part& part : pattern) {
    size_t widest = part.text.size();
    for (const Range& r : part.ranges) widest = std::max({widest, r.width, Digits(r.hi)});
    n += widest;
  }
  return n;
}

// One comma-separated element: "rack[1-2]-n[01-02]".
absl::StatusOr<Pattern> ParsePattern(std::string_view list, std::string_view element) {
  if (element.empty()) return Bad(list, "an empty host name (two commas in a row?)");
  Pattern pattern;
  size_t i = 0;
  while (i < element.size()) {
    if (element[i] == '[') {
      const size_t close = element.find(']', i);
      if (close == std::string_view::npos) return Bad(list, "a '[' is never closed");
      const std::string_view inside = element.substr(i + 1, close - i - 1);
      if (inside.find('[') != std::string_view::npos) return Bad(list, "brackets cannot nest");
      auto ranges = ParseRanges(list, inside);
      if (!ranges.ok()) return ranges.status();
      pattern.push_back(Part{"", std::move(*ranges)});
      i = close + 1;
      continue;
    }
    if (element[i] == ']') return Bad(list, "a ']' without its '['");
    if (!HostChar(element[i])) {
      return Bad(list, Cat("'", DisplayEscape(element.substr(i, 1), Controls::kEscape),
                           "' cannot be part of a host name"));
    }
    size_t end = i;
    while (end < element.size() && HostChar(element[end])) ++end;
    pattern.push_back(Part{std::string(element.substr(i, end - i)), {}});
    i = end;
  }
  if (LongestHost(pattern) > kMaxHostBytes) {
    return Bad(list, Cat("a host name is longer than ", kMaxHostBytes, " bytes"));
  }
  return pattern;
}

// Splits at the commas outside brackets.
absl::StatusOr<std::vector<Pattern>> Parse(std::string_view list) {
  if (list.empty()) return Bad(list, "it is empty");
  if (list.size() > kMaxListBytes) {
    return absl::InvalidArgumentError(
        Cat("host list of ", list.size(), " bytes is longer than ", kMaxListBytes));
  }
  std::vector<Pattern> patterns;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']') --depth;
    if (i < list.size() && (list[i] != ',' || depth > 0)) continue;
    auto pattern = ParsePattern(list, list.substr(start, i - start));
    if (!pattern.ok()) return pattern.status();
    patterns.push_back(std::move(*pattern));
    start = i + 1;
  }
  return patterns;
}

size_t Count(const Pattern& pattern) {
  size_t n = 1;
  for (const Part& part : pattern) {
    if (part.ranges.empty()) continue;
    size_t in_group = 0;
    for (const Range& r : part.ranges) {
      in_group = SaturatingAdd(in_group, r.hi - r.lo >= std::numeric_limits<size_t>::max()
                                             ? std::numeric_limits<size_t>::max()
                                             : static_cast<size_t>(r.hi - r.lo) + 1);
    }
    n = SaturatingMul(n, in_group);
  }
  return n;
}

std::string Padded(uint64_t n, size_t width) {
  std::string digits = std::to_string(n);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

// Every host of one pattern, the last bracket group varying fastest.
void Expand(const Pattern& pattern, size_t part, std::string& prefix,
            std::vector<std::string>& out) {
  if (part == pattern.size()) {
    out.push_back(prefix);
    return;
  }
  const size_t mark = prefix.size();
  const Part& p = pattern[part];
  if (p.ranges.empty()) {
    prefix += p.text;
    Expand(pattern, part + 1, prefix, out);
  } else {
    for (const Range& r : p.ranges) {
      for (uint64_t n = r.lo;; ++n) {
        prefix.resize(mark);
        prefix += Padded(n, r.width);
        Expand(pattern, part + 1, prefix, out);
        if (n == r.hi) break;
      }
    }
  }
  prefix.resize(mark);
}

}  // namespace

absl::StatusOr<size_t> CountHosts(std::string_view list) {
  auto patterns = Parse(list);
  if (!patterns.ok()) return patterns.status();
  size_t n = 0;
  for (const Pattern& p : *patterns) n = SaturatingAdd(n, Count(p));
  return n;
}

absl::StatusOr<std::vector<std::string>> ExpandHostlist(std::string_view list, size_t max_hosts) {
  auto patterns = Parse(list);
  if (!patterns.ok()) return patterns.status();
  size_t n = 0;
  for (const Pattern& p : *patterns) n = SaturatingAdd(n, Count(p));
  if (n > max_hosts) {
    return Bad(list, Cat("it names more than ", max_hosts, " hosts"));
  }
  std::vector<std::string> hosts;
  hosts.reserve(n);
  std::string prefix;
  for (const Pattern& p : *patterns) Expand(p, 0, prefix, hosts);
  return hosts;
}

absl::StatusOr<std::string> FirstHost(std::string_view list) {
  auto patterns = Parse(list);
  if (!patterns.ok()) return patterns.status();
  std::string host;
  for (const Part& part : patterns->front()) {
    host +=
        part.ranges.empty() ? part.text : Padded(part.ranges.front().lo, part.ranges.front().width);
  }
  return host;
}

}  // namespace ltd
