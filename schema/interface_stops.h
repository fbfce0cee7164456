// Interface stops (table interface_stops, migration 0014): which
// interfaces' intake an operator stopped, since when, by whom and why, so a
// stop outlives an engine restart. The API writes them in the transaction
// of its audit row (api/engine_actions.h) with the statements below; the
// engine reads them before it opens its sources and leaves those closed.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "schema/pg_connection.h"
#include "schema/pg_pool.h"
#include "schema/pg_result.h"

namespace ductus::store {

struct InterfaceStop {
  std::string interfaceName;
  std::string stoppedAt;  // RFC 3339, UTC
  std::string stoppedBy;
  std::optional<std::string> reason;
};

struct StopStatement {
  std::string sql;
  std::vector<Param> params;
};

// Every statement here answers rows of the same columns, which stopsOf()
// reads: interface, stopped_at, stopped_by, reason.

// Stops the interface's intake. No row: it was stopped already (the first
// stop's time, author and reason stay).
StopStatement stopInterfaceSql(const std::string& interface, const std::string& by,
                               const std::optional<std::string>& reason);
// Deletes its stop. No row: it was not stopped.
StopStatement startInterfaceSql(const std::string& interface);
// Every stop.
StopStatement interfaceStopsSql();

std::vector<InterfaceStop> stopsOf(const PgResult& rows);

// Every stop, on a connection of the pool.
void loadInterfaceStops(PgPool& pool, std::function<void(Result<std::vector<InterfaceStop>>)> done);

}  // namespace ductus::store
