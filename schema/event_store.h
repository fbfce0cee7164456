// The engine's events (table events, migration 0017): written in batches by
// supervisor/monitor/event_recorder.h, kept bounded by age and by count,
// read newest first for GET /api/v1/event-log (api/event_routes.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/event_log.h"
#include "common/result.h"
#include "schema/pg_pool.h"

namespace ductus::store {

// Adds the events in one statement, whatever their number; the detail is
// cut to events::kMaxDetail bytes, text that is not UTF-8 read as
// ISO-8859-1.
void addEvents(PgPool& pool, const std::vector<events::Event>& rows,
               std::function<void(Status)> done);

// Deletes rows older than `keep`, then every row older than the newest
// `maxRows`, at most `batch` rows a statement each; the count deleted.
void purgeEvents(PgPool& pool, std::chrono::seconds keep, int64_t maxRows, int64_t batch,
                 std::function<void(Result<int64_t>)> done);

struct EventQuery {
  std::optional<std::string> kind;
  std::optional<std::string> interface;
  std::optional<std::string> since;  // RFC 3339, checked by the caller
  std::optional<int64_t> beforeId;   // the cursor: rows with a smaller id
  int64_t limit = 100;
};

struct EventRow {
  int64_t id = 0;
  std::chrono::system_clock::time_point at;
  std::string kind;
  std::optional<std::string> interface, destination;
  std::optional<int64_t> messageId;
  std::string detail;
};

// Newest first (by id), at most q.limit rows.
void readEvents(PgPool& pool, const EventQuery& q,
                std::function<void(Result<std::vector<EventRow>>)> done);

}  // namespace ductus::store
