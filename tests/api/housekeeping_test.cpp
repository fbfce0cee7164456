// What the API's tables lose as time passes (audit rows past audit.keep,
// sessions that ended) and the engine's own audit rows: engine.start says
// how the previous run of the same instance ended.
#include "api/housekeeping.h"

#include <gtest/gtest.h>

#include "api/audit/engine_events.h"
#include "tests/api/auth_fixture.h"

namespace ductus::api::test {
namespace {

using namespace std::chrono_literals;

class HousekeepingTest : public AuthFixture {
 protected:
  Result<HousekeepingReport> runOnce(HousekeepingOptions o) {
    std::unique_ptr<ApiHousekeeping> h;
    loop_.run([&] { h = std::make_unique<ApiHousekeeping>(loop_.loop(), *pool_, *audit_, o); });
    auto r = onLoop<HousekeepingReport>([&](auto done) { h->run(done); });
    loop_.run([&] { h.reset(); });
    return r;
  }
  Status start(const EngineInstance& i) {
    auto r = onLoop<bool>([&](auto done) {
      recordEngineStart(*pool_, *audit_, i, [done](Status s) {
        if (!s) return done(s.error());
        done(true);
      });
    });
    return r ? Status{} : Status(r.error());
  }
  Status stop(const EngineInstance& i) {
    auto r = onLoop<bool>([&](auto done) {
      recordEngineStop(*audit_, i, "stop", [done](Status s) {
        if (!s) return done(s.error());
        done(true);
      });
    });
    return r ? Status{} : Status(r.error());
  }
  std::string lastPrevious() {
    return db_.value("SELECT detail->>'previous' FROM audit_log WHERE action = 'engine.start' "
                     "ORDER BY id DESC LIMIT 1");
  }
};

TEST_F(HousekeepingTest, EndedSessionsAndAuditRowsPastKeepGoInBatches) {
  makeUser("ann", Role::Viewer, kNoPermission, "ann's long password");
  for (int i = 0; i < 3; ++i) ASSERT_EQ(signIn("ann", "ann's long password").status, 201);
  advance(13h);  // past the 12 h idle limit: the three can't be used again
  auto live = signIn("ann", "ann's long password");
  ASSERT_EQ(live.status, 201);
  std::string session = sessionOf(live);
  ASSERT_EQ(db_.value("SELECT count(*) FROM sessions"), "4");
  auto rowsBefore = std::stoll(db_.value("SELECT count(*) FROM audit_log"));

  HousekeepingOptions o;
  o.batch = 2;
  o.auditKeep = std::chrono::hours(12);  // every row older than 12 h: the first three sign-ins'
  auto r = runOnce(o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->sessions, 3);
  EXPECT_EQ(db_.value("SELECT count(*) FROM sessions"), "1");
  EXPECT_EQ(call("GET", "/api/v1/me", cookie(session)).status, 200) << "the live session stays";
  EXPECT_GT(r->auditRows, 0);
  EXPECT_EQ(std::stoll(db_.value("SELECT count(*) FROM audit_log")), rowsBefore - r->auditRows);
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log WHERE at < now() + interval '1 h'"), "0")
      << "only rows of the test clock's present are left";

  auto again = runOnce(o);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->sessions, 0);
  EXPECT_EQ(again->auditRows, 0);
}

TEST_F(HousekeepingTest, AStartWithoutAStopBeforeItIsSaidToBeACrash) {
  EngineInstance a{"host-a", "/srv/project", "0.1.0", 100};
  EngineInstance other{"host-b", "/srv/project", "0.1.0", 200};
  ASSERT_TRUE(start(a));
  EXPECT_EQ(lastPrevious(), "none");
  ASSERT_TRUE(stop(a));
  ASSERT_TRUE(start(a));
  EXPECT_EQ(lastPrevious(), "stopped");
  ASSERT_TRUE(start(other));
  EXPECT_EQ(lastPrevious(), "none") << "another host's runs are another instance";
  ASSERT_TRUE(start(a));  // no stop since a's last start: killed
  EXPECT_EQ(lastPrevious(), "crashed");
  EXPECT_EQ(db_.value("SELECT actor || ' ' || actor_kind || ' ' || via || ' ' || target_id || "
                      "' ' || target_name || ' ' || (detail->>'pid') FROM audit_log WHERE action "
                      "= 'engine.start' ORDER BY id DESC LIMIT 1"),
            "engine system engine host-a /srv/project 100");
}

}  // namespace
}  // namespace ductus::api::test
