// Durations as users type them: "500ms", "10s", "5m", "2h", or plain seconds
// ("30", "1.5"). Shared by ltctl's flags, ltd's config and the heartbeat
// protocol's `timeout DUR`, so all three accept exactly the same spellings.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace ltd {

using Millis = std::chrono::milliseconds;

// Returns nullopt for anything malformed, negative or absurdly large.
std::optional<Millis> ParseDuration(std::string_view text);

// The shortest exact spelling: 1500ms -> "1500ms", 10000ms -> "10s".
std::string FormatDuration(Millis d);

}  // namespace ltd
