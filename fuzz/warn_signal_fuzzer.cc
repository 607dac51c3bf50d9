// Signal specs (`--signal USR1@90s`, `ltctl signal`'s names) and --env's
// KEY=VALUE (common/warn_signal.h, common/flag_values.h). Invariants: a
// spec names a real signal and a time 1 ms..1 year before the end;
// printed and read again it is the same; a refusal is one bounded line.
#include <signal.h>

#include "flag_values.h"
#include "fuzz_check.h"
#include "warn_signal.h"

using namespace ltd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<WarnSignal> w = ParseWarnSignal("--signal", text);
  if (w.ok()) {
    FUZZ_CHECK(w->signal > 0 && w->signal < NSIG);
    FUZZ_CHECK(w->before.count() > 0 && w->before <= std::chrono::hours(24 * 365));
    const std::string printed = FormatWarnSignal(*w);
    const absl::StatusOr<WarnSignal> again = ParseWarnSignal("--signal", printed);
    FUZZ_CHECK(again.ok() && *again == *w);
  } else {
    fuzz::CheckRefusal(w.status());
  }
  if (const std::optional<int> n = SignalNumber(text)) {
    FUZZ_CHECK(*n > 0 && *n < NSIG);
    FUZZ_CHECK(SignalNumber(SignalName(*n)) == n);
  }
  if (absl::Status s = EnvFlag(text); !s.ok()) {
    fuzz::CheckRefusal(s);
  } else {
    FUZZ_CHECK(text.find('=') != std::string_view::npos && text.front() != '=');
  }
  return 0;
}
