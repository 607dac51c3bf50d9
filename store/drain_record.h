// Whether ltd is drained for maintenance (`ltctl drain`), kept in the state
// dir so that a drain outlives an ltd restart: the file `drain` holds the
// admin's reason; no file, not drained.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"

namespace ltd {

// The drain's reason ("" for none given), or nullopt when not drained.
// An unreadable file counts as drained: an admin's drain is never lost.
std::optional<std::string> LoadDrain(const std::string& state_dir);
// Writes (atomically, durably) or, with nullopt, removes the drain.
absl::Status SaveDrain(const std::string& state_dir, const std::optional<std::string>& reason);

}  // namespace ltd
