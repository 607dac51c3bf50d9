#include "job_array.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "bytes.h"
#include "str_util.h"

namespace ltd {
namespace {

// A decimal number of at most 9 digits (no sign, no blank): the bound keeps
// it far inside uint32_t, and anything past kMaxArrayIndex is refused
// anyway with its own words.
std::optional<uint32_t> Number(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  uint32_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint32_t>(c - '0');
  }
  return n;
}

// The user's text in a message: escaped and cut, so the answer is one short line.
std::string Shown(std::string_view s) { return DisplayEscapeElided(s, 64, Controls::kEscape); }

absl::Status Bad(std::string_view what, std::string_view why) {
  return absl::InvalidArgumentError(
      Cat("--array ", Shown(what), ": ", why,
          "; give task ids as sbatch's --array: 0-15, 1,3,5-7, 0-15:2, and %N to run at most N "
          "at once (0-15%4)"));
}

}  // namespace

absl::StatusOr<ArraySpec> ParseArraySpec(std::string_view spec) {
  if (spec.empty()) return Bad(spec, "no task ids");
  if (spec.size() > kMaxArraySpecBytes) {
    return absl::InvalidArgumentError(Cat("--array is ", spec.size(), " bytes; give at most ",
                                          kMaxArraySpecBytes,
                                          " (ranges such as 0-999 say many ids in few bytes)"));
  }
  ArraySpec out;
  std::string_view list = spec;
  if (const size_t pct = spec.find('%'); pct != std::string_view::npos) {
    list = spec.substr(0, pct);
    const std::string_view n = spec.substr(pct + 1);
    const std::optional<uint32_t> throttle = Number(n);
    if (!throttle || *throttle == 0) {
      return Bad(spec, Cat("'%", Shown(n), "' is not a number of tasks of 1 or more"));
    }
    out.throttle = *throttle;
  }
  if (list.empty()) return Bad(spec, "no task ids before '%'");
  std::vector<uint32_t> tasks;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view item = list.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) return Bad(spec, "an empty item between commas");
    std::string_view range = item;
    uint32_t step = 1;
    if (const size_t colon = item.find(':'); colon != std::string_view::npos) {
      range = item.substr(0, colon);
      const std::optional<uint32_t> s = Number(item.substr(colon + 1));
      if (!s || *s == 0) return Bad(spec, Cat("'", Shown(item), "' has no step of 1 or more"));
      step = *s;
    }
    const size_t dash = range.find('-');
    const std::optional<uint32_t> first = Number(range.substr(0, dash));
    const std::optional<uint32_t> last =
        dash == std::string_view::npos ? first : Number(range.substr(dash + 1));
    if (!first || !last) {
      return Bad(spec, Cat("'", Shown(item), "' is not a task id or a range A-B"));
    }
    if (dash == std::string_view::npos && step != 1) {
      return Bad(spec, Cat("'", Shown(item), "' has a step but no range"));
    }
    if (*last < *first) return Bad(spec, Cat("the range '", Shown(range), "' is reversed"));
    if (*last > kMaxArrayIndex) {
      return Bad(spec, Cat("task id ", *last, " is over the highest, ", kMaxArrayIndex));
    }
    // Bounded before it is made: at most kMaxArrayTasks ids in all.
    const uint64_t count = (static_cast<uint64_t>(*last) - *first) / step + 1;
    if (tasks.size() + count > kMaxArrayTasks * 2) {
      return absl::InvalidArgumentError(Cat("--array ", Shown(spec), " makes over ", kMaxArrayTasks,
                                            " tasks; an array has at most ", kMaxArrayTasks,
                                            ": submit several arrays"));
    }
    for (uint64_t t = *first; t <= *last; t += step) tasks.push_back(static_cast<uint32_t>(t));
    if (comma == list.size()) break;
  }
  std::sort(tasks.begin(), tasks.end());
  tasks.erase(std::unique(tasks.begin(), tasks.end()), tasks.end());
  if (tasks.size() > kMaxArrayTasks) {
    return absl::InvalidArgumentError(Cat("--array ", Shown(spec), " makes ", tasks.size(),
                                          " tasks; an array has at most ", kMaxArrayTasks,
                                          ": submit several arrays"));
  }
  out.tasks = std::move(tasks);
  return out;
}

std::string FormatArraySpec(const ArraySpec& spec) {
  // Greedy: each run of 3 or more ids a step apart is "A-B" or "A-B:S".
  std::string out;
  const std::vector<uint32_t>& t = spec.tasks;
  for (size_t i = 0; i < t.size();) {
    size_t j = i;
    if (i + 2 < t.size()) {
      const uint32_t step = t[i + 1] - t[i];
      while (j + 1 < t.size() && t[j + 1] - t[j] == step) ++j;
      if (j - i < 2) j = i;
    }
    if (!out.empty()) out += ',';
    out += std::to_string(t[i]);
    if (j > i) {
      const uint32_t step = t[i + 1] - t[i];
      out += Cat("-", t[j]);
      if (step != 1) out += Cat(":", step);
    }
    i = j + 1;
  }
  if (spec.throttle != 0) out += Cat("%", spec.throttle);
  return out;
}

bool SplitTaskRef(std::string_view ref, std::string* array_id, uint32_t* task) {
  const size_t us = ref.find('_');
  if (us == std::string_view::npos || us == 0 || us > 19) return false;
  const std::string_view id = ref.substr(0, us);
  if (id.front() == '0' ||
      !std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  const std::optional<uint32_t> t = Number(ref.substr(us + 1));
  if (!t || *t > kMaxArrayIndex) return false;
  *array_id = std::string(id);
  *task = *t;
  return true;
}

}  // namespace ltd
