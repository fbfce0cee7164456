// Destination pauses (table destination_pauses, migration 0007): which
// destinations an operator paused, since when, by whom and why, so a pause
// outlives an engine restart. The API writes them in the transaction of its
// audit row (api/engine_actions.h) with the statements below; the engine
// reads them at start and holds those destinations' delivery loops.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "schema/pg_connection.h"
#include "schema/pg_pool.h"
#include "schema/pg_result.h"

namespace ductus::store {

struct PauseReason {
  std::string at;  // RFC 3339, UTC
  std::string by;
  std::string reason;
};

struct DestinationPause {
  int64_t destinationId = 0;
  std::string interfaceName;
  std::string destinationName;
  std::string pausedAt;  // the first pause, RFC 3339, UTC
  std::string pausedBy;  // who paused it first
  std::vector<PauseReason> reasons;  // oldest first
};

struct PauseStatement {
  std::string sql;
  std::vector<Param> params;
};

// Every statement here answers rows of the same columns, which pausesOf()
// reads: destination id, interface, destination, paused_at, paused_by,
// reasons (JSON text).

// Pauses the destination, or adds a reason to its pause (the first time and
// author stay). No row: the database has no such destination.
PauseStatement pauseDestinationSql(const std::string& interface, const std::string& destination,
                                   const std::string& by, const std::string& reason);
// Deletes its pause. No row: it was not paused.
PauseStatement resumeDestinationSql(const std::string& interface, const std::string& destination);
// Every pause.
PauseStatement pausesSql();

std::vector<DestinationPause> pausesOf(const PgResult& rows);

// Every pause, on a connection of the pool.
void loadPauses(PgPool& pool, std::function<void(Result<std::vector<DestinationPause>>)> done);

}  // namespace ductus::store
