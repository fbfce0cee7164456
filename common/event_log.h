// The engine's events: what an operator looks for after the fact and used
// to find only in the log. AR refusals, a delivery given up after its
// retries, a worker restarted, a runaway script, an interface the runaway
// guard stopped, an operator's intake stop and start, alerts fired and
// resolved. Whoever sees one happen records it through a Sink (null: no
// one listens); the engine's Sink is supervisor/monitor/event_recorder.h,
// which writes them in batches to the bounded `events` table (migration
// 0017) for GET /api/v1/event-log and the console's Events page.
//
// record() never blocks and never fails: an event is a fact for a person,
// not a message; one lost to a full queue or a crash is counted or gone,
// nothing else.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ductus::events {

enum class Kind : uint8_t {
  ArRefused,            // the MLLP listener answered AR itself
  DeliveryQuarantined,  // a delivery given up after its retries (max_attempts)
  WorkerRestarted,      // a worker process exited and was started again
  Runaway,              // a script ran past its timeout or its heap
  InterfaceStopped,     // the runaway guard stopped an interface's code
  IntakeStopped,        // an operator stopped an interface's intake
  IntakeStarted,        // ... and started it again
  AlertFired,           // an alert fired (or reopened)
  AlertResolved,        // an alert recovered
  EventsDropped,        // the recorder's queue was full: how many went
};

inline constexpr std::array<std::string_view, 10> kKindNames{
    "ar_refused",        "delivery_quarantined", "worker_restarted", "runaway",
    "interface_stopped", "intake_stopped",       "intake_started",   "alert_fired",
    "alert_resolved",    "events_dropped"};

inline std::string_view kindName(Kind k) { return kKindNames[static_cast<size_t>(k)]; }

inline std::optional<Kind> parseKind(std::string_view s) {
  for (size_t i = 0; i < kKindNames.size(); ++i)
    if (kKindNames[i] == s) return static_cast<Kind>(i);
  return std::nullopt;
}

// The longest detail kept; longer text is cut (at a character's start).
inline constexpr size_t kMaxDetail = 1000;

struct Event {
  Kind kind = Kind::ArRefused;
  std::string interface;    // "": none (a shared worker, a certificate's alert)
  std::string destination;  // "": none
  int64_t messageId = 0;    // 0: none
  std::string detail;       // what happened, in the engine's words
  std::chrono::system_clock::time_point at = std::chrono::system_clock::now();
};

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void record(Event e) = 0;
};

}  // namespace ductus::events
