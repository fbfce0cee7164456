// The audit log (table audit_log): one row per thing done - who (actor and
// its kind), how (via: session, token, cli, engine), from which address,
// what (action, e.g. "token.create"), to what (target kind, id, name), how
// it ended (ok, denied, failed) and the rest as JSON.
//
// Two ways to write a row:
// - in the transaction of the change it records: auditInsert() gives the
//   statement, run on the caller's own connection before its COMMIT, so the
//   change and its row stand or fall together;
// - first, for actions that have no transaction (a payload read, an
//   export): AuditLog::write(), and the action goes ahead only if the row
//   was written (else the caller refuses it with 503).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/audit/actions.h"
#include "api/audit/sql.h"
#include "api/route.h"
#include "common/result.h"
#include "schema/pg_pool.h"

namespace ductus::api {

enum class ActorKind { User, Token, System };
std::string_view actorKindName(ActorKind k);  // "user", "token", "system"

struct AuditEntry {
  std::string actor;  // a user's or token's name, or the OS user for the CLI
  ActorKind actorKind = ActorKind::System;
  std::string via;      // "session", "token", "cli", "engine"
  std::string address;  // the peer, "127.0.0.1:53412"; empty for the CLI
  std::string action;   // "session.create", "user.disable", ...
  std::string targetKind;  // "user", "token", "session", "audit", ...
  std::optional<std::string> targetId;
  std::string targetName;
  std::string outcome = "ok";  // ok, denied or failed
  nlohmann::json detail = nlohmann::json::object();
};

// The actor fields for a caller of the API: a user (through a session or a
// token of theirs) is the user; a token of no user is the token. The
// action must be one of api/audit/actions.h's.
AuditEntry auditEntryFor(const Caller& caller, AuditAction action);

// The INSERT of one row (parameters $1..$12), at `at`.
SqlStatement auditInsert(const AuditEntry& e, TimePoint at);

// One page of rows as JSON objects (text), and the statement that reads it.
struct AuditQuery {
  std::optional<std::string> actor;
  std::optional<ActorKind> actorKind;
  std::optional<std::string> action;
  std::optional<std::string> since;  // timestamptz text; checked by Postgres
  std::optional<std::string> until;
  std::optional<int64_t> beforeId;  // newest first: rows with a smaller id
  std::optional<int64_t> afterId;   // oldest first: rows with a larger id
  bool oldestFirst = false;
  int64_t limit = 100;
};
// Columns: id, the row as JSON text {id, at, actor, actorKind, via, address,
// action, target: {kind, id, name}, outcome, detail}.
SqlStatement auditSelect(const AuditQuery& q);

class AuditLog {
 public:
  AuditLog(store::PgPool& pool, Clock clock = systemClock());

  // The statement for the caller's own transaction, at the clock's now.
  SqlStatement statement(const AuditEntry& e) const { return auditInsert(e, clock_()); }

  // Writes the row on a connection of its own, committed before done(ok).
  void write(AuditEntry e, std::function<void(Status)> done);

  // Deletes rows older than `keep` (audit.keep, 6 years by default), `batch`
  // rows a statement until none is left; done hears how many went. Nothing
  // calls it on a schedule yet: the engine's maintenance timer should.
  void prune(std::chrono::seconds keep, int64_t batch, std::function<void(Result<int64_t>)> done);

  const Clock& clock() const { return clock_; }

 private:
  store::PgPool& pool_;
  Clock clock_;
};

// 6 years of 365.25 days.
constexpr std::chrono::seconds kDefaultAuditKeep{6LL * 36525 * 24 * 3600 / 100};

}  // namespace ductus::api
