#include "api/hotspot_routes.h"

#include <nlohmann/json.hpp>

namespace ductus::api {
namespace {

// In the order written: a person reads the destination before its lanes.
using json = nlohmann::ordered_json;

constexpr const char* kHotspotsSchema = R"({
  "type": "object",
  "required": ["destinations"],
  "properties": {
    "destinations": {
      "type": "array",
      "description": "every destination with a backlog, as the engine found it now",
      "items": {
        "type": "object",
        "required": ["interface", "destination", "waiting", "lanes", "findings"],
        "properties": {
          "interface": {"type": "string"},
          "destination": {"type": "string"},
          "waiting": {"type": "integer"},
          "lanes": {
            "type": "array",
            "description": "most waiting first, at most 10",
            "items": {
              "type": "object",
              "required": ["lane", "waiting", "firstMessageId", "firstKey", "firstAttempts",
                           "firstLastError", "firstReceivedAt", "nextRetryAt"],
              "properties": {
                "lane": {"type": "integer"},
                "waiting": {"type": "integer"},
                "firstMessageId": {"type": "integer", "description": "the lane's first waiting message: the one its worker is on"},
                "firstKey": {"type": "string", "description": "its ordering key; empty when none"},
                "firstAttempts": {"type": "integer", "description": "its failed attempts so far"},
                "firstLastError": {"type": "string"},
                "firstReceivedAt": {"type": "string", "description": "RFC 3339, UTC"},
                "nextRetryAt": {"type": ["string", "null"], "description": "RFC 3339, UTC: when the delivery loop holding this lane tries again after a failure (it waits as a whole, for each of its lanes); null while it is not waiting to retry"}
              }
            }
          },
          "findings": {
            "type": "array",
            "items": {
              "type": "object",
              "required": ["kind", "text"],
              "properties": {
                "kind": {"type": "string", "enum": ["blocked-lane", "receiver-down", "hot-key", "unowned-lanes"]},
                "text": {"type": "string"}
              }
            }
          }
        }
      }
    }
  }
})";

json hotspotsJson(const std::vector<HotspotInfo>& list) {
  json out = json::array();
  for (auto& h : list) {
    json lanes = json::array();
    for (auto& l : h.lanes)
      lanes.push_back({{"lane", l.lane},
                       {"waiting", l.waiting},
                       {"firstMessageId", l.firstMessageId},
                       {"firstKey", l.firstKey},
                       {"firstAttempts", l.firstAttempts},
                       {"firstLastError", l.firstLastError},
                       {"firstReceivedAt", l.firstReceivedAt},
                       {"nextRetryAt", l.nextRetryAt ? json(*l.nextRetryAt) : json()}});
    json findings = json::array();
    for (auto& f : h.findings) findings.push_back({{"kind", f.kind}, {"text", f.text}});
    out.push_back({{"interface", h.interface},
                   {"destination", h.destination},
                   {"waiting", h.waiting},
                   {"lanes", std::move(lanes)},
                   {"findings", std::move(findings)}});
  }
  return {{"destinations", std::move(out)}};
}

}  // namespace

std::vector<Route> hotspotRoutes(EngineView* engine) {
  Route r;
  r.method = "GET";
  r.path = "/api/v1/hotspots";
  r.operationId = "listHotspots";
  r.summary = "Where each destination's backlog waits: its busiest lanes and what they show";
  r.tag = "engine";
  r.requirement = Requirement::toRead(Role::Viewer);
  r.responseSchema = kHotspotsSchema;
  r.handler = [engine](const ApiRequest&, ApiRespond respond) {
    if (!engine) return respond(jsonError(503, "unavailable", "no engine is running"));
    engine->hotspots([respond](Result<std::vector<HotspotInfo>> r) {
      if (!r) return respond(jsonError(503, "unavailable", r.error().message));
      // A last error's text is the receiver's: replace what isn't UTF-8.
      respond(jsonResponse(200, hotspotsJson(*r).dump(-1, ' ', false,
                                                      json::error_handler_t::replace)));
    });
  };
  return {std::move(r)};
}

}  // namespace ductus::api
