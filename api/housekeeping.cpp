#include "api/housekeeping.h"

#include "common/log.h"

namespace ductus::api {

ApiHousekeeping::ApiHousekeeping(uv_loop_t* loop, store::PgPool& pool, AuditLog& audit,
                                 HousekeepingOptions options)
    : loop_(loop), pool_(pool), audit_(audit), options_(options) {}

ApiHousekeeping::~ApiHousekeeping() { *alive_ = false; }

void ApiHousekeeping::start() {
  timer_ = makeTimer(loop_, this);
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        auto* self = static_cast<ApiHousekeeping*>(t->data);
        if (!self || self->running_) return;
        self->run([](Result<HousekeepingReport> r) {
          if (!r)
            return spdlog::warn("housekeeping of the audit log and sessions failed: {}; "
                                "retrying in an hour",
                                r.error().message);
          if (r->auditRows || r->sessions)
            spdlog::info("housekeeping: {} audit row(s) past audit.keep and {} ended session(s) "
                         "deleted",
                         r->auditRows, r->sessions);
        });
      },
      static_cast<uint64_t>(options_.firstAfter.count()),
      static_cast<uint64_t>(options_.every.count()));
}

void ApiHousekeeping::stop() { timer_.reset(); }

void ApiHousekeeping::run(std::function<void(Result<HousekeepingReport>)> done) {
  running_ = true;
  auto alive = alive_;
  auto finish = [this, alive, done](Result<HousekeepingReport> r) {
    if (*alive) running_ = false;
    done(std::move(r));
  };
  audit_.prune(options_.auditKeep, options_.batch,
               [this, alive, finish](Result<int64_t> audit) {
                 if (!*alive) return;
                 if (!audit) return finish(Error{"audit log: " + audit.error().message});
                 TimePoint now = audit_.clock()();
                 deleteSessions(pgTime(now), pgTime(now - options_.policy.sessionIdle), 0,
                                [finish, rows = *audit](Result<int64_t> sessions) {
                                  if (!sessions)
                                    return finish(Error{"sessions: " + sessions.error().message});
                                  finish(HousekeepingReport{rows, *sessions});
                                });
               });
}

void ApiHousekeeping::deleteSessions(std::string cutoffExpires, std::string cutoffIdle,
                                     int64_t total, std::function<void(Result<int64_t>)> done) {
  auto alive = alive_;
  pool_.acquire([this, alive, cutoffExpires, cutoffIdle, total,
                 done = std::move(done)](Result<store::PgPool::LeasePtr> lease) mutable {
    if (!*alive) return;
    if (!lease) return done(lease.error());
    auto l = *lease;
    // The same two limits the authenticator applies: a session past either
    // can no longer be used.
    l->conn().query(
        "DELETE FROM sessions WHERE id IN (SELECT id FROM sessions WHERE expires_at <= $1 "
        "OR last_seen_at <= $2 LIMIT $3::bigint)",
        {cutoffExpires, cutoffIdle, std::to_string(options_.batch)},
        [this, alive, l, cutoffExpires, cutoffIdle, total,
         done = std::move(done)](Result<store::PgResult> r) mutable {
          if (!*alive) return;
          if (!r) return done(r.error());
          int64_t n = r->affected();
          if (n < options_.batch) return done(total + n);
          deleteSessions(cutoffExpires, cutoffIdle, total + n, std::move(done));
        });
  });
}

}  // namespace ductus::api
