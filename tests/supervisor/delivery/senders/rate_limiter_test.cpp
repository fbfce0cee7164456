// The rate limiter's arithmetic over a clock the test moves by hand: wait
// mode spaces sends at the rate after the burst, drop mode refuses what is
// over the allowance and takes nothing for it.
#include "supervisor/delivery/senders/rate_limiter.h"

#include <gtest/gtest.h>

namespace ductus::senders {
namespace {

using namespace std::chrono_literals;
using Kind = RateDecision::Kind;
const RateLimiter::Clock::time_point t0{};

TEST(RateLimiter, WaitModeSpacesSendsAtTheRate) {
  RateLimiter limiter({10, 1s, 1, RateLimitMode::Wait});
  EXPECT_EQ(limiter.tryAcquire(t0).kind, Kind::Go);
  RateDecision d = limiter.tryAcquire(t0);
  EXPECT_EQ(d.kind, Kind::Wait);
  EXPECT_EQ(d.wait, 100ms);
  d = limiter.tryAcquire(t0 + 60ms);
  EXPECT_EQ(d.kind, Kind::Wait);
  EXPECT_EQ(d.wait, 40ms);  // waiting took nothing: the remaining time shrinks
  EXPECT_EQ(limiter.tryAcquire(t0 + 100ms).kind, Kind::Go);
  EXPECT_EQ(limiter.tryAcquire(t0 + 100ms).wait, 100ms);
}

TEST(RateLimiter, ACallerThatWaitsAsToldSendsExactlyTheRateAfterTheBurst) {
  RateLimiter limiter({5, 1s, 3, RateLimitMode::Wait});
  auto t = t0;
  std::vector<RateLimiter::Clock::time_point> sends;
  while (t < t0 + 10s) {
    RateDecision d = limiter.tryAcquire(t);
    if (d.kind == Kind::Go) {
      sends.push_back(t);
    } else {
      ASSERT_EQ(d.kind, Kind::Wait);
      ASSERT_GT(d.wait.count(), 0);
      t += d.wait;
    }
  }
  // 3 at once, then one every 200 ms.
  ASSERT_EQ(sends.size(), 3u + 50u - 1u);
  EXPECT_EQ(sends[0], t0);
  EXPECT_EQ(sends[2], t0);
  for (size_t i = 3; i < sends.size(); ++i) EXPECT_EQ(sends[i] - sends[i - 1], 200ms) << i;
}

TEST(RateLimiter, AQuietSpellRefillsTheBurstButNoMore) {
  RateLimiter limiter({2, 1s, 4, RateLimitMode::Wait});
  for (int i = 0; i < 4; ++i) EXPECT_EQ(limiter.tryAcquire(t0).kind, Kind::Go);
  EXPECT_EQ(limiter.tryAcquire(t0).kind, Kind::Wait);
  auto later = t0 + 1h;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(limiter.tryAcquire(later).kind, Kind::Go);
  EXPECT_EQ(limiter.tryAcquire(later).kind, Kind::Wait);
}

TEST(RateLimiter, PerMinuteRatesSpreadOverTheMinute) {
  RateLimiter limiter({30, 1min, 1, RateLimitMode::Wait});
  EXPECT_EQ(limiter.tryAcquire(t0).kind, Kind::Go);
  EXPECT_EQ(limiter.tryAcquire(t0).wait, 2s);
}

TEST(RateLimiter, DropModeRefusesWhatIsOverTheAllowanceAndTakesNothingForIt) {
  RateLimiter limiter({1, 1min, 1, RateLimitMode::Drop});
  EXPECT_EQ(limiter.tryAcquire(t0).kind, Kind::Go);
  EXPECT_EQ(limiter.tryAcquire(t0 + 1s).kind, Kind::Drop);
  EXPECT_EQ(limiter.tryAcquire(t0 + 59s).kind, Kind::Drop);
  // The drops did not push the next allowance back.
  EXPECT_EQ(limiter.tryAcquire(t0 + 60s).kind, Kind::Go);
  EXPECT_EQ(limiter.tryAcquire(t0 + 60s).kind, Kind::Drop);
}

TEST(RateLimiter, ACountOfZeroMeansUnlimited) {
  RateLimiter limiter({0, 1s, 1, RateLimitMode::Drop});
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(limiter.tryAcquire(t0).kind, Kind::Go);
}

}  // namespace
}  // namespace ductus::senders
