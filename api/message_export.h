// GET /api/v1/interfaces/{name}/messages/export (viewer): the messages an
// interface's list filters match (status, order, from, to, type,
// control_id, key: as GET .../messages takes them), as CSV or NDJSON, a
// file to open elsewhere.
// - At most `limit` messages (default and bound kExportRowsMax), counted
//   first: X-Ductus-Export-Rows says how many follow and
//   X-Ductus-Export-Complete false that more matched (narrow the filter).
//   Newest first, the walk starts below the newest match it counted, so
//   messages stored meanwhile are not in it.
// - Streamed a page at a time, the next page read only once the client
//   has taken most of the last (HttpStream::unread), so a large export
//   holds a page in memory, not the file.
// - Metadata for every viewer; `include=payload` adds the payload as the
//   text the interface read (as GET .../payload gives it) and needs the
//   `payloads` permission (403 without). Such an export writes its
//   `message.export` audit row first (the filter, the count; no row, no
//   export: 503); the control id or key searched for are named, not
//   given, as for a content search.
// - CSV as RFC 4180 writes it: a field holding a comma, a quote, CR or LF
//   (HL7 separates its segments with CR) is quoted, quotes doubled, lines
//   end in CRLF; a field a spreadsheet would take for a formula (= + - @,
//   a tab or CR first) starts with ' (NDJSON gives every value as stored).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/auth/auth_routes.h"
#include "api/engine_view.h"
#include "api/route.h"

namespace ductus::api {

// The most messages one export gives (and its default `limit`).
inline constexpr int64_t kExportRowsMax = 100000;

// One CSV field as RFC 4180 writes it (the formula guard included).
std::string csvField(std::string_view text);

// deps (its pool and audit log) must outlive the routes; null: the route
// for the OpenAPI document only, whose handler answers 503.
std::vector<Route> messageExportRoutes(AuthDeps* deps, EngineView* engine);

}  // namespace ductus::api
