// Signals by name, and `--signal SIG@DUR` (Slurm's --signal, without its
// `B:`, which means nothing here: ltd signals each rank's main process):
// SIG goes to every rank DUR before the job's end is forced (its --time,
// a drain's deadline, `ltctl shutdown`), so that it can checkpoint.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "duration.h"

namespace ltd {

// "USR1", "SIGUSR1", "usr1" or "10": the signal's number; nullopt for
// anything else.
std::optional<int> SignalNumber(std::string_view text);
// "USR1" for SIGUSR1; the number for one without a name.
std::string SignalName(int signal);

struct WarnSignal {
  int signal = 0;  // 0: none
  Millis before{0};
  bool operator==(const WarnSignal&) const = default;
};
// `flag`'s value "SIG@DUR" (DUR as duration.h spells it; plain seconds as
// Slurm's); the error says what was wrong and what to type.
absl::StatusOr<WarnSignal> ParseWarnSignal(const std::string& flag, std::string_view text);
// "USR1@3s".
std::string FormatWarnSignal(const WarnSignal& w);

}  // namespace ltd
