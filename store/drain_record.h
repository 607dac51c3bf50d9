// Whether ltd is drained for maintenance (`ltctl drain`), kept in the state
// dir so that a drain outlives an ltd restart: the file `drain` holds the
// admin's reason (no file: not drained), and `drain-deadline` the time a
// `drain --deadline` ends the running jobs, as milliseconds since the
// epoch, so that a restarted ltd ends them then as well.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "job.h"

namespace ltd {

// The drain's reason ("" for none given), or nullopt when not drained.
// An unreadable file counts as drained: an admin's drain is never lost.
std::optional<std::string> LoadDrain(const std::string& state_dir);
// Writes (atomically, durably) or, with nullopt, removes the drain.
absl::Status SaveDrain(const std::string& state_dir, const std::optional<std::string>& reason);

// The drain's deadline, or nullopt for none (or one that cannot be read:
// said in ltd's log; the drain itself stays).
std::optional<WallTime> LoadDrainDeadline(const std::string& state_dir);
// Writes (atomically, durably) or, with nullopt, removes the deadline.
absl::Status SaveDrainDeadline(const std::string& state_dir,
                               const std::optional<WallTime>& deadline);

}  // namespace ltd
