// GET /api/v1/events: the engine's counts and states as Server-Sent Events,
// so the web console stays live without polling.
//
// One counting task (EventHub) serves every listener, and runs only while
// there is one: every `interval` it builds a snapshot (the engine's state,
// its workers, each interface's state, gate and counts, each destination's
// counts, its pending deliveries as the store counts them and whether it
// is paused) and sends it to each listener whose last event differs. A
// listener gets the latest snapshot as soon as it connects. Each event is a
// whole snapshot, one line of JSON (a few KB at this scale: a delta would
// save little and cost every client a merge):
//
//   event: snapshot
//   data: {"state":"serving","workers":[...],"interfaces":[...]}
//   <blank line>
//
// After `heartbeat` without a write, a comment line (": keep-alive") keeps
// proxies from closing a quiet stream. Past maxStreams open streams a new
// one is answered 503. Streams end when the API server closes (the engine
// stops), or when a client falls more than maxUnread behind
// (net::HttpStream).
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/engine_view.h"
#include "api/route.h"
#include "common/uv_handle.h"

namespace ductus::api {

struct EventsOptions {
  std::chrono::milliseconds interval = std::chrono::seconds(1);
  std::chrono::milliseconds heartbeat = std::chrono::seconds(15);
  // Each stream holds a connection and a query's share every interval.
  size_t maxStreams = 64;
  // Per client: bytes written and not taken past which it is dropped.
  size_t maxUnread = size_t{1} << 20;
};

// The snapshot as the events carry it (one line of JSON).
std::string snapshotJson(const EngineInfo& engine, const std::vector<InterfaceInfo>& interfaces);

class EventHub : public std::enable_shared_from_this<EventHub> {
 public:
  // `engine` null: the route for the document only; it answers 503.
  static std::shared_ptr<EventHub> make(EngineView* engine, EventsOptions options = {});
  ~EventHub();
  EventHub(const EventHub&) = delete;
  EventHub& operator=(const EventHub&) = delete;

  // A request for GET /events, its caller already checked: a stream, or 503.
  void join(ApiRespond respond);

  // On the loop; for the tests.
  size_t listeners() const { return listeners_.size(); }
  bool counting() const;
  uint64_t snapshotsBuilt() const { return built_; }

 private:
  struct Listener {
    uint64_t id = 0;
    net::HttpStream stream;
    uint64_t sentVersion = 0;  // of the snapshot it got last; 0: none yet
    uint64_t lastWriteMs = 0;
  };

  EventHub(EngineView* engine, EventsOptions options);
  void tick();
  void build();
  void built(Result<std::vector<InterfaceInfo>> list);
  void send(Listener& l);
  void write(Listener& l, std::string bytes);
  void leave(uint64_t id);
  void stop();

  EngineView* engine_;
  const EventsOptions options_;
  std::vector<Listener> listeners_;  // a few dozen at most
  uv_loop_t* loop_ = nullptr;        // the streams', known from the first
  UvHandle<uv_timer_t> timer_;
  std::string current_;    // the latest snapshot; "" while nobody listens
  uint64_t version_ = 0;   // counts the changes of current_
  bool building_ = false;  // a snapshot's query is out
  uint64_t nextId_ = 0;
  uint64_t built_ = 0;
};

// GET /api/v1/events for a viewer, on this hub.
Route eventsRoute(std::shared_ptr<EventHub> hub);
// The route on a hub of its own, for allRoutes().
std::vector<Route> eventsRoutes(EngineView* engine, EventsOptions options = {});

}  // namespace ductus::api
