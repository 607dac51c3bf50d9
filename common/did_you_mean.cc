#include "did_you_mean.h"

#include <algorithm>

namespace ltd {
namespace {

// Optimal string alignment distance: insertions, deletions, substitutions
// and swaps of neighbours, each one edit. Words here are short (an option
// name): the table is at most 64 x 64.
size_t Distance(std::string_view a, std::string_view b) {
  constexpr size_t kMax = 64;
  if (a.size() > kMax || b.size() > kMax) return kMax;
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string Closest(std::string_view typed, const std::vector<std::string>& known) {
  // A third of the word's letters wrong is another word, not a typo.
  const size_t allowed = std::max<size_t>(2, typed.size() / 3);
  std::string best;
  size_t best_distance = allowed + 1;
  for (const std::string& word : known) {
    const size_t d = Distance(typed, word);
    if (d < best_distance) {
      best = word;
      best_distance = d;
    }
  }
  return best;
}

std::string DidYouMean(std::string_view typed, const std::vector<std::string>& known) {
  const std::string best = Closest(typed, known);
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

}  // namespace ltd
