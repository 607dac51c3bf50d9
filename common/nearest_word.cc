#include "nearest_word.h"

#include <algorithm>

namespace ltd {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string NearestWord(std::string_view word, const std::vector<std::string>& known) {
  std::string dashed(word);
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  std::string best;
  size_t best_distance = std::string::npos;
  for (const std::string& k : known) {
    const size_t d = EditDistance(dashed, k);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  // A third of the word's letters wrong is another word, not a typo.
  return best_distance <= std::max<size_t>(2, dashed.size() / 3) ? best : "";
}

}  // namespace ltd
