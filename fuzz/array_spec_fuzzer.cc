// `--array SPEC` (common/job_array.h), as ltctl, a script's #LTD line and
// a SubmitRequest give it. Invariants: an array has 1..kMaxArrayTasks
// tasks, ascending, each once, none past kMaxArrayIndex; printed (within
// a spec's bound) and read again it is the same array; a refusal is one bounded line. A task ref
// ("12_3") is split only into an id of digits and a task in bounds.
#include <string>

#include "fuzz_check.h"
#include "job_array.h"

using namespace ltd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<ArraySpec> spec = ParseArraySpec(text);
  if (spec.ok()) {
    FUZZ_CHECK(!spec->tasks.empty() && spec->tasks.size() <= kMaxArrayTasks);
    for (size_t i = 0; i < spec->tasks.size(); ++i) {
      FUZZ_CHECK(spec->tasks[i] <= kMaxArrayIndex);
      FUZZ_CHECK(i == 0 || spec->tasks[i - 1] < spec->tasks[i]);
    }
    // Printed, it is the same array, where the print fits a spec's bound
    // (found by this fuzzer: 0-2222:3 printed id by id did not).
    const std::string printed = FormatArraySpec(*spec);
    if (printed.size() <= kMaxArraySpecBytes) {
      const absl::StatusOr<ArraySpec> again = ParseArraySpec(printed);
      FUZZ_CHECK(again.ok() && again->tasks == spec->tasks && again->throttle == spec->throttle);
    }
  } else {
    fuzz::CheckRefusal(spec.status());
  }
  std::string array;
  uint32_t task = 0;
  if (SplitTaskRef(text, &array, &task)) {
    FUZZ_CHECK(!array.empty() && array.size() <= 19 && array.front() != '0');
    FUZZ_CHECK(array.find_first_not_of("0123456789") == std::string::npos);
    FUZZ_CHECK(task <= kMaxArrayIndex);
  }
  return 0;
}
