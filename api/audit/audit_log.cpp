#include "api/audit/audit_log.h"

#include <memory>

namespace ductus::api {

std::string_view actorKindName(ActorKind k) {
  switch (k) {
    case ActorKind::User: return "user";
    case ActorKind::Token: return "token";
    case ActorKind::System: return "system";
  }
  return "system";
}

AuditEntry auditEntryFor(const Caller& caller, AuditAction action) {
  AuditEntry e;
  e.actor = caller.name;
  // A local caller is an account of the machine, not of Ductus.
  e.actorKind = caller.via == Via::Local ? ActorKind::System
                : caller.userId != 0     ? ActorKind::User
                                         : ActorKind::Token;
  e.via = std::string(viaName(caller.via));
  e.address = caller.address;
  e.action = action.str();
  if (caller.via == Via::Token && caller.userId != 0) e.detail["tokenId"] = caller.tokenId;
  return e;
}

SqlStatement auditInsert(const AuditEntry& e, TimePoint at) {
  return {"INSERT INTO audit_log (at, actor, actor_kind, via, address, action, target_kind, "
          "target_id, target_name, outcome, detail) "
          "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb)",
          {pgTime(at), e.actor, std::string(actorKindName(e.actorKind)), e.via, e.address, e.action,
           e.targetKind, e.targetId, e.targetName, e.outcome,
           e.detail.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)}};
}

SqlStatement auditSelect(const AuditQuery& q) {
  SqlStatement s;
  s.sql =
      "SELECT id, jsonb_build_object('id', id, "
      "'at', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), "
      "'actor', actor, 'actorKind', actor_kind, 'via', via, 'address', address, "
      "'action', action, 'target', jsonb_build_object('kind', target_kind, 'id', target_id, "
      "'name', target_name), 'outcome', outcome, 'detail', detail)::text "
      "FROM audit_log WHERE true";
  auto add = [&](const std::string& cond, std::string value) {
    s.params.push_back(std::move(value));
    std::string n = "$" + std::to_string(s.params.size());
    std::string c = cond;
    for (size_t p; (p = c.find('?')) != std::string::npos;) c.replace(p, 1, n);
    s.sql += " AND " + c;
  };
  if (q.actor) add("actor = ?", *q.actor);
  if (q.actorKind) add("actor_kind = ?", std::string(actorKindName(*q.actorKind)));
  if (q.action) add("action = ?", *q.action);
  if (q.since) add("at >= ?::timestamptz", *q.since);
  if (q.until) add("at < ?::timestamptz", *q.until);
  if (q.beforeId) add("id < ?::bigint", std::to_string(*q.beforeId));
  if (q.afterId) add("id > ?::bigint", std::to_string(*q.afterId));
  s.params.push_back(std::to_string(q.limit));
  s.sql += std::string(" ORDER BY id ") + (q.oldestFirst ? "ASC" : "DESC") + " LIMIT $" +
           std::to_string(s.params.size()) + "::bigint";
  return s;
}

AuditLog::AuditLog(store::PgPool& pool, Clock clock) : pool_(pool), clock_(std::move(clock)) {}

void AuditLog::write(AuditEntry e, std::function<void(Status)> done) {
  auto s = statement(e);
  pool_.acquire([s = std::move(s), done = std::move(done)](
                    Result<store::PgPool::LeasePtr> lease) mutable {
    if (!lease) return done(Error{"the audit log cannot be written: " + lease.error().message});
    auto l = *lease;
    l->conn().query(std::move(s.sql), std::move(s.params),
                    [l, done = std::move(done)](Result<store::PgResult> r) {
                      if (!r)
                        return done(Error{"the audit log cannot be written: " + r.error().message,
                                          r.error().kind, r.error().sqlstate});
                      done(Status{});
                    });
  });
}

namespace {

void pruneBatch(store::PgPool& pool, std::string cutoff, int64_t batch, int64_t total,
                std::function<void(Result<int64_t>)> done) {
  pool.acquire([&pool, cutoff, batch, total, done = std::move(done)](
                   Result<store::PgPool::LeasePtr> lease) mutable {
    if (!lease) return done(lease.error());
    auto l = *lease;
    l->conn().query(
        "DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE at < $1 "
        "ORDER BY id LIMIT $2::bigint)",
        {cutoff, std::to_string(batch)},
        [&pool, l, cutoff, batch, total, done = std::move(done)](Result<store::PgResult> r) mutable {
          if (!r) return done(r.error());
          int64_t n = r->affected();
          if (n < batch) return done(total + n);
          // A statement each, so no transaction holds many rows for long.
          pruneBatch(pool, cutoff, batch, total + n, std::move(done));
        });
  });
}

}  // namespace

void AuditLog::prune(std::chrono::seconds keep, int64_t batch,
                     std::function<void(Result<int64_t>)> done) {
  pruneBatch(pool_, pgTime(clock_() - keep), batch, 0, std::move(done));
}

}  // namespace ductus::api
