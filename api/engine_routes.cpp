#include "api/engine_routes.h"

#include "api/metrics.h"

#include <time.h>

#include <nlohmann/json.hpp>

#include "common/time_text.h"
#include "common/version.h"

namespace ductus::api {
namespace {

using nlohmann::json;

net::HttpResponse notRunning() {
  return jsonError(503, "unavailable", "no engine is running");
}

constexpr const char* kHealthSchema = R"({
  "type": "object",
  "required": ["status"],
  "properties": {
    "status": {"type": "string", "enum": ["serving", "draining", "stopping"]}
  }
})";

constexpr const char* kEngineSchema = R"({
  "type": "object",
  "required": ["version", "commit", "startedAt", "uptimeSeconds", "state", "workers",
               "engineId", "ownership", "otherEngines"],
  "properties": {
    "version": {"type": "string"},
    "commit": {"type": "string"},
    "startedAt": {"type": "string", "format": "date-time"},
    "uptimeSeconds": {"type": "integer"},
    "state": {"type": "string", "enum": ["serving", "draining", "stopping"]},
    "workers": {
      "type": "array",
      "items": {
        "type": "object",
        "required": ["group", "slot", "pid", "state", "restarts", "callsInFlight"],
        "properties": {
          "group": {"type": "string"},
          "slot": {"type": "integer"},
          "pid": {"type": ["integer", "null"], "description": "null while not running"},
          "state": {"type": "string", "enum": ["starting", "running", "down"]},
          "restarts": {"type": "integer"},
          "callsInFlight": {"type": "integer"}
        }
      }
    },
    "engineId": {"type": "string",
                 "description": "this engine's row in the database's engines table"},
    "ownership": {"type": "string", "enum": ["starting", "standby", "held", "lost", "taken", "released"],
                  "description": "standby: started with --standby, waiting for the engine that owns the interfaces to go (it owns nothing and listens on no source meanwhile); lost: the ownership lock's connection failed; delivery, files and schedules pause until it is taken again"},
    "otherEngines": {
      "type": "array",
      "description": "the other live engines on the same database as of the last check, made every 2 s",
      "items": {
        "type": "object",
        "required": ["id", "host", "pid", "version", "startedAt", "interfaces"],
        "properties": {
          "id": {"type": "string"},
          "host": {"type": "string"},
          "pid": {"type": "integer"},
          "version": {"type": "string"},
          "startedAt": {"type": "string", "format": "date-time"},
          "interfaces": {"type": "array", "items": {"type": "string"},
                         "description": "the interfaces it owns"}
        }
      }
    }
  }
})";

constexpr const char* kInterfacesSchema = R"({
  "type": "object",
  "required": ["interfaces"],
  "properties": {
    "interfaces": {
      "type": "array",
      "items": {
        "type": "object",
        "required": ["name", "source", "state", "gate", "intakeStopped", "sinceStart",
                     "destinations"],
        "properties": {
          "name": {"type": "string"},
          "source": {"type": "string"},
          "state": {"type": "string", "enum": ["running", "stopped"],
                    "description": "stopped: runaways stopped its code; POST .../restart runs it again"},
          "gate": {"type": ["string", "null"], "enum": ["open", "closed", null],
                   "description": "null for a respond-mode HTTP interface, which has no queue"},
          "intakeStopped": {
            "type": ["object", "null"],
            "description": "null while its intake takes messages; set while an operator's stop (POST .../stop) keeps its listener closed, its HTTP path answering 503, its files or schedule unpolled; what it stored is still delivered",
            "required": ["since", "by", "reason"],
            "properties": {
              "since": {"type": "string", "format": "date-time"},
              "by": {"type": "string"},
              "reason": {"type": ["string", "null"]}
            }
          },
          "sinceStart": {
            "type": "object",
            "required": ["received", "duplicates"],
            "properties": {
              "received": {"type": "integer"},
              "duplicates": {"type": "integer"}
            }
          },
          "health": {
            "type": "object",
            "description": "the worst of its destinations', or stopped, intake_stopped (an operator stopped its intake: not late nor quiet), late, quiet; absent before the engine runs",
            "required": ["state", "reason", "lastReceived", "watchedSince"],
            "properties": {
              "state": {"type": "string", "enum": ["stopped", "paused", "stalled", "error", "behind", "intake_stopped", "late", "quiet", "ok"]},
              "reason": {"type": "string"},
              "lastReceived": {"type": "string", "description": "RFC 3339; empty when never"},
              "watchedSince": {"type": "string", "description": "RFC 3339: deadlines before it don't count"}
            }
          },
          "destinations": {
            "type": "array",
            "items": {
              "type": "object",
              "required": ["name", "route", "pending", "quarantined", "sinceStart", "timings",
                           "paused"],
              "properties": {
                "name": {"type": "string"},
                "route": {"type": "boolean"},
                "pending": {"type": ["integer", "null"],
                            "description": "deliveries waiting now, from the database; null when it could not be asked"},
                "quarantined": {"type": ["integer", "null"],
                                "description": "deliveries quarantined now, from the database"},
                "timings": {
                  "type": "object",
                  "description": "since the engine started, in milliseconds, estimated from the histograms GET /metrics shows; null before the first",
                  "properties": {
                    "latency": {"type": "object", "required": ["count", "meanMs", "p50Ms", "p95Ms"], "properties": {"count": {"type": "integer"}, "meanMs": {"type": ["number", "null"]}, "p50Ms": {"type": ["number", "null"]}, "p95Ms": {"type": ["number", "null"]}}},
                    "send": {"type": "object", "required": ["count", "meanMs", "p50Ms", "p95Ms"], "properties": {"count": {"type": "integer"}, "meanMs": {"type": ["number", "null"]}, "p50Ms": {"type": ["number", "null"]}, "p95Ms": {"type": ["number", "null"]}}},
                    "transform": {"type": "object", "required": ["count", "meanMs", "p50Ms", "p95Ms"], "properties": {"count": {"type": "integer"}, "meanMs": {"type": ["number", "null"]}, "p50Ms": {"type": ["number", "null"]}, "p95Ms": {"type": ["number", "null"]}}}
                  }
                },
                "sinceStart": {
                  "type": "object",
                  "required": ["sent", "filtered", "quarantined", "routed", "retries"],
                  "properties": {
                    "sent": {"type": "integer"},
                    "filtered": {"type": "integer"},
                    "quarantined": {"type": "integer"},
                    "routed": {"type": "integer"},
                    "retries": {"type": "integer"}
                  }
                },
                "health": {
                  "type": "object",
                  "description": "the monitor's judgement; absent before the engine runs",
                  "required": ["state", "reason", "waiting", "quarantined"],
                  "properties": {
                    "state": {"type": "string", "enum": ["paused", "stalled", "error", "behind", "ok"]},
                    "reason": {"type": "string", "description": "one line an operator can act on; empty when ok"},
                    "waiting": {"type": "integer"},
                    "oldestSeconds": {"type": "number", "description": "the oldest waiting message's age"},
                    "quarantined": {"type": "integer"},
                    "lastSent": {"type": "string", "description": "RFC 3339; empty when never"},
                    "lastError": {"type": "string", "description": "RFC 3339; empty when never"},
                    "lastErrorText": {"type": "string"},
                    "catchingUp": {"type": "boolean", "description": "for a backlog over a minute old"},
                    "etaSeconds": {"type": "number"},
                    "causes": {"type": "array", "items": {"type": "string", "enum": ["burst", "slow receiver"]}}
                  }
                },
                "paused": {
                  "type": ["object", "null"],
                  "description": "null while it delivers; set while an operator's pause holds it",
                  "required": ["since", "by", "reasons"],
                  "properties": {
                    "since": {"type": "string", "format": "date-time"},
                    "by": {"type": "string", "description": "who paused it first"},
                    "reasons": {
                      "type": "array",
                      "items": {
                        "type": "object",
                        "properties": {
                          "at": {"type": "string", "format": "date-time"},
                          "by": {"type": "string"},
                          "reason": {"type": "string"}
                        }
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
})";

json otherEnginesJson(const std::vector<PeerEngineInfo>& list) {
  json out = json::array();
  for (auto& o : list)
    out.push_back({{"id", o.id},
                   {"host", o.host},
                   {"pid", o.pid},
                   {"version", o.version},
                   {"startedAt", o.startedAt},
                   {"interfaces", o.interfaces}});
  return out;
}

json engineJson(const EngineInfo& e) {
  json workers = json::array();
  for (auto& w : e.workers)
    workers.push_back({{"group", w.group},
                       {"slot", w.slot},
                       {"pid", w.pid > 0 ? json(w.pid) : json(nullptr)},
                       {"state", w.state},
                       {"restarts", w.restarts},
                       {"callsInFlight", w.callsInFlight}});
  auto up = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now() -
                                                             e.startedAt);
  return {{"version", kVersion},
          {"commit", kGitCommit},
          {"startedAt", rfc3339(e.startedAt)},
          {"uptimeSeconds", std::max<int64_t>(0, up.count())},
          {"state", engineStateName(e.state)},
          {"workers", std::move(workers)},
          {"engineId", e.engineId},
          {"ownership", e.ownership.empty() ? "starting" : e.ownership},
          {"otherEngines", otherEnginesJson(e.otherEngines)}};
}

json pausedJson(const std::optional<PauseInfo>& p) {
  if (!p) return nullptr;
  json reasons = json::array();
  for (auto& r : p->reasons) reasons.push_back({{"at", r.at}, {"by", r.by}, {"reason", r.reason}});
  return {{"since", p->since}, {"by", p->by}, {"reasons", std::move(reasons)}};
}

json intakeStoppedJson(const std::optional<IntakeStopInfo>& s) {
  if (!s) return nullptr;
  return {
      {"since", s->since}, {"by", s->by}, {"reason", s->reason ? json(*s->reason) : json(nullptr)}};
}

json timingJson(const HistogramInfo& h) {
  auto ms = [](std::optional<double> s) { return s ? json(*s * 1000) : json(nullptr); };
  return {{"count", h.count},
          {"meanMs", h.count ? json(h.sumSeconds * 1000 / static_cast<double>(h.count)) : json(nullptr)},
          {"p50Ms", ms(histogramQuantile(h, 0.5))},
          {"p95Ms", ms(histogramQuantile(h, 0.95))}};
}

json interfacesJson(const std::vector<InterfaceInfo>& list) {
  json out = json::array();
  for (auto& f : list) {
    json dests = json::array();
    for (auto& d : f.destinations)
      dests.push_back({{"name", d.name},
                       {"route", d.route},
                       {"pending", d.pending ? json(*d.pending) : json(nullptr)},
                       {"quarantined", d.quarantinedNow ? json(*d.quarantinedNow) : json(nullptr)},
                       {"timings",
                        {{"latency", timingJson(d.latency)},
                         {"send", timingJson(d.send)},
                         {"transform", timingJson(d.transform)}}},
                       {"sinceStart",
                        {{"sent", d.sent},
                         {"filtered", d.filtered},
                         {"quarantined", d.quarantined},
                         {"routed", d.routed},
                         {"retries", d.retries}}},
                       {"paused", pausedJson(d.paused)}});
    for (size_t j = 0; j < f.destinations.size(); ++j)
      if (f.destinations[j].health)
        dests[j]["health"] = destinationHealthJson(*f.destinations[j].health, true);
    json i = {{"name", f.name},
              {"source", f.source},
              {"state", f.state},
              {"gate", f.gateOpen ? json(*f.gateOpen ? "open" : "closed") : json(nullptr)},
              {"intakeStopped", intakeStoppedJson(f.intakeStopped)},
              {"sinceStart", {{"received", f.received}, {"duplicates", f.duplicates}}},
              {"destinations", std::move(dests)}};
    if (f.health) i["health"] = interfaceHealthJson(*f.health);
    out.push_back(std::move(i));
  }
  return {{"interfaces", std::move(out)}};
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

nlohmann::ordered_json destinationHealthJson(const DestinationHealthInfo& h, bool moving) {
  nlohmann::ordered_json j = {{"state", h.state},
                              {"reason", h.reason},
                              {"waiting", h.waiting}};
  if (moving && h.oldestSeconds) j["oldestSeconds"] = *h.oldestSeconds;
  j["quarantined"] = h.quarantined;
  j["lastSent"] = h.lastSent;
  j["lastError"] = h.lastError;
  j["lastErrorText"] = h.lastErrorText;
  if (h.catchingUp) j["catchingUp"] = *h.catchingUp;
  if (moving && h.etaSeconds) j["etaSeconds"] = *h.etaSeconds;
  j["causes"] = h.causes;
  return j;
}

nlohmann::ordered_json interfaceHealthJson(const InterfaceHealthInfo& h) {
  return {{"state", h.state},
          {"reason", h.reason},
          {"lastReceived", h.lastReceived},
          {"watchedSince", h.watchedSince}};
}

std::vector<Route> engineRoutes(EngineView* engine) {
  std::vector<Route> routes;

  Route health;
  health.method = "GET";
  health.path = "/api/v1/health";
  health.operationId = "getHealth";
  health.summary = "Whether the engine serves: 200 while it does, 503 while it drains or stops";
  health.tag = "engine";
  health.requirement = Requirement::anyone();
  health.responseSchema = kHealthSchema;
  health.handler = [engine](const ApiRequest&, ApiRespond respond) {
    if (!engine) return respond(notRunning());
    EngineState s = engine->state();
    if (s == EngineState::Serving)
      return respond(jsonResponse(200, dump(json{{"status", engineStateName(s)}})));
    // An error as every other, with the status beside it.
    std::string_view name = engineStateName(s);
    json body = {{"status", name},
                 {"error", name},
                 {"message", "the engine is " + std::string(name) + "; it takes no new work"}};
    auto r = jsonResponse(503, dump(body));
    r.headers.emplace_back("Retry-After", "5");
    respond(std::move(r));
  };
  routes.push_back(std::move(health));

  Route info;
  info.method = "GET";
  info.path = "/api/v1/engine";
  info.operationId = "getEngine";
  info.summary =
      "The engine's version, start time, state and workers, and the other engines on its database";
  info.tag = "engine";
  info.requirement = Requirement::toRead(Role::Viewer);
  info.responseSchema = kEngineSchema;
  info.handler = [engine](const ApiRequest&, ApiRespond respond) {
    if (!engine) return respond(notRunning());
    respond(jsonResponse(200, dump(engineJson(engine->engine()))));
  };
  routes.push_back(std::move(info));

  Route list;
  list.method = "GET";
  list.path = "/api/v1/interfaces";
  list.operationId = "listInterfaces";
  list.summary = "Every interface: its state, its gate and what it did since the engine started";
  list.tag = "engine";
  list.requirement = Requirement::toRead(Role::Viewer);
  list.responseSchema = kInterfacesSchema;
  list.handler = [engine](const ApiRequest&, ApiRespond respond) {
    if (!engine) return respond(notRunning());
    engine->interfacesWithPending([respond](Result<std::vector<InterfaceInfo>> r) {
      if (!r) return respond(jsonError(503, "unavailable", r.error().message));
      respond(jsonResponse(200, dump(interfacesJson(*r))));
    });
  };
  routes.push_back(std::move(list));

  return routes;
}

}  // namespace ductus::api
