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
#include "schema/store_types.h"
#include "schema/traffic_store.h"

namespace ductus::config {
struct InterfaceConfig;
}

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

// Another engine running on the same database (supervisor/ownership.h).
struct PeerEngineInfo {
  std::string id, host, version;
  int64_t pid = 0;
  std::string startedAt;                // RFC 3339, UTC
  std::vector<std::string> interfaces;  // what it owns
};

// A listener's allow: and TLS counts since the engine started
// (common/net/listener_guard.h).
struct ListenerInfo {
  std::string name;  // "api", the interface's name, or "host:port" for an HTTP port
  bool tls = false;
  uint64_t handshakes = 0;         // finished and allowed
  uint64_t handshakeFailures = 0;  // failed, timed out, a client certificate refused
  uint64_t refused = 0;            // dropped unread by allow:
};

// A certificates: entry of resources.yaml as the engine serves it now.
struct CertificateInfo {
  std::string name;
  std::string subject;
  std::chrono::system_clock::time_point notAfter;
};

// The held area (schema/retention.h) as retention's last run counted it:
// unfinished messages of expired periods, kept until delivered, resent or
// dismissed.
struct HeldInfo {
  int64_t pending = 0, quarantined = 0, finished = 0;  // messages
  int64_t deliveries = 0;
  int64_t bytes = 0;
  int64_t moved = 0;  // messages moved there since the engine started
};

struct EngineInfo {
  std::chrono::system_clock::time_point startedAt;
  EngineState state = EngineState::Serving;
  std::vector<WorkerInfo> workers;
  // Ownership: this engine's id in `engines` ("" when unknown), "held" or
  // "lost" (its lock connection failed: delivery, files and schedules
  // pause until it is taken again), and the other live engines on the
  // database as of the last check (every 2 s).
  std::string engineId;
  std::string ownership;
  std::vector<PeerEngineInfo> otherEngines;
  std::vector<ListenerInfo> listeners;
  std::vector<CertificateInfo> certificates;
  std::optional<HeldInfo> held;  // none before retention's first run
};

// How long something took since the engine started, in buckets. `bounds`
// are the buckets' upper bounds in seconds, ascending; `buckets` has one
// more (+Inf) and is not cumulative.
struct HistogramInfo {
  std::vector<double> bounds;
  std::vector<int64_t> buckets;
  double sumSeconds = 0;
  int64_t count = 0;
  std::optional<double> maxSeconds;  // the largest observation, when known
};

// A destination an operator paused (POST .../pause): its delivery loops
// read nothing until it is resumed. Times are RFC 3339, UTC.
struct PauseReasonInfo {
  std::string at, by, reason;
};
struct PauseInfo {
  std::string since;  // the first pause
  std::string by;     // who paused it first
  std::vector<PauseReasonInfo> reasons;  // every pause's, oldest first
};

// An interface whose intake an operator stopped (POST .../stop): its
// listener closed (MLLP) or answering 503 (HTTP), its files and schedules
// not polled, until POST .../start. What it stored is still delivered.
// since is RFC 3339, UTC.
struct IntakeStopInfo {
  std::string since;
  std::string by;
  std::optional<std::string> reason;
};

// A destination's health as the monitor judged it (common/monitor/): its
// state (monitor::stateName: paused, stalled, error, behind, ok) and the
// facts behind it. Times are RFC 3339, UTC; "" when never.
struct DestinationHealthInfo {
  std::string state = "ok";
  std::string reason;  // one line an operator can act on; "" when ok
  int64_t waiting = 0;
  std::optional<double> oldestSeconds;  // the oldest waiting message's age
  int64_t quarantined = 0;
  std::string lastSent, lastError;
  std::string lastErrorText;
  // For a backlog over a minute old: catching up (with an ETA) or not,
  // and what looks like the cause ("burst", "slow receiver").
  std::optional<bool> catchingUp;
  std::optional<double> etaSeconds;
  std::vector<std::string> causes;
};

// An interface's: the worst of its destinations', or stopped, intake_stopped,
// late, quiet.
struct InterfaceHealthInfo {
  std::string state = "ok";
  std::string reason;
  std::string lastReceived, watchedSince;  // RFC 3339, UTC; "" when never
};

// Counts since the engine started (they start at zero with it).
struct DestinationInfo {
  std::string name;
  bool route = false;  // its outputs go into another interface's queue
  int64_t sent = 0, filtered = 0, quarantined = 0, routed = 0, retries = 0;
  // Set by interfacesWithPending() only: its deliveries pending now, from
  // the store (nullopt: not asked, or a destination the store has no id for).
  std::optional<int64_t> pending;
  // Likewise its deliveries quarantined now (`quarantined` above counts
  // those since the start).
  std::optional<int64_t> quarantinedNow;
  HistogramInfo latency;    // received -> finished here
  HistogramInfo send;       // one send
  HistogramInfo transform;  // one call of its function, a wait for a worker included
  std::optional<PauseInfo> paused;  // nullopt: its loops run
  // Set by interfacesWithPending() when the engine judges health.
  std::optional<DestinationHealthInfo> health;
};

struct InterfaceInfo {
  std::string name;
  std::string source;  // "mllp", "http", "file", "schedule", "internal"
  std::string state;   // "running", or "stopped" (runaways stopped its code)
  // Whether its intake takes messages; nullopt for a respond-mode HTTP
  // interface, which has no queue.
  std::optional<bool> gateOpen;
  std::optional<IntakeStopInfo> intakeStopped;  // nullopt: its intake takes messages
  int64_t received = 0, duplicates = 0;
  std::vector<DestinationInfo> destinations;
  std::optional<InterfaceHealthInfo> health;  // as DestinationInfo::health
};

// GET /hotspots: where a destination's backlog waits. One lane's first
// waiting message (the one its worker is on), and the lanes with most.
struct LaneInfo {
  int32_t lane = 0;
  int64_t waiting = 0;
  int64_t firstMessageId = 0;
  std::string firstKey;        // the message's ordering key ("" when none)
  int32_t firstAttempts = 0;   // failed attempts so far
  std::string firstLastError;  // its last error's text
  std::string firstReceivedAt; // RFC 3339, UTC
  // When the delivery loop holding this lane tries again after a failure
  // (RFC 3339, UTC): it waits as a whole, so for each of its lanes.
  // nullopt while it is not waiting to retry (sending, reading, paused).
  std::optional<std::string> nextRetryAt;
};
// A finding names its kind ("blocked-lane", "receiver-down", "hot-key",
// "unowned-lanes") and says it in a sentence.
struct HotspotFinding {
  std::string kind, text;
};
struct HotspotInfo {
  std::string interface, destination;
  int64_t waiting = 0;
  std::vector<LaneInfo> lanes;  // most waiting first, at most 10
  std::vector<HotspotFinding> findings;
};

// readKeys(): a message as the interface's intake would store it.
struct MessageKeysView {
  int64_t interfaceId = 0;
  int16_t tier = 49;                    // the interface's retention tier (store::Tier)
  std::vector<int64_t> destinationIds;  // one delivery each
  int32_t lane = 0;
  std::optional<std::string> dedupeKey;
  store::MessageColumns columns;  // the browser's
};

// checkPayload(): why the interface's intake would refuse a payload, and
// where (intake/payload_check.h). 0 or "" where the check can't say.
struct PayloadProblemInfo {
  std::string text;
  int line = 0, column = 0;
  std::string segment, field;
};
struct PayloadCheckInfo {
  std::string format;                        // the interface's: hl7v2, json, ...
  uint64_t maxBytes = 0;                     // its max_message_size
  std::vector<PayloadProblemInfo> problems;  // empty: intake would store it
};

// tryPayload(): what one destination's function made of the payload.
// outcome: "sent" (output is what would be sent, or routed), "filtered"
// (reason: the script's, may be ""), "quarantined" (error: the thrown
// error, or the runaway's: runaway "timeout" | "heap"), "error" (a
// transient failure the engine would retry: error says why).
struct TryOutcomeInfo {
  std::string destination;
  bool route = false;
  std::string outcome;
  std::optional<std::string> output, reason, error, runaway;
  int64_t millis = 0;  // the call's time, a wait for a worker included
};

// GET /engine/drain. drained: draining, no store in flight and nothing
// pending for this engine's unpaused destinations of running interfaces.
struct DrainInfo {
  bool draining = false;
  bool stopWhenDrained = false;
  int64_t storesInFlight = 0;
  // deliveries pending for this engine's unpaused destinations of
  // running interfaces
  int64_t pending = 0;
  bool drained = false;
};

// GET /retention (api/retention_routes.h): each interface's tiers, every
// partition of the store, the held area and the job's last run. Tiers are
// "1w" | "3w" | "7w" (a period of the held area: "held"); days are
// YYYY-MM-DD (UTC).
struct RetentionInterfaceInfo {
  std::string interface;
  std::string configured;  // what the project asks for
  std::string applied;     // where its new messages go
  // none | new | lengthened | waiting (a shorter tier waits for a confirmation)
  std::string change = "none";
  std::optional<std::string> requestedAt;  // waiting: since when (RFC 3339)
  std::string quarantined = "keep";        // keep | purge
};
struct RetentionPeriodInfo {
  std::string tier, from, to, dropsOn;
  bool expired = false;
  int64_t messages = 0, deliveries = 0, bytes = 0;  // rows: estimates
  int64_t unfinished = 0;                           // counted for expired periods
  bool detached = false;                            // an interrupted drop, finished by the next run
};
struct RetentionRunInfo {
  std::string at;  // RFC 3339, when it ended
  int64_t dropped = 0, moved = 0, dedupeKeysPurged = 0;
  // stored messages brought to their interface's changed tier, and those
  // it no longer keeps
  int64_t tierMoved = 0, tierDeleted = 0;
  std::vector<std::string> kept;    // expired periods still there (rows in use)
  std::vector<std::string> failed;  // "1w 2026-01-01: why"
  bool busy = false;                // another engine's run had the database
};
struct RetentionInfo {
  std::vector<RetentionInterfaceInfo> interfaces;
  std::vector<RetentionPeriodInfo> periods;
  std::optional<HeldInfo> held;
  std::optional<RetentionRunInfo> lastRun;
};

// Error kinds of the actions below: NotFound (no such interface or
// destination here: 404), Conflict (not in a state the action applies to:
// 409), Code (the interface's code does not load: 422).

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
  // Every destination with a backlog, its busiest lanes and what they
  // show (GET /hotspots): queries, so it answers later, on the loop. The
  // default: none.
  // The traffic this engine counted for an interface and has not written
  // yet (the minute in progress, and any a failed write kept): the charts'
  // last point is live. On the loop; the default: none.
  virtual std::vector<store::TrafficRow> unsavedTraffic(int64_t interfaceId) const {
    (void)interfaceId;
    return {};
  }
  virtual void hotspots(std::function<void(Result<std::vector<HotspotInfo>>)> done) {
    done(std::vector<HotspotInfo>{});
  }
  // Wakes every delivery loop of the interface, so rows an API call made
  // pending (a resend) are read now rather than at the loop's next wake.
  // An interface this engine doesn't run: nothing. The default does
  // nothing (a view without loops).
  virtual void wake(const std::string& interface) { (void)interface; }
  // What intake would store for this payload on this interface: its keys
  // read with the interface's settings, its tier and destinations (an
  // edited copy, POST /messages/{id}/edit). An Error of kind
  // NotRunHere when this engine doesn't run the interface's intake (a
  // respond-mode interface has none). The default runs none.
  virtual Result<MessageKeysView> readKeys(const std::string& interface,
                                           std::string_view payload) {
    (void)payload;
    return Error{"interface " + interface + " is not run by this engine", ErrorKind::NotRunHere};
  }
  // What intake refuses of this payload on this interface (its format and
  // max_message_size), the same check its sources make, for an edited
  // copy before anything is written and for a dry run. NotRunHere as
  // readKeys.
  virtual Result<PayloadCheckInfo> checkPayload(const std::string& interface,
                                                std::string_view payload) {
    (void)payload;
    return Error{"interface " + interface + " is not run by this engine", ErrorKind::NotRunHere};
  }
  // A dry run: each destination's function on the payload, in the engine's
  // workers (WorkerPool::dryRun: services mocked, the interface's timeout,
  // a runaway kills only its worker), answered in destination order on the
  // loop. Nothing is stored or sent. NotFound: not run here; Conflict: its
  // code is stopped, or it has no queue (respond mode). The default: no
  // engine.
  virtual void tryPayload(const std::string& interface, std::string payload,
                          std::function<void(Result<std::vector<TryOutcomeInfo>>)> done) {
    (void)payload;
    done(Error{"no engine runs " + interface + " here", ErrorKind::Unavailable});
  }

  // ---- actions (api/engine_actions.h), on the loop; the API has written
  // their audit rows (and a pause's row) first. The defaults: no engine.
  // Holds (pause set) or releases (nullopt) the destination's delivery
  // loops and shows the pause in interfaces(). not_found: no such queued
  // destination here.
  virtual Status setPaused(const std::string& interface, const std::string& destination,
                           std::optional<PauseInfo> pause) {
    (void)interface, (void)destination, (void)pause;
    return Error{"no engine runs here", ErrorKind::Unavailable};
  }
  // Loads the interface's code again from disk into its workers, then wakes
  // its loops. Conflict: it isn't stopped; Code: the new code does
  // not load (it stays stopped).
  virtual void restartInterface(const std::string& interface, std::function<void(Status)> done) {
    (void)interface;
    done(Error{"no engine runs here", ErrorKind::Unavailable});
  }
  // Stops (stop set) or starts (nullopt) the interface's intake: its
  // source closes or opens again, and interfaces() shows the stop.
  // NotFound: not run here; Conflict: a source with no intake of its own
  // (internal: routes fill it).
  virtual Status setIntakeStopped(const std::string& interface,
                                  std::optional<IntakeStopInfo> stop) {
    (void)interface, (void)stop;
    return Error{"no engine runs here", ErrorKind::Unavailable};
  }
  // The interface as this engine runs it (read at its start), for GET
  // .../configuration; null when it runs no such interface. Holds the
  // substituted secrets: whoever shows it redacts them.
  virtual const config::InterfaceConfig* interfaceConfig(const std::string& interface) const {
    (void)interface;
    return nullptr;
  }
  // Closes every intake gate (state Draining); with stopWhenDrained the
  // engine stops once drained. Again while draining: only the stop flag
  // changes.
  virtual Status startDrain(bool stopWhenDrained) {
    (void)stopWhenDrained;
    return Error{"no engine runs here", ErrorKind::Unavailable};
  }
  // Opens the gates again. Conflict: not draining (or stopping).
  virtual Status stopDrain() { return Error{"no engine runs here", ErrorKind::Unavailable}; }
  virtual void drainStatus(std::function<void(Result<DrainInfo>)> done) {
    done(Error{"no engine runs here", ErrorKind::Unavailable});
  }
  // Retention as the engine runs it (a query of the catalog: answers later).
  virtual void retention(std::function<void(Result<RetentionInfo>)> done) {
    done(Error{"no engine runs here", ErrorKind::Unavailable});
  }
  // A shorter tier was confirmed (its row and audit row are written): the
  // interface's new messages go to it from now on. NotFound: not run here.
  virtual Status retentionConfirmed(const std::string& interface, const std::string& tier) {
    (void)interface, (void)tier;
    return Error{"no engine runs here", ErrorKind::Unavailable};
  }
};

}  // namespace ductus::api
