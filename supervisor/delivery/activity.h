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
#include <string>
#include <string_view>
#include <vector>

#include "common/uv_handle.h"

namespace ductus::delivery {

inline void count(std::atomic<int64_t>& counter, int64_t n = 1) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

struct DestinationActivity {
  DestinationActivity(std::string n, bool r) : name(std::move(n)), route(r) {}
  const std::string name;
  const bool route;  // its outputs go into another interface's queue
  std::atomic<int64_t> sent{0};
  std::atomic<int64_t> filtered{0};
  std::atomic<int64_t> quarantined{0};
  std::atomic<int64_t> routed{0};
  std::atomic<int64_t> retries{0};  // transient failures, each tried again later
};

struct InterfaceActivity {
  explicit InterfaceActivity(std::string n) : name(std::move(n)) {}
  const std::string name;
  std::atomic<int64_t> received{0};  // stored, duplicates included
  std::atomic<int64_t> duplicates{0};
  // A deque: a destination stays where it is as more are added (delivery
  // loops hold its address).
  std::deque<DestinationActivity> destinations;

  DestinationActivity& addDestination(std::string name, bool route = false) {
    return destinations.emplace_back(std::move(name), route);
  }
};

// Plain copies of the counts at one moment, for differences.
struct DestinationCounts {
  std::string name;
  bool route = false;
  int64_t sent = 0, filtered = 0, quarantined = 0, routed = 0, retries = 0;
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

// Logs summarize()'s lines at info every `every`, on the loop's timer (a
// snapshot is a few loads per destination: nothing that blocks the loop).
class ActivityReporter {
 public:
  ActivityReporter(uv_loop_t* loop, const ActivityCounters& counters,
                   std::chrono::milliseconds every);

  // Logs what changed since the last report.
  void report();

 private:
  const ActivityCounters& counters_;
  std::string period_;
  std::vector<InterfaceCounts> last_;
  UvHandle<uv_timer_t> timer_;
};

}  // namespace ductus::delivery
