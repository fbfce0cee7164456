#include "common/duration_text.h"

#include <cstdint>
#include <utility>

namespace ductus {

std::string formatDuration(std::chrono::milliseconds d) {
  int64_t ms = d.count();
  constexpr std::pair<const char*, int64_t> kUnits[] = {
      {"d", 86'400'000}, {"h", 3'600'000}, {"m", 60'000}, {"s", 1000}};
  for (auto [name, size] : kUnits)
    if (ms != 0 && ms % size == 0) return std::to_string(ms / size) + name;
  return std::to_string(ms) + "ms";
}

}  // namespace ductus
