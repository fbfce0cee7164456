// Activity: what happened to messages since the engine started, counted as
// it happens per interface and destination, and the summary the engine
// logs from it every minute (ActivityReporter): until the API and console
// exist, the one place that says a message was filtered.
//
// The counts are atomics, written on the engine's loop (intake after a
// commit, a delivery loop when it decides an outcome) with relaxed order:
// a reader on another thread (a /metrics endpoint) needs each count whole,
// not all of them from one instant. Interfaces and destinations are added
// while the engine builds its delivery, before anything counts; after that
// the set is fixed and may be walked without a lock.
#pragma once

#include <uv.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/uv_handle.h"
#include "common/histogram.h"

namespace ductus::delivery {

inline void count(std::atomic<int64_t>& counter, int64_t n = 1) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

// A moment something last happened, in ms since the epoch (0: never as
// far as this engine knows). It only moves forward: a mark older than the
// one held (a time loaded from the store, another loop's) changes
// nothing. Written on the loop, read by the monitor and the API.
class Moment {
 public:
  void mark(int64_t ms) {
    int64_t held = ms_.load(std::memory_order_relaxed);
    while (ms > held && !ms_.compare_exchange_weak(held, ms, std::memory_order_relaxed)) {
    }
  }
  void markNow();
  int64_t ms() const { return ms_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> ms_{0};
};

// A delivery loop waiting to try again after a failure (BackingOff): the
// message it failed on, the lanes it holds (all wait with it; empty: every
// lane, the destination's only loop), and when it
// reads again, in ms since the epoch. Kept only in memory, for GET
// /hotspots ("next retry in 12 s").
struct RetryWait {
  int64_t messageId = 0;
  std::vector<int32_t> lanes;
  int64_t atMs = 0;
};

struct DestinationActivity {
  DestinationActivity(std::string n, bool r, int64_t id = 0)
      : name(std::move(n)), route(r), destinationId(id) {}
  const std::string name;
  const bool route;  // its outputs go into another interface's queue
  const int64_t destinationId;  // in the store (0: none, as in some tests)
  std::atomic<int64_t> sent{0};
  std::atomic<int64_t> filtered{0};
  std::atomic<int64_t> quarantined{0};
  std::atomic<int64_t> routed{0};
  std::atomic<int64_t> retries{0};  // transient failures, each tried again later
  Histogram latency;    // received -> finished here (sent, filtered, quarantined, routed)
  Histogram sendTime;   // one send, from handing it to the sender to its answer
  Histogram transform;  // one call of the destination's function
  // Last activity (kept in the store by the monitor, loaded at start):
  // sent (or routed), anything finished (sent, filtered, routed,
  // quarantined: what "nothing finished" of a stall means), a failed
  // attempt or a quarantine, and that error's text.
  Moment lastSent, lastFinished, lastError;
  void markError(int64_t ms, std::string text) {
    std::lock_guard lock(errorMutex_);
    if (ms < lastError.ms()) return;
    lastError.mark(ms);
    lastErrorText_ = std::move(text);
  }
  std::string lastErrorText() const {
    std::lock_guard lock(errorMutex_);
    return lastErrorText_;
  }
  // Each loop says when it waits to retry and when it stops waiting (a
  // read, a hold, a stop); `loop` only names it.
  void waitRetry(const void* loop, RetryWait w) {
    std::lock_guard lock(retryMutex_);
    retryWaits_[loop] = std::move(w);
  }
  void endRetry(const void* loop) {
    std::lock_guard lock(retryMutex_);
    retryWaits_.erase(loop);
  }
  std::vector<RetryWait> retryWaits() const {
    std::lock_guard lock(retryMutex_);
    std::vector<RetryWait> out;
    for (auto& [loop, w] : retryWaits_) out.push_back(w);
    return out;
  }

 private:
  mutable std::mutex errorMutex_;
  std::string lastErrorText_;
  mutable std::mutex retryMutex_;
  std::map<const void*, RetryWait> retryWaits_;
};

struct InterfaceActivity {
  explicit InterfaceActivity(std::string n) : name(std::move(n)) {}
  const std::string name;
  std::atomic<int64_t> received{0};  // stored, duplicates included
  std::atomic<int64_t> duplicates{0};
  Moment lastReceived;  // as DestinationActivity's moments
  // The last time an operator started its stopped intake (POST .../start)
  // in this engine: the monitor expects nothing before it (0: never).
  Moment intakeStarted;
  // A deque: a destination stays where it is as more are added (delivery
  // loops hold its address).
  std::deque<DestinationActivity> destinations;

  DestinationActivity& addDestination(std::string name, bool route = false,
                                      int64_t destinationId = 0) {
    return destinations.emplace_back(std::move(name), route, destinationId);
  }
};

// Plain copies of the counts at one moment, for differences.
struct DestinationCounts {
  std::string name;
  bool route = false;
  int64_t sent = 0, filtered = 0, quarantined = 0, routed = 0, retries = 0;
  int64_t destinationId = 0;
  std::optional<int64_t> waiting;  // pending now, when the store was asked
};
struct InterfaceCounts {
  std::string name;
  int64_t received = 0, duplicates = 0;
  std::vector<DestinationCounts> destinations;
};

class ActivityCounters {
 public:
  InterfaceActivity& addInterface(std::string name) {
    return interfaces_.emplace_back(std::move(name));
  }
  const std::deque<InterfaceActivity>& interfaces() const { return interfaces_; }
  std::vector<InterfaceCounts> snapshot() const;

 private:
  std::deque<InterfaceActivity> interfaces_;
};

// One interface's summary: what changed, and the line that says it.
struct ActivityLine {
  InterfaceCounts change;  // now minus before
  std::string text;
};

// A line per interface where something happened between two snapshots of
// the same counters (`before` empty: since the start). `period` ends the
// line's first part: "adt-feed in the last minute: 3 received, ...".
std::vector<ActivityLine> summarize(const std::vector<InterfaceCounts>& before,
                                    const std::vector<InterfaceCounts>& now,
                                    std::string_view period);

// Pending deliveries per destination id, asked of the store each report
// (Store::waitingCounts); answers on the loop, nullopt when it could not.
using WaitingCounts = std::function<void(
    std::function<void(std::optional<std::map<int64_t, int64_t>>)> answer)>;

// Logs summarize()'s lines at info every `every`, on the loop's timer (a
// snapshot is a few loads per destination: nothing that blocks the loop).
// With `waiting`, each line also says how many wait per destination, and a
// destination with messages waiting that sent nothing in the period is
// said too: a queue that does not move is what an operator must hear of.
class ActivityReporter {
 public:
  ActivityReporter(uv_loop_t* loop, const ActivityCounters& counters,
                   std::chrono::milliseconds every, WaitingCounts waiting = {});

  // Logs what changed since the last report (asks for the waiting counts
  // first, when it can).
  void report();

 private:
  void log(std::vector<InterfaceCounts> now);

  const ActivityCounters& counters_;
  WaitingCounts waiting_;
  bool asking_ = false;  // a count is in flight: the next tick does not ask again
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::string period_;
  std::vector<InterfaceCounts> last_;
  UvHandle<uv_timer_t> timer_;

 public:
  ~ActivityReporter() { *alive_ = false; }
};

}  // namespace ductus::delivery
