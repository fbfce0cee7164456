#include "api/events.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "api/engine_routes.h"
#include "common/log.h"

namespace ductus::api {
namespace {

// In the order written: the state first reads as a person expects.
using json = nlohmann::ordered_json;

// The stream as a string (it is text/event-stream, not JSON); the
// snapshot each event carries is described under $defs.
constexpr const char* kEventsSchema = R"({
  "type": "string",
  "description": "Server-Sent Events. Each change is an event `snapshot` whose data is one line of JSON (the snapshot below, whole); the first comes at once. A comment line `: keep-alive` comes after 15 s without an event. At most 64 streams at once: past that, 503.",
  "$defs": {
    "snapshot": {
      "type": "object",
      "required": ["state", "workers", "interfaces"],
      "properties": {
        "state": {"type": "string", "enum": ["serving", "draining", "stopping"]},
        "workers": {
          "type": "array",
          "items": {
            "type": "object",
            "required": ["group", "slot", "pid", "state", "restarts"],
            "properties": {
              "group": {"type": "string"},
              "slot": {"type": "integer"},
              "pid": {"type": ["integer", "null"], "description": "null while not running"},
              "state": {"type": "string", "enum": ["starting", "running", "down"]},
              "restarts": {"type": "integer"}
            }
          }
        },
        "interfaces": {
          "type": "array",
          "items": {
            "type": "object",
            "required": ["name", "state", "gate", "intakeStopped", "received", "duplicates",
                         "destinations"],
            "properties": {
              "name": {"type": "string"},
              "state": {"type": "string", "enum": ["running", "stopped"]},
              "gate": {"type": ["string", "null"], "enum": ["open", "closed", null]},
              "intakeStopped": {"type": "boolean",
                                "description": "an operator stopped its intake; who, when and why: GET /api/v1/interfaces"},
              "received": {"type": "integer", "description": "since the engine started"},
              "duplicates": {"type": "integer"},
              "destinations": {
                "type": "array",
                "items": {
                  "type": "object",
                  "required": ["name", "sent", "filtered", "quarantined", "routed", "retries",
                               "pending", "quarantinedNow", "paused"],
                  "properties": {
                    "name": {"type": "string"},
                    "sent": {"type": "integer", "description": "since the engine started, as the next three"},
                    "filtered": {"type": "integer"},
                    "quarantined": {"type": "integer"},
                    "routed": {"type": "integer"},
                    "retries": {"type": "integer"},
                    "pending": {"type": ["integer", "null"],
                                "description": "pending now, as the store counts them; null when it could not"},
                    "quarantinedNow": {"type": ["integer", "null"],
                                       "description": "quarantined now, likewise; quarantined counts those since the start"},
                    "paused": {"type": "boolean"},
                    "health": {
                      "type": "object",
                      "description": "as in GET /api/v1/interfaces, without oldestSeconds and etaSeconds (they grow by themselves; an event means a change); absent before the engine judges"
                    }
                  }
                }
              },
              "health": {
                "type": "object",
                "description": "as in GET /api/v1/interfaces; absent before the engine judges"
              }
            }
          }
        }
      }
    }
  }
})";

uint64_t nowMs(uv_loop_t* loop) { return uv_now(loop); }

}  // namespace

std::string snapshotJson(const EngineInfo& engine, const std::vector<InterfaceInfo>& interfaces) {
  // No time in it, nor anything that moves by itself (uptime, calls in
  // flight): an event means something changed.
  json workers = json::array();
  for (auto& w : engine.workers)
    workers.push_back({{"group", w.group},
                       {"slot", w.slot},
                       {"pid", w.pid > 0 ? json(w.pid) : json(nullptr)},
                       {"state", w.state},
                       {"restarts", w.restarts}});
  json list = json::array();
  for (auto& f : interfaces) {
    json dests = json::array();
    for (auto& d : f.destinations) {
      dests.push_back({{"name", d.name},
                       {"sent", d.sent},
                       {"filtered", d.filtered},
                       {"quarantined", d.quarantined},
                       {"routed", d.routed},
                       {"retries", d.retries},
                       {"pending", d.pending ? json(*d.pending) : json(nullptr)},
                       {"quarantinedNow",
                        d.quarantinedNow ? json(*d.quarantinedNow) : json(nullptr)},
                       {"paused", d.paused.has_value()}});
      if (d.health) dests.back()["health"] = destinationHealthJson(*d.health, false);
    }
    json i = {{"name", f.name},
              {"state", f.state},
              {"gate", f.gateOpen ? json(*f.gateOpen ? "open" : "closed") : json(nullptr)},
              {"intakeStopped", f.intakeStopped.has_value()},
              {"received", f.received},
              {"duplicates", f.duplicates},
              {"destinations", std::move(dests)}};
    if (f.health) i["health"] = interfaceHealthJson(*f.health);
    list.push_back(std::move(i));
  }
  json snapshot = {{"state", engineStateName(engine.state)},
                   {"workers", std::move(workers)},
                   {"interfaces", std::move(list)}};
  // One line: an SSE data line ends at a newline, and dump() escapes them.
  return snapshot.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::shared_ptr<EventHub> EventHub::make(EngineView* engine, EventsOptions options) {
  return std::shared_ptr<EventHub>(new EventHub(engine, options));
}

EventHub::EventHub(EngineView* engine, EventsOptions options)
    : engine_(engine), options_(options) {}

// The streams end on their own (the server closes them, or its
// destruction); their onEnded find the hub gone.
EventHub::~EventHub() = default;

bool EventHub::counting() const {
  return timer_ && uv_is_active(reinterpret_cast<const uv_handle_t*>(timer_.get()));
}

void EventHub::join(ApiRespond respond) {
  if (!engine_) return respond(jsonError(503, "unavailable", "no engine is running"));
  if (listeners_.size() >= options_.maxStreams) {
    auto r = jsonError(503, "unavailable",
                       std::to_string(listeners_.size()) +
                           " event streams are open, the most this engine serves; close one "
                           "or poll GET /api/v1/interfaces");
    r.headers.emplace_back("Retry-After", "5");
    return respond(std::move(r));
  }
  uint64_t id = ++nextId_;
  net::HttpStreamOptions o;
  o.maxUnread = options_.maxUnread;
  o.onEnded = [weak = weak_from_this(), id] {
    if (auto self = weak.lock()) self->leave(id);
  };
  // X-Accel-Buffering: nginx in front would otherwise hold events back.
  auto stream = respond.stream(net::HttpResponse{200,
                                                 {{"Content-Type", "text/event-stream"},
                                                  {"Cache-Control", "no-store"},
                                                  {"X-Accel-Buffering", "no"}},
                                                 {}},
                               std::move(o));
  if (!stream.open()) return;  // a HEAD, a closing server, a client gone
  if (!loop_) {
    loop_ = stream.loop();
    timer_ = makeTimer(loop_, this);
  }
  listeners_.push_back(Listener{id, std::move(stream), 0, nowMs(loop_)});
  if (!counting()) {
    auto every = static_cast<uint64_t>(std::max<int64_t>(1, options_.interval.count()));
    uv_timer_start(
        timer_.get(),
        [](uv_timer_t* t) {
          if (auto* self = static_cast<EventHub*>(t->data)) self->tick();
        },
        every, every);
    build();
  } else if (!current_.empty()) {
    send(listeners_.back());
  }
  // Otherwise the first snapshot is on its way: it goes to everyone.
}

void EventHub::tick() {
  if (listeners_.empty()) return stop();
  uint64_t now = nowMs(loop_);
  auto quiet = static_cast<uint64_t>(options_.heartbeat.count());
  for (size_t i = 0; i < listeners_.size(); ++i)
    if (now - listeners_[i].lastWriteMs >= quiet) write(listeners_[i], ": keep-alive\n\n");
  build();
}

void EventHub::build() {
  // A store slower than the interval: one query at a time, not a pile.
  if (building_) return;
  building_ = true;
  engine_->interfacesWithPending(
      [weak = weak_from_this()](Result<std::vector<InterfaceInfo>> list) {
        if (auto self = weak.lock()) self->built(std::move(list));
      });
}

void EventHub::built(Result<std::vector<InterfaceInfo>> list) {
  building_ = false;
  if (listeners_.empty()) return;
  if (!list) {
    // The counts in memory still say something while the store can't
    // answer: those, with pending unknown.
    spdlog::debug("api: events: pending counts not read: {}", list.error().message);
    building_ = true;
    return engine_->interfaces([weak = weak_from_this()](Result<std::vector<InterfaceInfo>> r) {
      auto self = weak.lock();
      if (!self) return;
      self->building_ = false;
      if (r) self->built(std::move(r));
    });
  }
  ++built_;
  std::string snapshot = snapshotJson(engine_->engine(), *list);
  if (snapshot != current_) {
    current_ = std::move(snapshot);
    ++version_;
  }
  // A failed write does not remove its listener here (onEnded runs later,
  // never inside write()): the list holds still.
  for (size_t i = 0; i < listeners_.size(); ++i)
    if (listeners_[i].sentVersion != version_) send(listeners_[i]);
}

void EventHub::send(Listener& l) {
  l.sentVersion = version_;
  write(l, "event: snapshot\ndata: " + current_ + "\n\n");
}

// A stream that can't take it has ended or is ending; its onEnded removes
// it.
void EventHub::write(Listener& l, std::string bytes) {
  l.lastWriteMs = nowMs(loop_);
  l.stream.write(std::move(bytes));
}

void EventHub::leave(uint64_t id) {
  std::erase_if(listeners_, [id](const Listener& l) { return l.id == id; });
  if (listeners_.empty()) stop();
}

// Nobody listens: no timer, no queries, and the next listener gets a
// snapshot made for it, not one from before.
void EventHub::stop() {
  if (timer_) uv_timer_stop(timer_.get());
  current_.clear();
}

Route eventsRoute(std::shared_ptr<EventHub> hub) {
  Route r;
  r.method = "GET";
  r.path = "/api/v1/events";
  r.operationId = "streamEvents";
  r.summary = "The engine's counts and states as Server-Sent Events, sent when they change";
  r.tag = "engine";
  // A browser's EventSource sends no headers of its own: the session
  // cookie does, and a GET needs no X-Ductus.
  r.requirement = Requirement::toRead(Role::Viewer);
  r.responseContentType = "text/event-stream";
  r.responseSchema = kEventsSchema;
  r.handler = [hub](const ApiRequest&, ApiRespond respond) { hub->join(std::move(respond)); };
  return r;
}

std::vector<Route> eventsRoutes(EngineView* engine, EventsOptions options) {
  return {eventsRoute(EventHub::make(engine, options))};
}

}  // namespace ductus::api
