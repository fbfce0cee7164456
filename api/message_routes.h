// The operator's tools for messages that ended badly, so a quarantine can be
// found and fixed without SQL:
// - GET /api/v1/quarantine (viewer): quarantined deliveries across
//   interfaces, newest message first, paged by message id;
// - POST /api/v1/messages/{id}/resend and POST /api/v1/messages/resend (up to
//   500 ids): deliveries back to pending in place, then the interface's
//   delivery loops woken;
// - POST /api/v1/messages/{id}/dismiss: quarantined deliveries filtered, with
//   who dismissed them and why.
// Each change and its audit row go in one transaction: without its row, no
// change (503). The statements are the store's (schema/message_pages.h,
// schema/message_actions.h); these handlers check the input, write the
// audit detail and answer.
#pragma once

#include <cstdint>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/auth/auth_routes.h"
#include "api/engine_view.h"
#include "api/route.h"

namespace ductus::api {

// What the message handlers (these, and api/message_browser.h's) work on:
// the accounts' pool and audit log, and the engine (null: none runs here).
struct MessageDeps {
  AuthDeps& auth;
  EngineView* engine;
  store::PgPool& pool;
  AuditLog& audit;
};

// Ids a batch resend takes at most, in one transaction.
inline constexpr size_t kMaxResendIds = 500;

// A reason (a dismissal's, an edit's) is at most this long.
inline constexpr size_t kMaxReasonBytes = 1000;

// Shared by the message handlers: a path's message id (a positive whole
// number, else nullopt), and a column that may be NULL as JSON.
std::optional<int64_t> positiveId(std::string_view s);
nlohmann::json orNull(const std::optional<std::string>& s);

// deps (its pool and audit log) must outlive the routes; null: the routes
// for the OpenAPI document only, whose handlers answer 503. `engine` wakes
// an interface's delivery loops after a resend; null: nothing is woken
// (the rows wait for the loops' next read).
std::vector<Route> messageRoutes(AuthDeps* deps, EngineView* engine);

}  // namespace ductus::api
