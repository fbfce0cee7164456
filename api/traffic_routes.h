// Traffic over time through the API:
// - GET /api/v1/interfaces/{name}/stats?from=&to=&step=1m|1h (viewer): what
//   the interface received and each destination sent, filtered and
//   quarantined, summed per minute or per hour from the minutes the engine
//   keeps (schema/traffic_store.h, 30 days). Steps with nothing in them are
//   left out; `to` defaults to now, `from` to an hour (1m) or a day (1h)
//   before it; at most 1,440 steps a call.
#pragma once

#include <vector>

#include "api/auth/auth_routes.h"
#include "api/engine_view.h"
#include "api/route.h"

namespace ductus::api {

inline constexpr int64_t kTrafficMaxSteps = 1440;

// deps (its pool) must outlive the routes; null: the route for the OpenAPI
// document only, whose handler answers 503.
// `engine` adds what it counted and has not written yet; null: none.
std::vector<Route> trafficRoutes(AuthDeps* deps, EngineView* engine);

}  // namespace ductus::api
