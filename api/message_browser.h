// The message browser: find a message without SQL, see what became of it,
// read it, and send a corrected copy.
// - GET /api/v1/interfaces/{name}/messages (viewer): an interface's
//   messages newest (or oldest) first, paged by id, filtered by status
//   (or `errors`), time, message type, control id and key value (the
//   columns intake fills, migration 0006), each with its deliveries in
//   brief (the last error, whether a paused destination holds it) and its
//   marks (duplicateOf, editedFrom, editedTo), and the total (exact up to
//   1,000);
// - GET /api/v1/messages (viewer): the same across interfaces, for a
//   search by control id or key value (migration 0015's indexes);
// - on both, `q` searches the payloads of a window of at most 24 hours
//   (`payloads` permission, its audit row written first), reading at most
//   store::kContentScanRows messages a page;
// - GET /api/v1/messages/{id} (viewer): one message and its deliveries;
// - GET /api/v1/messages/{id}/payload (viewer with `payloads`): the payload
//   and saved outputs as text, its audit row written before anything is
//   read (no row, no payload: 503);
// - POST /api/v1/messages/{id}/edit (operator): a corrected copy with its
//   keys read from the new payload by the engine (EngineView::readKeys),
//   the original's quarantined deliveries filtered as "replaced by edited
//   copy N", the audit row in the same transaction; first the payload is
//   checked as the interface's intake checks it (EngineView::checkPayload:
//   its format, max_message_size): a refusal is 400 invalid_payload with
//   its problems (line, segment, field), and nothing is written;
// - POST /api/v1/interfaces/{name}/try (operator with `payloads`): a dry
//   run, its audit row (message.try) written first: the same check, then
//   each destination's function on the payload in the engine's workers
//   (EngineView::tryPayload), its output, filter, quarantine or error.
//   Nothing stored, nothing sent, the scripts' services mocked.
// The statements are the store's (schema/message_pages.h,
// schema/message_actions.h); these handlers check the input, write the
// audit detail and answer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <string_view>

#include "api/auth/auth_routes.h"
#include "api/engine_view.h"
#include "api/route.h"
#include "schema/message_pages.h"

namespace ductus::api {

inline constexpr int64_t kBrowseLimitDefault = 50;
inline constexpr int64_t kBrowseLimitMax = 500;
// A content search (`q`): the text's length, and the widest window
// (`from` to `to`, both required) whose payloads it reads.
inline constexpr size_t kContentTextMaxBytes = 256;
inline constexpr int64_t kContentWindowHours = 24;

// deps (its pool and audit log) must outlive the routes; null: the routes
// for the OpenAPI document only, whose handlers answer 503. `engine` reads
// an edited copy's keys and wakes its interface's loops; null: an edit is
// refused (409), as for an interface this engine doesn't run.
std::vector<Route> messageBrowserRoutes(AuthDeps* deps, EngineView* engine);

// Shared with the export (api/message_export.h), so both read a list's
// filters and show a message alike:
// - a list's query parameters (status, order, from, to, type, control_id,
//   key, q, before, after, limit) as the store's query, or the 400 naming
//   the one that is wrong; `text` is q's as given;
struct ListFilters {
  store::BrowseQuery q;
  std::optional<std::string> text;
};
Result<ListFilters> listFilters(const ApiRequest& req);
// - a list's row as JSON (GET .../messages' items);
nlohmann::json listRowJson(const store::MessageRow& m);
// - stored bytes as the text the interface's code read: {encoding, charset,
//   <field>} (GET .../payload's).
nlohmann::json storedText(std::string_view bytes, const std::optional<std::string>& charset,
                          const char* field);

}  // namespace ductus::api
