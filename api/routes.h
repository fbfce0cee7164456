// Every route the API serves, from one function: the server and
// `ductus api-spec` both take this list, so the document and the server
// can't disagree. Each module gives its routes as a function (engine
// routes here; authRoutes() and auditRoutes() from api/auth/ and
// api/audit/ join them here, messageRoutes() from api/message_routes.h).
#pragma once

#include <vector>

#include "api/auth/auth_routes.h"
#include "api/engine_view.h"
#include "api/route.h"
#include "common/histogram.h"

namespace ductus::api {

// What the routes' handlers work on. All null: the routes for the document
// only (`ductus api-spec`); their handlers are never called.
struct RouteDeps {
  EngineView* engine = nullptr;
  // Sign-in, /me, users, tokens, the audit log; the quarantine and message
  // actions (api/message_routes.h) use its pool and audit log, and
  // `engine` to wake the delivery loops after a resend.
  AuthDeps* auth = nullptr;
  // The API server's answer times, for GET /metrics; null: not shown.
  const Histogram* requestTimes = nullptr;
};

// Every route, GET /api/v1/openapi.json last, serving the document of
// exactly this list.
std::vector<Route> allRoutes(const RouteDeps& deps);

}  // namespace ductus::api
