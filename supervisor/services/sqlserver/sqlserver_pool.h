// The connections of one SQL Server database (or of one interface's
// dedicated_pools share of it). The driver blocks, so each connection
// lives on a thread of its own; the loop only hands statements over and
// gets the answers back (a uv_async). ProjectServices decides how many
// run at once (max_connections, dedicated_pools, the waiting queue); this
// pool never opens more than `limit` connections.
//
// A connection is used again only after a call that succeeded: a failed
// one may have lost its connection or left a transaction open, so it is
// closed and the next call opens a new one. A connection idle for
// idleClose is closed, and its thread ends.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "supervisor/services/sqlserver/odbc_connection.h"

namespace ductus::supervisor::services::sqlserver {

struct Statement {
  bool query = false;  // query: rows as JSON; else execute: {"rowCount": n}
  BoundStatement bound;
  std::vector<Param> params;
  Caps caps;
  std::chrono::milliseconds timeout{10000};
};

class SqlServerPool {
 public:
  static constexpr std::chrono::minutes kDefaultIdleClose{5};

  SqlServerPool(uv_loop_t* loop, ConnectSettings settings, size_t limit,
                std::chrono::milliseconds idleClose = kDefaultIdleClose);
  // Statements not yet answered never call back; threads finish the one
  // they run (bounded by its timeout) and end on their own.
  ~SqlServerPool();
  SqlServerPool(const SqlServerPool&) = delete;
  SqlServerPool& operator=(const SqlServerPool&) = delete;

  // Answers on the loop, never inside run().
  void run(Statement statement, std::function<void(Result<std::string>)> done);

  // Connections opened so far (a reused one counts once).
  uint64_t connectionsOpened() const;

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

}  // namespace ductus::supervisor::services::sqlserver
