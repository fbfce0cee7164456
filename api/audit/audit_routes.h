// GET /api/v1/audit (the audit permission): the audit log newest first,
// paged by id, filtered by actor, action and time; `format=ndjson` exports
// oldest first, one JSON object a line, and is itself audited (its row is
// written before anything is read, and the export is refused with 503 if it
// can't be). GET /api/v1/me/activity: the caller's own rows.
#pragma once

#include <vector>

#include "api/audit/audit_log.h"
#include "api/auth/auth_routes.h"
#include "api/route.h"
#include "schema/pg_pool.h"

namespace ductus::api {

// deps (its pool and audit log) must outlive the routes; null: the routes
// for the OpenAPI document only.
std::vector<Route> auditRoutes(AuthDeps* deps);

}  // namespace ductus::api
