// The one back-off rule: the first retry after `first`, each next one twice
// as late, never later than `max`. Used for a failed message, a failed queue
// read and a failed settle alike, and for restarting a worker that keeps
// dying at start.
#pragma once

#include <algorithm>
#include <chrono>

namespace ductus::delivery {

struct Backoff {
  constexpr Backoff() = default;
  constexpr Backoff(std::chrono::milliseconds f, std::chrono::milliseconds m) : first(f), max(m) {}

  std::chrono::milliseconds first{1000};
  std::chrono::milliseconds max{60'000};

  // The wait before retry number `failures` + 1 (0 failures: `first`).
  constexpr std::chrono::milliseconds after(int failures) const {
    int doublings = std::clamp(failures, 0, 16);
    auto d = first * (int64_t{1} << doublings);
    return std::min(max, d);
  }
};

}  // namespace ductus::delivery
