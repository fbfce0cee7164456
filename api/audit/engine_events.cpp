#include "api/audit/engine_events.h"

namespace ductus::api {
namespace {

AuditEntry engineEntry(const EngineInstance& i, AuditAction action) {
  AuditEntry e;
  e.actor = "engine";
  e.actorKind = ActorKind::System;
  e.via = "engine";
  e.action = action.str();
  e.targetKind = "engine";
  e.targetId = i.host;
  e.targetName = i.project;
  e.detail = {{"version", i.version}, {"pid", i.pid}};
  return e;
}

}  // namespace

void recordEngineStart(store::PgPool& pool, AuditLog& audit, const EngineInstance& instance,
                       std::function<void(Status)> done) {
  pool.acquire([&audit, instance, done = std::move(done)](
                   Result<store::PgPool::LeasePtr> lease) mutable {
    if (!lease) return done(Error{"the audit log cannot be read: " + lease.error().message});
    auto l = *lease;
    // Each max() walks audit_log_action backwards from its newest row.
    l->conn().query(
        "SELECT (SELECT max(id) FROM audit_log WHERE action = 'engine.start' AND target_kind = "
        "'engine' AND target_id = $1 AND target_name = $2), (SELECT max(id) FROM audit_log "
        "WHERE action = 'engine.stop' AND target_kind = 'engine' AND target_id = $1 AND "
        "target_name = $2)",
        {instance.host, instance.project},
        [l, &audit, instance, done = std::move(done)](Result<store::PgResult> r) mutable {
          if (!r) return done(Error{"the audit log cannot be read: " + r.error().message});
          std::string previous = "none";
          if (!r->isNull(0, 0))
            previous = !r->isNull(0, 1) && r->integer(0, 1) > r->integer(0, 0) ? "stopped"
                                                                               : "crashed";
          AuditEntry e = engineEntry(instance, "engine.start");
          e.detail["previous"] = previous;
          audit.write(std::move(e), std::move(done));
        });
  });
}

void recordEngineStop(AuditLog& audit, const EngineInstance& instance, const std::string& reason,
                      std::function<void(Status)> done) {
  AuditEntry e = engineEntry(instance, "engine.stop");
  e.detail["reason"] = reason;
  audit.write(std::move(e), std::move(done));
}

}  // namespace ductus::api
