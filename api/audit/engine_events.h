// The engine's own rows in the audit log: engine.start, with how the
// previous run of the same instance (host and project folder) ended, and
// engine.stop. A start whose instance's last row is an engine.start ended
// without its stop: the engine was killed or crashed, which an operator
// reading the log must be able to tell from a clean restart.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include "api/audit/audit_log.h"
#include "common/result.h"
#include "schema/pg_pool.h"

namespace ductus::api {

struct EngineInstance {
  std::string host;
  std::string project;  // the project's folder
  std::string version;
  pid_t pid = 0;
};

// detail.previous: "none" (the instance's first start), "stopped" or
// "crashed".
void recordEngineStart(store::PgPool& pool, AuditLog& audit, const EngineInstance& instance,
                       std::function<void(Status)> done);
// detail.reason: why it stopped ("signal", "drain", ...).
void recordEngineStop(AuditLog& audit, const EngineInstance& instance, const std::string& reason,
                      std::function<void(Status)> done);

}  // namespace ductus::api
