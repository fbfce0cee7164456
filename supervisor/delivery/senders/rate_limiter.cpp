#include "supervisor/delivery/senders/rate_limiter.h"

#include <algorithm>

namespace ductus::senders {

RateLimiter::RateLimiter(RateLimitSettings settings) : settings_(settings) {
  if (settings_.burst == 0) settings_.burst = 1;
  if (settings_.count > 0) {
    interval_ = std::chrono::duration_cast<std::chrono::nanoseconds>(settings_.per) /
                settings_.count;
    // 1,000,000,000 per second would make the interval 0; keep it positive
    // so the bucket still means something.
    if (interval_.count() == 0) interval_ = std::chrono::nanoseconds(1);
  }
}

void RateLimiter::refill(Clock::time_point now) {
  const auto capacity = interval_ * settings_.burst;
  if (!started_) {
    // A fresh destination may use its whole burst at once.
    started_ = true;
    earned_ = capacity;
    last_ = now;
    return;
  }
  if (now > last_) {
    earned_ = std::min(capacity, earned_ + (now - last_));
    last_ = now;
  }
}

RateDecision RateLimiter::tryAcquire(Clock::time_point now) {
  if (settings_.count == 0) return {};
  refill(now);
  if (earned_ >= interval_) {
    earned_ -= interval_;
    return {};
  }
  if (settings_.mode == RateLimitMode::Drop) return {RateDecision::Kind::Drop, {}};
  return {RateDecision::Kind::Wait, interval_ - earned_};
}

}  // namespace ductus::senders
