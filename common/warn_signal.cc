#include "warn_signal.h"

#include <signal.h>
#include <string.h>

#include <cctype>

#include "absl/strings/numbers.h"
#include "bytes.h"
#include "str_util.h"

namespace ltd {

std::optional<int> SignalNumber(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (std::isdigit(static_cast<unsigned char>(text[0]))) {
    int n = 0;
    if (!absl::SimpleAtoi(absl::string_view(text.data(), text.size()), &n) || n <= 0 || n >= NSIG)
      return std::nullopt;
    return n;
  }
  std::string name(text);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (name.starts_with("SIG")) name = name.substr(3);
  for (int n = 1; n < NSIG; ++n) {
    const char* abbrev = sigabbrev_np(n);
    if (abbrev != nullptr && name == abbrev) return n;
  }
  return std::nullopt;
}

std::string SignalName(int signal) {
  const char* abbrev = signal > 0 && signal < NSIG ? sigabbrev_np(signal) : nullptr;
  return abbrev != nullptr ? std::string(abbrev) : std::to_string(signal);
}

absl::StatusOr<WarnSignal> ParseWarnSignal(const std::string& flag, std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(Cat(flag, " '", DisplayEscapeElided(text, 64, Controls::kEscape),
                                          "': ", why,
                                          "; use SIG@DUR, e.g. USR1@90s (USR1 90 seconds before "
                                          "the job's end)"));
  };
  const size_t at = text.find('@');
  if (at == std::string_view::npos) return bad("no @");
  std::string_view sig = text.substr(0, at);
  if (sig.starts_with("B:") || sig.starts_with("b:")) {
    return bad("B: means nothing here (ltd signals each rank's main process)");
  }
  const std::optional<int> n = SignalNumber(sig);
  if (!n) return bad(Cat("'", DisplayEscapeElided(sig, 32, Controls::kEscape), "' is not a signal"));
  const std::optional<Millis> before = ParseDuration(text.substr(at + 1));
  if (!before || before->count() <= 0) return bad("the time before the end must be more than 0");
  return WarnSignal{*n, *before};
}

std::string FormatWarnSignal(const WarnSignal& w) {
  return Cat(SignalName(w.signal), "@", FormatDuration(w.before));
}

}  // namespace ltd
