// The operator's actions on the running engine (operator role; each
// audited):
// - POST /api/v1/interfaces/{name}/destinations/{destination}/pause (a
//   reason required) and .../resume: the pause is persisted
//   (schema/destination_pauses.h) in the transaction of its audit row, then
//   the destination's delivery loops hold or read again. Pausing again adds
//   a reason and keeps the first time and author.
// - POST /api/v1/interfaces/{name}/restart: an interface runaways stopped
//   loads its code again from disk (fixed there by the operator) and
//   delivers what waited; 409 while it runs.
// - POST /api/v1/engine/drain {"stop": bool}: every gate closed, /health
//   503; with stop the engine exits once drained. DELETE: the gates open
//   again. GET (viewer): draining, stores in flight, pending, drained.
// Restart and drain change no row: their audit row is written first, and
// the action is refused (503) if it can't be.
#pragma once

#include <vector>

#include "api/auth/auth_routes.h"
#include "api/engine_view.h"
#include "api/route.h"

namespace ductus::api {

// deps (its pool and audit log) and engine must outlive the routes; null:
// the routes for the OpenAPI document only, whose handlers answer 503.
std::vector<Route> engineActionRoutes(AuthDeps* deps, EngineView* engine);

}  // namespace ductus::api
