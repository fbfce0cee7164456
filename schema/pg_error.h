// The SQLSTATEs the engine acts on, named once. An Error of kind Database
// carries PostgreSQL's five-character code; everything that decides on it
// (retry, wait, map to an HTTP status) asks here, never compares the text.
#pragma once

#include <string_view>

#include "common/result.h"

namespace ductus::store::pg {

inline std::string_view state(const Error& e) {
  return e.kind == ErrorKind::Database ? std::string_view(e.sqlstate) : std::string_view();
}

inline bool is(const Error& e, std::string_view sqlstate) { return state(e) == sqlstate; }
inline bool inClass(const Error& e, std::string_view cls) {
  return state(e).size() == 5 && state(e).starts_with(cls);
}

// The transaction lost a race and may run again as it was: serialization
// failure or deadlock. The store's lock-then-retry rule reads this.
inline bool serializationFailure(const Error& e) { return is(e, "40001"); }
inline bool deadlock(const Error& e) { return is(e, "40P01"); }
inline bool retryable(const Error& e) { return serializationFailure(e) || deadlock(e); }

// A lock not had within lock_timeout.
inline bool lockNotAvailable(const Error& e) { return is(e, "55P03"); }
// What statement_timeout raises (and a cancelled wait).
inline bool queryCanceled(const Error& e) { return is(e, "57014"); }
inline bool undefinedTable(const Error& e) { return is(e, "42P01"); }
inline bool uniqueViolation(const Error& e) { return is(e, "23505"); }

// The connection, not the statement, failed; or the server is shutting
// down, starting, or out of connections: the same work may succeed soon.
inline bool connectionLost(const Error& e) {
  return inClass(e, "08") || is(e, "57P01") || is(e, "57P03") || is(e, "53300");
}

// What an Error made for a broken connection carries (connection_failure).
inline constexpr std::string_view kConnectionFailure = "08006";
inline Error connectionFailure(std::string message) {
  return Error{std::move(message), ErrorKind::Database, std::string(kConnectionFailure)};
}

// Classes that say the engine is wrong, not the database's state: a
// statement or schema that doesn't fit (42, 0A, 21, 26, 34), a value the
// engine should have checked first (22, 23), the database's own fault (XX).
// Anything else from PostgreSQL (a lost connection, no room, a conflict, a
// trigger refusing an audit row) is the database unable to serve now.
inline bool engineMistake(const Error& e) {
  if (state(e).size() != 5) return true;
  for (std::string_view c : {"42", "0A", "21", "26", "34", "22", "23", "XX"})
    if (inClass(e, c)) return true;
  return false;
}

}  // namespace ductus::store::pg
