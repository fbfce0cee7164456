// A transaction run on one leased connection statement by statement, each
// made from the results before it: how the actions on messages and the
// API's own tables (accounts, audit) write several rows or none.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "schema/pg_connection.h"
#include "schema/pg_pool.h"
#include "schema/pg_result.h"

namespace ductus::store {

struct SqlStatement {
  std::string sql;
  std::vector<Param> params;
};

// One step of a transaction: the statement to run next, made from the
// results so far; an Error ends the transaction (rolled back) with it.
using TxStep = std::function<Result<SqlStatement>(const std::vector<PgResult>&)>;
using TxDone = std::function<void(Result<std::vector<PgResult>>)>;

// BEGIN, each step in turn, COMMIT; on any error ROLLBACK, then done(error),
// so the connection goes back to its pool outside a transaction. conn must
// outlive done (hold its lease in done's captures).
void runTransaction(PgConnection& conn, std::vector<TxStep> steps, TxDone done);

// runTransaction, run again from BEGIN when it lost a race with another
// transaction (pg::retryable: a serialization failure or a deadlock, which
// Postgres ends by failing one side), `tries` runs at most. The rule the
// store applies to every statement that updates messages or deliveries.
void runTransactionRetried(PgPool::LeasePtr lease, std::vector<TxStep> steps, TxDone done,
                           int tries);

// A step that ignores what came before.
TxStep fixedStep(SqlStatement s);

}  // namespace ductus::store
