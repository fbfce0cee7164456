// Retention through the API:
// - GET /api/v1/retention (viewer): each queued interface's tiers (what the
//   project asks for, what applies, a shorter one waiting for a
//   confirmation), every partition with its size and drop date, the held
//   area (unfinished messages of expired periods) and the job's last run.
// - POST /api/v1/retention/confirm {"interface", "tier"} (operator): applies
//   a shorter tier the project asks for, as `ductus retention confirm` does.
//   The tier must be the one the project asks for (409: the caller saw an
//   older state) and shorter than the applied one (409: nothing to
//   confirm). Its row and its audit row (`retention.confirm`) are written
//   in one transaction; then the interface's new messages go to the new
//   tier at once.
#pragma once

#include <vector>

#include "api/auth/auth_routes.h"
#include "api/engine_view.h"
#include "api/route.h"

namespace ductus::api {

// deps (its pool and audit log) and engine must outlive the routes; null:
// the routes for the OpenAPI document only, whose handlers answer 503.
std::vector<Route> retentionRoutes(AuthDeps* deps, EngineView* engine);

}  // namespace ductus::api
