// `--output` / `--error` patterns (model/output_pattern.h), as a submit
// request or a record carries them, in both meanings (a record's version
// byte picks legacy or sbatch's). Invariants: a pattern refused is refused
// in one bounded line; an accepted one expands so that no value (name,
// host, user) adds a directory (each '/' of the path is one the pattern
// wrote), the rank fields alone make the path differ between ranks, and
// the path is bounded by the pattern and its values.
#include <algorithm>

#include "fuzz_check.h"
#include "output_pattern.h"

using namespace ltd;

namespace {

size_t Slashes(std::string_view s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '/'));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const int version = (in.Byte() & 1) ? kLegacyPatterns : kSbatchPatterns;
  const std::string_view name = in.Field('\0');
  const std::string_view host = in.Field('\0');
  const std::string_view user = in.Field('\0');
  const uint8_t rank = in.Byte();
  const std::string_view pattern = in.Rest();
  auto parsed = ParseOutputPattern("--output", pattern, version);
  FUZZ_CHECK(CheckOutputPattern("--output", pattern, version).ok() == parsed.ok());
  if (!parsed.ok()) {
    fuzz::CheckRefusal(parsed.status());
    return 0;
  }
  FUZZ_CHECK(!pattern.empty() && pattern.size() <= kMaxPatternBytes && pattern.back() != '/');
  PatternValues v;
  v.job_id = "17";
  v.name = name;
  v.host = host;
  v.user = user;
  v.rank = rank;
  v.local_rank = rank;
  const std::string a = ExpandOutputPattern(*parsed, v);
  v.rank = rank + 1;
  v.local_rank = rank + 1;
  const std::string b = ExpandOutputPattern(*parsed, v);
  // The pattern's own slashes, none from a value.
  size_t own = 0;
  for (const auto& piece : parsed->pieces) {
    if (const auto* text = std::get_if<std::string>(&piece)) own += Slashes(*text);
  }
  FUZZ_CHECK(Slashes(a) == own);
  FUZZ_CHECK(PatternPerRank(*parsed) == (a != b));
  const size_t widest = std::max({name.size(), host.size(), user.size(), size_t{11}});
  FUZZ_CHECK(a.size() <= pattern.size() * widest);
  return 0;
}
