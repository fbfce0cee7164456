// ApiHousekeeping: what the API's tables must lose as time passes. Audit
// rows older than audit.keep (6 years by default) and sessions that ended
// (past their 7 days, or idle past 12 hours: they can never sign anyone in
// again, but their rows would pile up for ever). 60 s after the engine
// starts, then hourly; a statement deletes at most `batch` rows, so no run
// holds many row locks for long or blocks a sign-in.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "api/audit/audit_log.h"
#include "api/auth/credentials.h"
#include "common/result.h"
#include "common/uv_handle.h"
#include "schema/pg_pool.h"

namespace ductus::api {

struct HousekeepingOptions {
  std::chrono::seconds auditKeep = kDefaultAuditKeep;
  AuthPolicy policy;  // the sessions' idle and absolute limits
  std::chrono::milliseconds firstAfter{60'000};
  std::chrono::milliseconds every{3'600'000};
  int64_t batch = 5000;
};

struct HousekeepingReport {
  int64_t auditRows = 0;  // deleted
  int64_t sessions = 0;
};

class ApiHousekeeping {
 public:
  // pool and audit must outlive it.
  ApiHousekeeping(uv_loop_t* loop, store::PgPool& pool, AuditLog& audit,
                  HousekeepingOptions options);
  ~ApiHousekeeping();
  ApiHousekeeping(const ApiHousekeeping&) = delete;
  ApiHousekeeping& operator=(const ApiHousekeeping&) = delete;

  // The timer: firstAfter from now, then every `every`. A failed run is
  // logged and the next one tries again.
  void start();
  void stop();
  // One run now (the timer's, and the tests').
  void run(std::function<void(Result<HousekeepingReport>)> done);

 private:
  void deleteSessions(std::string cutoffExpires, std::string cutoffIdle, int64_t total,
                      std::function<void(Result<int64_t>)> done);

  uv_loop_t* loop_;
  store::PgPool& pool_;
  AuditLog& audit_;
  HousekeepingOptions options_;
  UvHandle<uv_timer_t> timer_;
  bool running_ = false;  // a run is in flight: the timer's next tick skips
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::api
