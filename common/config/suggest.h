// The nearest valid key for a misspelt one ("destinaton" → "destination").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ductus::config {

// Levenshtein distance between two keys (bytes; keys are ASCII).
size_t editDistance(std::string_view a, std::string_view b);

// The closest candidate, or "" when none is close enough to be a typo
// (distance at most a third of the key's length, and at least 1-2 edits).
std::string nearestKey(std::string_view key, const std::vector<std::string_view>& candidates);

}  // namespace ductus::config
