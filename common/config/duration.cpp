#include "common/config/duration.h"

#include <charconv>
#include <utility>

namespace ductus::config {
namespace {

// Splits "250ms" into 250 and "ms". The number has at most 12 digits, so
// the multiplications below stay far from overflow.
bool splitNumber(std::string_view text, uint64_t& number, std::string_view& unit) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 12) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + digits, number);
  if (ec != std::errc{} || end != text.data() + digits) return false;
  unit = text.substr(digits);
  return true;
}

}  // namespace

std::optional<Duration> parseDuration(std::string_view text) {
  uint64_t n;
  std::string_view unit;
  if (!splitNumber(text, n, unit)) return std::nullopt;
  constexpr std::pair<std::string_view, uint64_t> kUnits[] = {
      {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}};
  for (auto [name, ms] : kUnits)
    if (unit == name) return Duration(static_cast<int64_t>(n * ms));
  return std::nullopt;
}

std::optional<uint64_t> parseSize(std::string_view text) {
  uint64_t n;
  std::string_view unit;
  if (!splitNumber(text, n, unit)) return std::nullopt;
  constexpr std::pair<std::string_view, uint64_t> kUnits[] = {
      {"B", 1}, {"KB", 1ull << 10}, {"MB", 1ull << 20}, {"GB", 1ull << 30}};
  for (auto [name, bytes] : kUnits)
    if (unit == name) return n * bytes;
  return std::nullopt;
}

}  // namespace ductus::config
