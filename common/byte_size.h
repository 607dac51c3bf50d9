// Sizes as admins type them: "1G", "512M", "64K", "1000" (bytes), powers of
// 1024, as in `du -h`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ltd {

// nullopt for anything malformed, negative or past 2^62.
std::optional<uint64_t> ParseByteSize(std::string_view text);
// As ParseByteSize reads it back: the largest unit that divides `bytes`
// ("100M", "3G", "1536K", "1000").
std::string FormatByteSize(uint64_t bytes);

}  // namespace ltd
