#include "common/config/suggest.h"

#include <algorithm>

namespace ductus::config {

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearestKey(std::string_view key, const std::vector<std::string_view>& candidates) {
  // Short keys get two edits ("tmeout"), longer ones a third of their length.
  size_t limit = std::max<size_t>(2, key.size() / 3);
  std::string_view best;
  size_t bestDistance = limit + 1;
  for (auto c : candidates) {
    size_t d = editDistance(key, c);
    if (d < bestDistance) {
      bestDistance = d;
      best = c;
    }
  }
  return std::string(best);
}

}  // namespace ductus::config
