// ltd's configuration file: the TOML subset its keys need (`key = value`
// lines, comments, strings, integers, booleans), read with each entry's
// line so that a mistake can be named where it is. Which keys exist is the
// caller's business (options.h); NearestKey suggests one for a typo.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ltd {

struct ConfigEntry {
  std::string key;
  std::string value;  // unquoted: the text a command-line flag would take
  int line = 0;
};

// The entries of the file at `path`, in order. A line that is not
// `key = value`, a [section], a key given twice or an unterminated string
// is an error naming the file and line.
absl::StatusOr<std::vector<ConfigEntry>> ReadConfigFile(const std::string& path);

// The same, from text already read; `path` only names it in messages.
absl::StatusOr<std::vector<ConfigEntry>> ParseConfig(const std::string& text,
                                                     const std::string& path);

// The key of `known` closest to `key` (edit distance, `_` taken as `-`),
// or "" when none is close enough to be what was meant.
std::string NearestKey(const std::string& key, const std::vector<std::string>& known);

}  // namespace ltd
