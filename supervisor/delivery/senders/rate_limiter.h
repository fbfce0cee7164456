// RateLimiter: a destination's own allowance (rate_limit), as a token
// bucket: `count` sends per `per` (a second or a minute), of which up to
// `burst` may go back to back after a quiet spell. Pure arithmetic over a
// clock the caller passes in, so the delivery loop owns the waiting (a
// uv_timer) and tests need no sleeps.
#pragma once

#include <chrono>
#include <cstdint>

namespace ductus::senders {

enum class RateLimitMode {
  Wait,  // hold the message until the allowance has room (order kept)
  Drop,  // over the allowance: the delivery is filtered, not sent
};

struct RateLimitSettings {
  uint32_t count = 0;  // sends per `per`; 0 = unlimited
  std::chrono::milliseconds per{1000};
  uint32_t burst = 1;  // bucket size; 0 is taken as 1
  RateLimitMode mode = RateLimitMode::Wait;
};

struct RateDecision {
  enum class Kind { Go, Wait, Drop };
  Kind kind = Kind::Go;
  // For Wait: how long until a send would be allowed. Nothing was taken:
  // call tryAcquire() again after waiting.
  std::chrono::nanoseconds wait{0};
};

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RateLimiter(RateLimitSettings settings);

  // Asks to send one message at `now`. Go takes one token. Wait (wait mode)
  // and Drop (drop mode) take nothing.
  RateDecision tryAcquire(Clock::time_point now);

  const RateLimitSettings& settings() const { return settings_; }

 private:
  void refill(Clock::time_point now);

  RateLimitSettings settings_;
  // Tokens are counted in nanoseconds of "earned time" so the arithmetic
  // stays in integers: one token = interval_ ns; the bucket holds at most
  // burst * interval_.
  std::chrono::nanoseconds interval_{0};
  std::chrono::nanoseconds earned_{0};
  Clock::time_point last_{};
  bool started_ = false;
};

}  // namespace ductus::senders
