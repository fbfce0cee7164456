// What the API's SQL shares: a statement with its bound parameters, a
// transaction run on one connection step by step (both the store's), and
// the wall clock the auth and audit code read (injectable, so tests can
// move time).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "schema/pg_result.h"
#include "schema/pg_transaction.h"

namespace ductus::api {

using TimePoint = std::chrono::system_clock::time_point;
using Clock = std::function<TimePoint()>;
Clock systemClock();

// "2026-01-01 12:00:00.123456+00": a timestamptz parameter.
std::string pgTime(TimePoint t);

// The statements and step-by-step transactions are the store's
// (schema/pg_transaction.h): the message actions run the audit row in
// their own transaction.
using store::fixedStep;
using store::runTransaction;
using store::SqlStatement;
using store::TxDone;
using store::TxStep;

// Postgres's text array "{payloads,audit}" as its elements (plain words only).
std::vector<std::string> parseTextArray(std::string_view text);

}  // namespace ductus::api
