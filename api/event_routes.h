// The engine's events through the API:
// - GET /api/v1/event-log?kind=&interface=&since=&before=&limit= (viewer):
//   the rows of the bounded events table (schema/event_store.h: AR
//   refusals, deliveries given up after their retries, worker restarts,
//   runaways, interfaces the runaway guard stopped, intake stops and
//   starts, alerts fired and resolved), newest first, paged by id: `next`
//   is the `before` of the next (older) page. Each parameter is checked
//   and a bad one is a 400 naming it. (GET /api/v1/events is the live
//   stream of counts, api/events.h.)
#pragma once

#include <vector>

#include "api/auth/auth_routes.h"
#include "api/route.h"

namespace ductus::api {

inline constexpr int64_t kEventPageDefault = 100;
inline constexpr int64_t kEventPageMax = 500;

// deps (its pool) must outlive the routes; null: the route for the OpenAPI
// document only, whose handler answers 503.
std::vector<Route> eventRoutes(AuthDeps* deps);

}  // namespace ductus::api
