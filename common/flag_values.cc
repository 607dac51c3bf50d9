#include "flag_values.h"

#include "absl/strings/str_cat.h"
#include "byte_size.h"
#include "bytes.h"
#include "job_limits.h"

namespace ltd {
namespace {

// What was given, as a refusal quotes it: one line, bounded, whatever the
// bytes (a request's fields and a config file's values reach here too).
std::string Given(std::string_view text) {
  return DisplayEscapeElided(text, 64, Controls::kEscape);
}

}  // namespace

absl::StatusOr<Millis> DurationFlag(const std::string& flag, const std::string& text) {
  auto d = ParseDuration(text);
  if (!d) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " '", Given(text),
                     "' is not a duration; use e.g. 500ms, 10s, 1h30m, 01:30:00 or plain seconds"));
  }
  return *d;
}

absl::StatusOr<Millis> TimeLimitFlag(const std::string& flag, const std::string& text) {
  auto d = ParseTimeLimit(text);
  if (!d) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " '", Given(text),
        "' is not a duration; use e.g. 2h, 1h30m, 90 (minutes), 01:30:00 or 1-12:00:00"));
  }
  return *d;
}

absl::StatusOr<uint64_t> ByteSizeFlag(const std::string& flag, const std::string& text,
                                      uint64_t at_least, const std::string& at_least_text) {
  auto size = ParseByteSize(text);
  if (!size || *size < at_least) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " '", Given(text), "' is not a size of at least ",
                                                   at_least_text, "; use e.g. 1G"));
  }
  return *size;
}

absl::StatusOr<uint32_t> CpusFlag(const std::string& flag, const std::string& text) {
  auto millis = ParseCpus(text);
  if (!millis) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " '", Given(text), "' is not a number of CPUs; use e.g. 4 or 1.5"));
  }
  return *millis;
}

absl::Status EnvFlag(std::string_view kv) {
  const auto eq = kv.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--env takes KEY=VALUE, got '", DisplayEscapeElided(kv, 64, Controls::kEscape), "'"));
  }
  return absl::OkStatus();
}

}  // namespace ltd
