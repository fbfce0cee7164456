// What the API's SQL shares: a statement with its bound parameters, a
// transaction run on one connection step by step, and the wall clock the
// auth and audit code read (injectable, so tests can move time).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "schema/pg_connection.h"
#include "schema/pg_result.h"

namespace ductus::api {

using TimePoint = std::chrono::system_clock::time_point;
using Clock = std::function<TimePoint()>;
Clock systemClock();

// "2026-01-01 12:00:00.123456+00": a timestamptz parameter.
std::string pgTime(TimePoint t);

struct SqlStatement {
  std::string sql;
  std::vector<store::Param> params;
};

// One step of a transaction: the statement to run next, made from the
// results so far; an Error ends the transaction (rolled back) with it.
using TxStep = std::function<Result<SqlStatement>(const std::vector<store::PgResult>&)>;
using TxDone = std::function<void(Result<std::vector<store::PgResult>>)>;

// BEGIN, each step in turn, COMMIT; on any error ROLLBACK, then done(error),
// so the connection goes back to its pool outside a transaction. conn must
// outlive done (hold its lease in done's captures).
void runTransaction(store::PgConnection& conn, std::vector<TxStep> steps, TxDone done);

// A step that ignores what came before.
TxStep fixedStep(SqlStatement s);

// Postgres's text array "{payloads,audit}" as its elements (plain words only).
std::vector<std::string> parseTextArray(std::string_view text);

}  // namespace ductus::api
