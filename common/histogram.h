// Histogram: how long something took, counted into fixed buckets as it
// happens, for GET /api/v1/metrics (Prometheus histograms): the delivery
// loops' timings and the API's own requests. Lock-free as the activity
// counters that hold most of them: recorded on the engine's loop, read
// whole per counter (relaxed) by a scrape, not all from one instant. The
// sum is kept in integer microseconds, so it is one atomic add too.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace ductus {

// 1, 2.5, 5 per decade from 0.5 ms to 10 s, then 1 min, 5 min, 1 h; in
// microseconds. An observation above the last lands in +Inf.
inline constexpr std::array<int64_t, 17> kHistogramBoundsUs = {
    500,       1'000,     2'500,     5'000,      10'000,     25'000,
    50'000,    100'000,   250'000,   500'000,    1'000'000,  2'500'000,
    5'000'000, 10'000'000, 60'000'000, 300'000'000, 3'600'000'000};

// A plain copy, buckets not cumulative (the last is +Inf).
struct HistogramCounts {
  std::vector<int64_t> buckets;  // kHistogramBoundsUs.size() + 1
  int64_t sumUs = 0;
  int64_t count = 0;
  int64_t maxUs = 0;  // the largest observation; 0 with none
};

class Histogram {
 public:
  void observe(std::chrono::microseconds took) {
    int64_t us = took.count() < 0 ? 0 : took.count();
    size_t i = 0;
    while (i < kHistogramBoundsUs.size() && us > kHistogramBoundsUs[i]) ++i;
    buckets_[i].fetch_add(1, std::memory_order_relaxed);
    sumUs_.fetch_add(us, std::memory_order_relaxed);
    // The largest seen bounds a quantile read from wide buckets (5 min to
    // 1 h): interpolating inside one can't claim more than was observed.
    int64_t seen = maxUs_.load(std::memory_order_relaxed);
    while (us > seen && !maxUs_.compare_exchange_weak(seen, us, std::memory_order_relaxed)) {
    }
  }

  // The count is the buckets' sum, so a scrape never sees a _count that
  // disagrees with its +Inf bucket.
  HistogramCounts snapshot() const {
    HistogramCounts c;
    c.buckets.reserve(buckets_.size());
    for (auto& b : buckets_) {
      c.buckets.push_back(b.load(std::memory_order_relaxed));
      c.count += c.buckets.back();
    }
    c.sumUs = sumUs_.load(std::memory_order_relaxed);
    c.maxUs = maxUs_.load(std::memory_order_relaxed);
    return c;
  }

 private:
  std::array<std::atomic<int64_t>, kHistogramBoundsUs.size() + 1> buckets_{};
  std::atomic<int64_t> sumUs_{0};
  std::atomic<int64_t> maxUs_{0};
};

// Microseconds since `start` on the steady clock, for observe().
inline std::chrono::microseconds since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

}  // namespace ductus
