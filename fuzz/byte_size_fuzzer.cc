// Sizes and CPU counts as flags and the config file read them
// (common/byte_size.h, common/job_limits.h's ParseCpus, flag_values.h).
// Invariants: a size is what its digits and unit say, exactly, and at most
// 2^62; printed and read again it is the same; CPUs likewise; a refusal is
// one bounded line.
#include <cctype>

#include "byte_size.h"
#include "flag_values.h"
#include "fuzz_check.h"
#include "job_limits.h"

using namespace ltd;

namespace {

// What ParseByteSize must give, worked out another way: nullopt where it
// must refuse.
std::optional<uint64_t> Expected(std::string_view text) {
  size_t i = 0;
  unsigned __int128 value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    value = value * 10 + static_cast<unsigned>(text[i] - '0');
    if (value > (static_cast<unsigned __int128>(1) << 70)) value = static_cast<unsigned __int128>(1) << 70;
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::string unit(text.substr(i));
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  int shift = -1;
  if (unit.empty()) shift = 0;
  for (const auto& [names, s] : {std::pair{"KkKi", 10}, std::pair{"MmMi", 20},
                                 std::pair{"GgGi", 30}, std::pair{"TtTi", 40}}) {
    const std::string_view n(names);
    if (unit == n.substr(0, 1) || unit == n.substr(1, 1) || unit == n.substr(2, 2)) shift = s;
  }
  if (shift < 0) return std::nullopt;
  value <<= shift;
  if (value > (static_cast<unsigned __int128>(1) << 62)) return std::nullopt;
  return static_cast<uint64_t>(value);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::optional<uint64_t> bytes = ParseByteSize(text);
  FUZZ_CHECK(bytes == Expected(text));
  if (bytes) {
    const std::string printed = FormatByteSize(*bytes);
    FUZZ_CHECK(ParseByteSize(printed) == bytes);
  }
  const absl::StatusOr<uint64_t> flag = ByteSizeFlag("--mem", text, 8u << 20, "8M");
  if (flag.ok()) {
    FUZZ_CHECK(bytes == *flag && *flag >= (8u << 20));
  } else {
    fuzz::CheckRefusal(flag.status());
  }

  const std::optional<uint32_t> cpus = ParseCpus(text);
  if (cpus) {
    FUZZ_CHECK(*cpus > 0 && *cpus <= 1000000999u);
    const std::string printed = FormatCpus(*cpus);
    FUZZ_CHECK(ParseCpus(printed) == cpus);
  }
  const absl::StatusOr<uint32_t> cpus_flag = CpusFlag("--cpus", text);
  if (cpus_flag.ok()) {
    FUZZ_CHECK(cpus == *cpus_flag);
  } else {
    fuzz::CheckRefusal(cpus_flag.status());
  }
  return 0;
}
