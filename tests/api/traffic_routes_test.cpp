// GET /interfaces/{name}/stats over real HTTP and a real PostgreSQL: the
// minutes summed into steps, every destination named, the intake apart;
// each bound refused with a 400 that names it; 404 for an interface the
// database doesn't know; a viewer may read it, nobody unsigned.
#include <gtest/gtest.h>

#include "api/traffic_routes.h"
#include "tests/api/auth_fixture.h"

namespace ductus::api::test {
namespace {

// Counted by the engine, not written yet: 3 received in 01:00's minute and
// 2 sent by ehr at 01:01 (a step the database has nothing in).
class Unsaved : public EngineView {
 public:
  EngineState state() const override { return EngineState::Serving; }
  EngineInfo engine() const override { return {}; }
  void interfaces(std::function<void(Result<std::vector<InterfaceInfo>>)> done) override {
    done(std::vector<InterfaceInfo>{});
  }
  std::vector<store::TrafficRow> unsavedTraffic(int64_t interfaceId) const override {
    asked = interfaceId;
    return {{interfaceId, 0, 1767229200, 3, 0, 0, 0}, {interfaceId, ehr, 1767229260, 0, 2, 0, 0}};
  }
  int64_t ehr = 0;
  mutable int64_t asked = 0;
};

class TrafficRoutesTest : public AuthFixture {
 protected:
  void SetUp() override {
    AuthFixture::SetUp();
    if (HasFatalFailure()) return;
    serveWith([&] { return trafficRoutes(deps_.get(), nullptr); });
    if (HasFatalFailure()) return;
    db_.value("INSERT INTO interfaces (name) VALUES ('adt')");
    db_.value("INSERT INTO destinations (interface_id, name) SELECT id, d FROM interfaces, "
              "unnest(ARRAY['ehr', 'lab']) d WHERE name = 'adt'");
    // 2026-01-01: 10 received at 00:00, 5 at 00:59, 7 at 01:00; ehr sent 4
    // and quarantined 1 at 00:30; lab nothing.
    db_.value(
        "INSERT INTO traffic_minutes (interface_id, destination_id, minute, received, sent, "
        "filtered, quarantined) SELECT i.id, 0, t::timestamptz, r, 0, 0, 0 FROM interfaces i, "
        "(VALUES ('2026-01-01T00:00:00Z', 10), ('2026-01-01T00:59:00Z', 5), "
        "('2026-01-01T01:00:00Z', 7)) v(t, r)");
    db_.value("INSERT INTO traffic_minutes (interface_id, destination_id, minute, sent, "
              "quarantined) SELECT interface_id, id, '2026-01-01T00:30:00Z', 4, 1 FROM "
              "destinations WHERE name = 'ehr'");
    viewer_ = makeToken("watcher", Role::Viewer, kNoPermission).token;
  }
  ductus::test::HttpReply stats(const std::string& query) {
    return call("GET", "/api/v1/interfaces/adt/stats" + query, bearer(viewer_));
  }
  std::string viewer_;
};

TEST_F(TrafficRoutesTest, HoursSumTheirMinutesAndEveryDestinationIsListed) {
  auto r = stats("?from=2026-01-01T00:00:00Z&to=2026-01-01T03:00:00Z&step=1h");
  ASSERT_EQ(r.status, 200) << r.body;
  auto b = bodyOf(r);
  EXPECT_EQ(b["step"], "1h");
  EXPECT_EQ(b["from"], "2026-01-01T00:00:00.000Z");
  ASSERT_EQ(b["intake"].size(), 2u);
  EXPECT_EQ(b["intake"][0]["at"], "2026-01-01T00:00:00.000Z");
  EXPECT_EQ(b["intake"][0]["received"], 15);
  EXPECT_EQ(b["intake"][1]["received"], 7);
  ASSERT_EQ(b["destinations"].size(), 2u);
  EXPECT_EQ(b["destinations"][0]["name"], "ehr");
  EXPECT_EQ(b["destinations"][0]["points"][0]["sent"], 4);
  EXPECT_EQ(b["destinations"][0]["points"][0]["quarantined"], 1);
  EXPECT_EQ(b["destinations"][1]["name"], "lab");
  EXPECT_TRUE(b["destinations"][1]["points"].empty());
  // Minutes, an offset applied: 01:00+01:00 is midnight UTC.
  r = stats("?from=2026-01-01T01:00:00%2B01:00&to=2026-01-01T00:59:00Z");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(bodyOf(r)["intake"].size(), 1u) << "[00:00, 00:59): the 00:59 minute is not in it";
  EXPECT_EQ(call("GET", "/api/v1/interfaces/adt/stats").status, 401);
}

TEST_F(TrafficRoutesTest, WhatTheEngineHasNotWrittenYetIsInItsStep) {
  Unsaved engine;
  engine.ehr = std::stoll(db_.value("SELECT id FROM destinations WHERE name = 'ehr'"));
  serveWith([&] { return trafficRoutes(deps_.get(), &engine); });
  auto r = stats("?from=2026-01-01T00:58:00Z&to=2026-01-01T01:02:00Z");
  ASSERT_EQ(r.status, 200) << r.body;
  auto b = bodyOf(r);
  EXPECT_EQ(std::to_string(engine.asked),
            db_.value("SELECT id FROM interfaces WHERE name = 'adt'"));
  ASSERT_EQ(b["intake"].size(), 2u) << b.dump();
  EXPECT_EQ(b["intake"][1]["at"], "2026-01-01T01:00:00.000Z");
  EXPECT_EQ(b["intake"][1]["received"], 10) << "7 written and 3 counted";
  ASSERT_EQ(b["destinations"][0]["points"].size(), 1u) << b.dump();
  EXPECT_EQ(b["destinations"][0]["points"][0]["at"], "2026-01-01T01:01:00.000Z");
  EXPECT_EQ(b["destinations"][0]["points"][0]["sent"], 2);
}

TEST_F(TrafficRoutesTest, EachBoundIsRefusedByName) {
  auto r = stats("?step=5m");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("`step` must be 1m or 1h"), std::string::npos) << r.body;
  r = stats("?from=yesterday");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("`from`"), std::string::npos) << r.body;
  r = stats("?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("before"), std::string::npos) << r.body;
  // 1,440 minutes is the most; one more is refused.
  EXPECT_EQ(stats("?from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z").status, 200);
  r = stats("?from=2026-01-01T00:00:00Z&to=2026-01-02T00:01:00Z");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("at most 1440 steps"), std::string::npos) << r.body;
  EXPECT_EQ(call("GET", "/api/v1/interfaces/nobody/stats", bearer(viewer_)).status, 404);
}

}  // namespace
}  // namespace ductus::api::test
