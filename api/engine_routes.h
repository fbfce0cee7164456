// The engine's own operations: GET /api/v1/health (no credentials: 200
// while the engine serves, 503 while it drains or stops, for load
// balancers and systemd), GET /api/v1/engine (version, start, workers) and
// GET /api/v1/interfaces (state, gate, counts since the start).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "api/engine_view.h"
#include "api/route.h"

namespace ductus::api {

// `engine` null: the routes for the document only (`ductus api-spec`);
// their handlers answer 503.
std::vector<Route> engineRoutes(EngineView* engine);

// The monitor's judgement as GET /interfaces and the events' snapshots
// show it. `moving`: with the ages that grow by themselves (oldestSeconds,
// etaSeconds); a snapshot leaves them out, since an event means a change.
nlohmann::ordered_json destinationHealthJson(const DestinationHealthInfo& h, bool moving);
nlohmann::ordered_json interfaceHealthJson(const InterfaceHealthInfo& h);

}  // namespace ductus::api
