// The message browser: find a message without SQL, see what became of it,
// read it, and send a corrected copy.
// - GET /api/v1/interfaces/{name}/messages (viewer): an interface's
//   messages newest first, paged by id, filtered by status, time, message
//   type, control id and key value (the columns intake fills, migration
//   0006);
// - GET /api/v1/messages/{id} (viewer): one message and its deliveries;
// - GET /api/v1/messages/{id}/payload (viewer with `payloads`): the payload
//   and saved outputs as text, its audit row written before anything is
//   read (no row, no payload: 503);
// - POST /api/v1/messages/{id}/edit (operator): a corrected copy with its
//   keys read from the new payload by the engine (EngineView::readKeys),
//   the original's quarantined deliveries filtered as "replaced by edited
//   copy N", the audit row in the same transaction.
// The statements are the store's (schema/message_pages.h,
// schema/message_actions.h); these handlers check the input, write the
// audit detail and answer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/auth/auth_routes.h"
#include "api/engine_view.h"
#include "api/route.h"

namespace ductus::api {

inline constexpr int64_t kBrowseLimitDefault = 50;
inline constexpr int64_t kBrowseLimitMax = 500;

// deps (its pool and audit log) must outlive the routes; null: the routes
// for the OpenAPI document only, whose handlers answer 503. `engine` reads
// an edited copy's keys and wakes its interface's loops; null: an edit is
// refused (409), as for an interface this engine doesn't run.
std::vector<Route> messageBrowserRoutes(AuthDeps* deps, EngineView* engine);

}  // namespace ductus::api
