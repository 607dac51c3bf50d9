// "did you mean ...?" for a mistyped verb or option: the closest of the
// known words by edit distance (a swap of two neighbours counts one, so
// `sumbit` is one from `submit`), when it is close enough to be a typo.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ltd {

// The closest of `known` to `typed`, or "" when none is within a third of
// the word's length (2 edits at least). Ties: the first.
std::string Closest(std::string_view typed, const std::vector<std::string>& known);

// " (did you mean 'X'?)" for Closest's answer, or "" when there is none.
std::string DidYouMean(std::string_view typed, const std::vector<std::string>& known);

}  // namespace ltd
