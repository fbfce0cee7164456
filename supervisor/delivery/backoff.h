// The one back-off rule of delivery: the first retry after `first`, each
// next one twice as late, never later than `max`. Used for a failed
// message, a failed queue read and a failed settle alike.
#pragma once

#include <algorithm>
#include <chrono>

namespace ductus::delivery {

struct Backoff {
  std::chrono::milliseconds first{1000};
  std::chrono::milliseconds max{60'000};

  // The wait before retry number `failures` + 1 (0 failures: `first`).
  std::chrono::milliseconds after(int failures) const {
    int doublings = std::clamp(failures, 0, 16);
    auto d = first * (int64_t{1} << doublings);
    return std::min(max, d);
  }
};

}  // namespace ductus::delivery
