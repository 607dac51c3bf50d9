// `--output` / `--error` patterns (model/output_pattern.h), as a submit
// request carries them. Invariants: a pattern refused is refused in one
// bounded line; an accepted one expands so that a job's name never adds a
// directory (each '/' of the path is one the pattern wrote), and %r alone
// makes the path differ between ranks.
#include <algorithm>

#include "fuzz_check.h"
#include "output_pattern.h"

using namespace ltd;

namespace {

// The slashes the pattern itself writes (a '/' after a '%' is refused).
size_t OwnSlashes(std::string_view pattern) {
  return static_cast<size_t>(std::count(pattern.begin(), pattern.end(), '/'));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const std::string_view name = in.Field('\0');
  const uint8_t rank = in.Byte();
  const std::string_view pattern = in.Rest();
  const absl::Status s = CheckOutputPattern("--output", pattern);
  if (!s.ok()) {
    fuzz::CheckRefusal(s);
    return 0;
  }
  FUZZ_CHECK(!pattern.empty() && pattern.size() <= 4096 && pattern.back() != '/');
  const std::string a = ExpandOutputPattern(pattern, "17", rank, name);
  const std::string b = ExpandOutputPattern(pattern, "17", rank + 1, name);
  FUZZ_CHECK(static_cast<size_t>(std::count(a.begin(), a.end(), '/')) == OwnSlashes(pattern));
  FUZZ_CHECK(PatternPerRank(pattern) == (a != b));
  FUZZ_CHECK(a.size() <= pattern.size() * std::max<size_t>(name.size() + 2, 11));
  // Without %n, %j or %r, the path is the pattern with each %% a %.
  return 0;
}
