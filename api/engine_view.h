// EngineView: what the API may see of the running engine, as plain values.
// api/ can't include supervisor/; the supervisor implements this
// (supervisor/engine_view_adapter.h) and fills these structs from its
// workers, gates and in-memory activity counters.
//
// Every call is made on the engine's loop and must not block it. The
// interfaces' view answers through a callback: the queue counts will come
// from the store's partial indexes, which is a query.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace ductus::api {

// Serving: everything runs. Draining: gates closed, the queues empty out.
// Stopping: the engine is shutting down. /health answers 200 only while
// serving.
enum class EngineState { Serving, Draining, Stopping };

inline std::string_view engineStateName(EngineState s) {
  switch (s) {
    case EngineState::Serving: return "serving";
    case EngineState::Draining: return "draining";
    case EngineState::Stopping: return "stopping";
  }
  return "serving";
}

struct WorkerInfo {
  std::string group;   // "shared", or the dedicated interface's name
  int slot = 0;        // its place in the group
  pid_t pid = 0;       // 0: not running now (waiting to be started again)
  std::string state;   // "starting", "running", "down"
  int64_t restarts = 0;
  int64_t callsInFlight = 0;
};

struct EngineInfo {
  std::chrono::system_clock::time_point startedAt;
  EngineState state = EngineState::Serving;
  std::vector<WorkerInfo> workers;
};

// How long something took since the engine started, in buckets. `bounds`
// are the buckets' upper bounds in seconds, ascending; `buckets` has one
// more (+Inf) and is not cumulative.
struct HistogramInfo {
  std::vector<double> bounds;
  std::vector<int64_t> buckets;
  double sumSeconds = 0;
  int64_t count = 0;
};

// Counts since the engine started (they start at zero with it).
struct DestinationInfo {
  std::string name;
  bool route = false;  // its outputs go into another interface's queue
  int64_t sent = 0, filtered = 0, quarantined = 0, routed = 0, retries = 0;
  // Set by interfacesWithPending() only: its deliveries pending now, from
  // the store (nullopt: not asked, or a destination the store has no id for).
  std::optional<int64_t> pending;
  HistogramInfo latency;    // received -> finished here
  HistogramInfo send;       // one send
  HistogramInfo transform;  // one call of its function, a wait for a worker included
};

struct InterfaceInfo {
  std::string name;
  std::string source;  // "mllp", "http", "file", "schedule", "internal"
  std::string state;   // "running", or "stopped" (runaways stopped its code)
  // Whether its intake takes messages; nullopt for a respond-mode HTTP
  // interface, which has no queue.
  std::optional<bool> gateOpen;
  int64_t received = 0, duplicates = 0;
  std::vector<DestinationInfo> destinations;
};

class EngineView {
 public:
  virtual ~EngineView() = default;
  virtual EngineState state() const = 0;
  virtual EngineInfo engine() const = 0;
  virtual void interfaces(std::function<void(Result<std::vector<InterfaceInfo>>)> done) = 0;
  // As interfaces(), with each destination's `pending` counted by the
  // store now (a query: answers later, on the loop). The default leaves
  // them unset.
  virtual void interfacesWithPending(
      std::function<void(Result<std::vector<InterfaceInfo>>)> done) {
    interfaces(std::move(done));
  }
  // Wakes every delivery loop of the interface, so rows an API call made
  // pending (a resend) are read now rather than at the loop's next wake.
  // An interface this engine doesn't run: nothing. The default does
  // nothing (a view without loops).
  virtual void wake(const std::string& interface) { (void)interface; }
};

}  // namespace ductus::api
