// "Did you mean": the known word nearest a mistyped one (a config key, a
// command-line option), by edit distance, '_' read as '-'.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ltd {

// Levenshtein distance: insertions, deletions and substitutions.
size_t EditDistance(std::string_view a, std::string_view b);

// The word of `known` nearest `word`, or "" when none is near enough to
// be a typo of it (more than a third of its letters wrong).
std::string NearestWord(std::string_view word, const std::vector<std::string>& known);

}  // namespace ltd
