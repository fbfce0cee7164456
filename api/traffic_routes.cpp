#include "api/traffic_routes.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

#include "api/auth/handler_support.h"
#include "common/time_text.h"
#include "schema/traffic_store.h"

namespace ductus::api {
namespace {

using json = nlohmann::ordered_json;

struct Deps {
  store::PgPool& pool;
  EngineView* engine;  // null: no engine, only what is written
};

constexpr const char* kStatsSchema = R"({
  "type": "object",
  "required": ["interface", "step", "from", "to", "intake", "destinations"],
  "properties": {
    "interface": {"type": "string"},
    "step": {"enum": ["1m", "1h"]},
    "from": {"type": "string", "format": "date-time", "description": "the first step's start"},
    "to": {"type": "string", "format": "date-time", "description": "the end, not included"},
    "intake": {
      "type": "array",
      "description": "steps in which the interface received something, by time",
      "items": {"type": "object", "required": ["at", "received"],
                "properties": {"at": {"type": "string", "format": "date-time"},
                               "received": {"type": "integer"}}}
    },
    "destinations": {
      "type": "array",
      "description": "every destination of the interface, with the steps in which it finished something",
      "items": {
        "type": "object",
        "required": ["name", "points"],
        "properties": {
          "name": {"type": "string"},
          "points": {"type": "array", "items": {
            "type": "object", "required": ["at", "sent", "filtered", "quarantined"],
            "properties": {"at": {"type": "string", "format": "date-time"},
                           "sent": {"type": "integer"}, "filtered": {"type": "integer"},
                           "quarantined": {"type": "integer"}}}}
        }
      }
    }
  }
})";

std::string at(int64_t seconds) {
  return rfc3339(std::chrono::system_clock::time_point(std::chrono::seconds(seconds)));
}

// Adds unwritten rows into their steps; a step not in the answer yet is
// inserted in time order.
void mergeUnsaved(store::TrafficSeries& s, const std::vector<store::TrafficRow>& rows, int64_t from,
                  int64_t to, int64_t step) {
  for (const auto& row : rows) {
    if (row.minute < from || row.minute >= to) continue;
    std::string dest;
    if (row.destinationId) {
      auto it = s.destinationNames.find(row.destinationId);
      if (it == s.destinationNames.end()) continue;
      dest = it->second;
    }
    int64_t at = row.minute / step * step;
    auto pos = std::find_if(s.points.begin(), s.points.end(), [&](const store::TrafficPoint& p) {
      return p.at > at || (p.at == at && p.destination >= dest);
    });
    if (pos == s.points.end() || pos->at != at || pos->destination != dest)
      pos = s.points.insert(pos, store::TrafficPoint{at, dest, 0, 0, 0, 0});
    pos->received += row.received;
    pos->sent += row.sent;
    pos->filtered += row.filtered;
    pos->quarantined += row.quarantined;
  }
}

void stats(Deps& d, const ApiRequest& req, ApiRespond respond) {
  std::string name = req.params.at("name");
  auto stepIt = req.query.find("step");
  std::string stepText = stepIt == req.query.end() || stepIt->second.empty() ? "1m" : stepIt->second;
  if (stepText != "1m" && stepText != "1h")
    return respond(jsonError(400, "invalid", "`step` must be 1m or 1h"));
  int64_t step = stepText == "1m" ? 60 : 3600;
  auto fromText = timeQuery(req, "from");
  if (!fromText) return respond(errorResponse(fromText.error()));
  auto toText = timeQuery(req, "to");
  if (!toText) return respond(errorResponse(toText.error()));
  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  // Whole steps: `to` rounded up (the step in progress is shown), `from`
  // down.
  int64_t to = *toText ? *rfc3339Seconds(**toText) : now;
  to = (to + step - 1) / step * step;
  int64_t from = *fromText ? *rfc3339Seconds(**fromText) : to - (step == 60 ? 3600 : 86400);
  from = from / step * step;
  if (from >= to) return respond(jsonError(400, "invalid", "`from` must be before `to`"));
  if ((to - from) / step > kTrafficMaxSteps)
    return respond(jsonError(400, "invalid",
                             "at most " + std::to_string(kTrafficMaxSteps) + " steps a call: " +
                                 "with step " + stepText + ", `from` to `to` spans at most " +
                                 (step == 60 ? "a day" : "60 days")));
  store::readTraffic(
      d.pool, name, from, to, step,
      [&d, name, stepText, from, to, step, respond](Result<store::TrafficSeries> r) {
        if (!r) return respond(errorResponse(r.error()));
        if (!r->interfaceFound)
          return respond(jsonError(404, "not_found", "no interface " + name + " has traffic kept"));
        // What the engine counted and has not written yet (the minute in
        // progress): the last point is live, not a minute behind.
        if (d.engine) mergeUnsaved(*r, d.engine->unsavedTraffic(r->interfaceId), from, to, step);
        json intake = json::array();
        std::map<std::string, json> byDestination;
        for (auto& dest : r->destinations) byDestination[dest] = json::array();
        for (auto& p : r->points) {
          if (p.destination.empty()) {
            if (p.received) intake.push_back({{"at", at(p.at)}, {"received", p.received}});
            continue;
          }
          byDestination[p.destination].push_back({{"at", at(p.at)},
                                                  {"sent", p.sent},
                                                  {"filtered", p.filtered},
                                                  {"quarantined", p.quarantined}});
        }
        json destinations = json::array();
        for (auto& [dest, points] : byDestination)
          destinations.push_back({{"name", dest}, {"points", std::move(points)}});
        respond(jsonOk(200, json{{"interface", name},
                                 {"step", stepText},
                                 {"from", at(from)},
                                 {"to", at(to)},
                                 {"intake", std::move(intake)},
                                 {"destinations", std::move(destinations)}}));
      });
}

}  // namespace

std::vector<Route> trafficRoutes(AuthDeps* auth, EngineView* engine) {
  std::shared_ptr<Deps> d;
  if (auth) d = std::make_shared<Deps>(Deps{auth->pool, engine});
  auto bind = [d](void (*fn)(Deps&, const ApiRequest&, ApiRespond)) {
    return bindHandler(d, fn, "no database behind this API");
  };
  std::vector<Route> routes;
  routes.push_back(Route{
      "GET",
      "/api/v1/interfaces/{name}/stats",
      "interfaceStats",
      "What an interface received and its destinations sent, filtered and quarantined, per "
      "minute or hour (kept 30 days)",
      "engine",
      Requirement::toRead(Role::Viewer),
      bind(stats),
      "",
      kStatsSchema,
      {{"from", "RFC 3339; default: an hour (step 1m) or a day (1h) before `to`"},
       {"to", "RFC 3339; default: now"},
       {"step", "1m (default) or 1h; at most 1,440 steps a call"}}});
  return routes;
}

}  // namespace ductus::api
