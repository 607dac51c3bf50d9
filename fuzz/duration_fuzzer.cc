// Durations as every flag, the config file and the heartbeat protocol's
// `timeout DUR` read them (common/duration.h, common/flag_values.h).
// Invariants: a duration is 0..1 year; printed and read again it is the
// same; a refusal is one bounded line.
#include <chrono>

#include "duration.h"
#include "flag_values.h"
#include "fuzz_check.h"

using namespace ltd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  constexpr Millis kYear = std::chrono::hours(24 * 365);
  for (Millis bare : {Millis(std::chrono::seconds(1)), Millis(std::chrono::minutes(1))}) {
    const std::optional<Millis> d = ParseDuration(text, bare);
    if (!d) continue;
    FUZZ_CHECK(d->count() >= 0 && *d <= kYear);
    const std::string printed = FormatDuration(*d);
    const std::optional<Millis> again = ParseDuration(printed);
    FUZZ_CHECK(again && *again == *d);
    FUZZ_CHECK(ParseTimeLimit(printed) == again);  // a unit: `bare` plays no part
    FUZZ_CHECK(FormatDuration(*again) == printed);
  }
  const absl::StatusOr<Millis> flag = DurationFlag("--grace", text);
  if (flag.ok()) {
    FUZZ_CHECK(ParseDuration(text) == *flag);
  } else {
    FUZZ_CHECK(!ParseDuration(text));
    fuzz::CheckRefusal(flag.status());
  }
  const absl::StatusOr<Millis> limit = TimeLimitFlag("--time", text);
  if (limit.ok()) {
    FUZZ_CHECK(ParseTimeLimit(text) == *limit);
  } else {
    fuzz::CheckRefusal(limit.status());
  }
  return 0;
}
