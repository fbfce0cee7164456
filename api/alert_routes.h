// The alerts as an operator sees and answers them (schema/alert_store.h):
// - GET /api/v1/alerts (viewer): every alert, firing and recovering first,
//   each with its last events (bounded: kMaxAlertsListed, kEventsPerAlert).
// - POST /api/v1/alerts/{id}/acknowledge (operator): no more reminders for
//   this firing.
// - POST /api/v1/alerts/{id}/silence {"for": "2h"} (operator; 1m to 30d):
//   no notifications until then, and those not yet sent are given up.
// Each POST is audited in the transaction of its change: 404 for no such
// alert, 409 when it is not firing.
#pragma once

#include <vector>

#include "api/auth/auth_routes.h"
#include "api/route.h"

namespace ductus::api {

// deps (its pool and audit log) must outlive the routes; null: the routes
// for the OpenAPI document only, whose handlers answer 503.
std::vector<Route> alertRoutes(AuthDeps* deps);

}  // namespace ductus::api
