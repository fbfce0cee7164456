// DeliveryLoop: the one owner of a set of lanes for one destination (one
// owner per lane and destination, so per-key order holds). It reads up to
// 50 pending deliveries of its lanes in message id order, sends all of
// their transforms to the Transformer at once (a worker call costs ~70 µs
// alone but ~3 µs with dozens in flight: docs/architecture.md), and then
// delivers the outputs strictly in order. Outcomes are flushed in batches
// of at most 50: at the end of each read, 20 ms after the first outcome a
// read has not flushed yet (so a slow send late in a read does not hold the
// statuses of those before it), and always before a back-off.
//
// A transient failure blocks the loop: the same message is retried after
// 1 s, doubling to 60 s (Backoff), so nothing behind it in its lanes overtakes it.
// Other destinations have loops of their own and keep going.
//
// Woken by intake after a commit in one of its lanes; a 30 s timer is only
// a safety net.
//
// Held (hold()): for as long as any reason holds it (an operator's pause,
// the database lock another engine took, ...), the loop finishes the
// message in hand, flushes, and then waits at no cost: no reads, no timer.
// A wake meanwhile is not lost: the loop reads once no hold is left.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/event_log.h"
#include "common/log.h"
#include "common/uv_handle.h"
#include "schema/store.h"
#include "supervisor/delivery/activity.h"
#include "supervisor/delivery/backoff.h"
#include "supervisor/delivery/senders/rate_limiter.h"
#include "supervisor/delivery/senders/sender.h"
#include "supervisor/delivery/settler.h"
#include "supervisor/delivery/transformer.h"

namespace ductus::intake {
class Intake;
}

namespace ductus::delivery {

struct DeliveryTarget {
  std::string interfaceName;
  std::string destinationName;
  int64_t destinationId = 0;
  Transformer::FunctionId function = 0;
  uint32_t maxAttempts = 0;  // 0: retry transient failures forever
  bool saveOutput = false;
  std::optional<senders::RateLimitSettings> rateLimit;
  // Exactly one of these: a sender, or a route's target intake.
  senders::Sender* sender = nullptr;
  intake::Intake* route = nullptr;
  // The interface has no other destination: a message's status is its
  // delivery's, written by the flush itself (one statement, not three).
  bool onlyDestination = false;
  // Settles the messages this loop's flushes finished, for every loop of
  // the interface (settler.h). Null: the loop makes one of its own (a test
  // with one loop).
  Settler* settler = nullptr;
  // The engine's counts for this destination (shared by its loops); none
  // in tests that don't look.
  DestinationActivity* activity = nullptr;
  // Hears a delivery given up after maxAttempts (common/event_log.h);
  // null: nobody.
  events::Sink* events = nullptr;
};

// The loop's clocks and waits. The engine uses the defaults; tests shorten
// the waits, watch the back-off decisions and drive the rate limiter's clock.
struct DeliveryTiming {
  Backoff backoff;
  // Nothing woke the loop: it reads anyway this often. 0: never (the
  // engine sweeps for waiting deliveries itself, one statement for every
  // loop, where 1,001 idle loops reading each 30 s cost 0.5 % of a core).
  std::chrono::milliseconds safetyNet{30'000};
  // An idle loop that is woken reads this much later, so the messages that
  // arrive together share one read, one flush and one settle (three
  // statements) instead of paying them each: at one MLLP connection the
  // delivery's statements were two of every three commits.
  std::chrono::milliseconds wakeWindow{10};
  // The longest a finished outcome waits in a read for its flush.
  std::chrono::milliseconds flushAfter{20};
  // The rate limiter's clock.
  std::function<senders::RateLimiter::Clock::time_point()> now = [] {
    return senders::RateLimiter::Clock::now();
  };
  // Hears every back-off the loop decides on (a failed message, a failed read).
  std::function<void(std::chrono::milliseconds)> onBackoff;
};

// Why a loop is held; several may hold it at once (a set of bits).
enum class Hold : uint8_t { Paused = 1, Ownership = 2, Draining = 4 };

struct DeliveryCounters {
  int64_t sent = 0, filtered = 0, quarantined = 0, retries = 0, routed = 0;
  int64_t flushes = 0;       // status flushes sent to the store
  size_t largestFlush = 0;   // the most outcomes one flush carried
};

class DeliveryLoop {
 public:
  DeliveryLoop(uv_loop_t* loop, store::Store& store, Transformer& transformer,
               DeliveryTarget target, std::vector<int32_t> lanes, DeliveryTiming timing = {});
  ~DeliveryLoop();
  DeliveryLoop(const DeliveryLoop&) = delete;
  DeliveryLoop& operator=(const DeliveryLoop&) = delete;

  // Reads the queue soon (the wake window from now if idle; after the
  // current read otherwise).
  void wake();
  // Finishes the message in hand (flushing what is done), then stops.
  void stop(std::function<void()> done);
  // Stops after the message in hand (flushing what finished) and reads
  // nothing until released; idempotent per reason.
  void hold(Hold why);
  // Reads again (soon, as after a wake) once no hold is left; not when
  // its lanes were seen empty and nothing woke it since.
  void release(Hold why);
  // Its lanes hold nothing (the engine's start found nothing waiting):
  // the release of its first hold reads only if a wake came meanwhile.
  void startEmpty() { emptySeen_ = true; }
  bool held() const { return holds_ != 0; }

  // Where the loop is; exactly one at a time, changed only by enter(), which
  // arms or stops the loop's timer as the phase needs. A stop (stopping_)
  // and the holds (holds_) are not phases: they say where the phase goes
  // next.
  enum class Phase : uint8_t {
    // Nothing in hand; the timer is the safety net's. wake() goes to
    // Windowing, the timer to Reading, a hold to Parked, stop() to Flushing.
    Idle,
    // Woken while idle: the timer is the wake window's, so messages that
    // arrive together share one read. The timer goes to Reading.
    Windowing,
    // Held with nothing in hand: no timer, no read. The release of the last
    // hold goes to Reading; stop() to Flushing.
    Parked,
    // A queue read is in flight. Its rows go to Working; no rows to Idle or
    // Windowing; a failure to BackingOff; a hold (when it ends) to Parked.
    Reading,
    // A read is due but waits for background flushes: rows whose outcome
    // is being recorded would be read as pending and sent twice. The last
    // flush's end goes to Reading (or BackingOff, if one failed).
    AwaitingFlushes,
    // A read's rows in hand: transforms and sends, delivered in order; a
    // rate limit's wait (backpressure_) can hold it. The read done, a hold
    // or a stop goes to Flushing; a transient failure to Flushing, then
    // BackingOff.
    Working,
    // The read's outcomes are being recorded (the end of a read, before a
    // back-off, at a stop). Then Reading (a full read), Idle, Windowing,
    // Parked, BackingOff or Stopped.
    Flushing,
    // A failure's wait; the timer goes to Reading, a hold to Parked.
    BackingOff,
    // stop(): no timer, nothing read; done once background flushes end.
    // Never left.
    Stopped,
  };
  Phase phase() const { return phase_; }

  const DeliveryTarget& target() const { return target_; }
  const DeliveryCounters& counters() const { return counters_; }

 private:
  // What holds a Working loop back besides its transforms and sends: the
  // rate limit's wait, which the timer ends (a hold or a stop cuts it).
  enum class Backpressure : uint8_t { None, RateLimit };
  struct Item {
    store::QueuedDelivery row;
    std::optional<Outcome> outcome;         // the transform's
    bool sending = false;                   // its send is under way
    std::optional<senders::SendOutcome> sent;  // the sender's answer
  };

  void read();
  void onRows(std::vector<store::QueuedDelivery> rows);
  void next();
  void deliver(Item& item);
  bool needsSend(const Item& item) const;
  size_t sendDepth() const;
  void launchSends();
  void launch(size_t i);
  void sendDone(Item& item);
  void finished(store::MessageStatus status, std::optional<std::string> why,
                std::optional<std::string> output);
  void failed(const std::string& why);
  void flush(std::function<void(bool ok)> then);
  // An outcome joined the batch: flush it within flushAfter.
  void batched();
  void flushInBackground();
  void settle(const std::vector<store::MessageRef>& refs);
  void readAgainOrIdle();
  void idleUntilWindow();
  void backOff(std::chrono::milliseconds delay);
  // The one place the phase changes; `wait` is BackingOff's.
  void enter(Phase next, std::chrono::milliseconds wait = {});
  void armTimer(std::chrono::milliseconds delay);
  void maybeStopped();
  // Held: stops where it is (the read in hand is abandoned, its rows stay
  // pending) and waits, without a timer, for release().
  void park();
  // Stopping or held: the read in hand ends at the message in hand.
  bool winding() const { return stopping_ || holds_ != 0; }
  // Counts what became of a message here ("sent", "filtered",
  // "quarantined", "routed") and says it.
  void report(const Item& item, std::string_view outcome, const std::optional<std::string>& why);
  LogFields fields(int64_t message = 0) const {
    return LogFields{target_.interfaceName, target_.destinationName, message, {}};
  }
  static int64_t receivedAtMs(const std::string& pgText);

  uv_loop_t* loop_;
  store::Store& store_;
  Transformer& transformer_;
  DeliveryTarget target_;
  std::vector<int32_t> lanes_;
  DeliveryTiming timing_;
  std::optional<senders::RateLimiter> limiter_;
  UvHandle<uv_timer_t> timer_;
  UvHandle<uv_timer_t> flushTimer_;
  int backgroundFlushes_ = 0;  // in flight; a stop and the next read wait for them
  std::unique_ptr<Settler> ownSettler_;  // when the target brings none

  Phase phase_ = Phase::Idle;
  Backpressure backpressure_ = Backpressure::None;
  bool wakeAgain_ = false;     // woken while busy or held: read again after
  bool lastReadFull_ = false;  // the last read stopped at its row or byte limit: more wait
  bool emptySeen_ = false;     // the last read (or the start) found nothing, and no wake came since
  bool inNext_ = false;       // inside next(), so callbacks don't re-enter it
  size_t sendPos_ = 0;        // the next item whose send may start (pipelined senders)
  size_t sendsInFlight_ = 0;
  uint64_t stream_ = 0;       // this read's order at a pipelined sender (Sender::newStream)
  bool interfaceStopped_ = false;
  // The message a failure is backing off for (failed() to the back-off),
  // and whether this loop's RetryWait is in its destination's activity.
  int64_t retryMessage_ = 0;
  bool retryShown_ = false;
  std::shared_ptr<int> generation_;  // outcomes of an abandoned read are ignored
  bool stopping_ = false;
  uint8_t holds_ = 0;  // Hold bits
  std::function<void()> stopDone_;
  std::vector<Item> items_;
  size_t pos_ = 0;
  int failures_ = 0;  // consecutive transient failures of the first message
  int flushFailures_ = 0;               // consecutive flushes that recorded nothing
  bool backgroundFlushFailed_ = false;  // one of the background flushes running failed
  std::vector<store::DeliveryOutcome> batch_;
  std::vector<store::RoutedItem> routed_;
  DeliveryCounters counters_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::delivery
