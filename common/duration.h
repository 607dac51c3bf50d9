// Durations as users type them: "500ms", "10s", "5m", "2h", "1d", sums
// of those from the largest unit down ("1h30m", "2m30s"), plain seconds
// ("30", "1.5"), and Slurm's clock forms "MM:SS", "HH:MM:SS", "D-HH",
// "D-HH:MM", "D-HH:MM:SS". Shared by ltctl's and ltrun's flags, ltd's
// config and the heartbeat protocol's `timeout DUR`, so all of them accept
// exactly the same spellings.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace ltd {

using Millis = std::chrono::milliseconds;

// Returns nullopt for anything malformed, negative or longer than a year.
// `bare`: what a plain number counts (seconds; `--time` passes minutes,
// as sbatch's --time reads "90" as 90 minutes).
std::optional<Millis> ParseDuration(std::string_view text, Millis bare = std::chrono::seconds(1));

// `--time`'s spellings: ParseDuration's, a plain number being minutes
// (Slurm's "MM").
std::optional<Millis> ParseTimeLimit(std::string_view text);

// The shortest exact spelling: 1500ms -> "1500ms", 10000ms -> "10s".
std::string FormatDuration(Millis d);

}  // namespace ltd
