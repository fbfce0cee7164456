// The alerts' routes over real HTTP and a real PostgreSQL: the list with
// each alert's last events, an acknowledge and a silence written with their
// audit rows, who may call them, and a bad id or body refused before
// anything is written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/alert_routes.h"
#include "tests/api/auth_fixture.h"

namespace ductus::api::test {
namespace {

using json = nlohmann::json;

class AlertRoutesTest : public AuthFixture {
 protected:
  void SetUp() override {
    AuthFixture::SetUp();
    if (HasFatalFailure()) return;
    serveWith([&] { return alertRoutes(deps_.get()); });
    if (HasFatalFailure()) return;
    ops_ = makeToken("ops", Role::Operator, kNoPermission).token;
    viewer_ = makeToken("watcher", Role::Viewer, kNoPermission).token;
    firing_ = db_.value(
        "INSERT INTO alert_state (subject, interface_name, destination_name, phase, state, "
        "severity, opened_at, changed_at, remind_at, told) VALUES ('adt/lab', 'adt', 'lab', "
        "'firing', 'stalled', 'critical', now(), now(), now() + interval '1 hour', true) "
        "RETURNING id");
    ok_ = db_.value(
        "INSERT INTO alert_state (subject, certificate_name, phase, state, severity, changed_at) "
        "VALUES ('certificate:server', 'server', 'ok', 'ok', 'warning', now() - interval '1 day') "
        "RETURNING id");
    db_.value(
        "INSERT INTO alert_events (alert_id, change, phase, state, severity, reason) "
        "VALUES ($1::int8, 'fired', 'firing', 'stalled', 'critical', 'nothing sent')",
        {firing_});
    db_.value(
        "INSERT INTO alert_deliveries (alert_id, channel, kind, target, body) "
        "VALUES ($1::int8, 'oncall', 'email', 'a@example.org', 'text') RETURNING id",
        {firing_});
  }

  ductus::test::HttpReply post(const std::string& path, const json& body,
                               const std::string& token) {
    return call("POST", path, bearer(token), body.is_null() ? std::string() : body.dump());
  }
  std::string auditRows(const std::string& action) {
    return db_.value(
        "SELECT coalesce(string_agg(actor || ' ' || target_kind || ' ' || target_id || ' ' || "
        "target_name, ','), '') FROM audit_log WHERE action = $1",
        {action});
  }

  std::string ops_, viewer_, firing_, ok_;
};

TEST_F(AlertRoutesTest, AViewerListsTheAlertsFiringFirstWithTheirEvents) {
  auto r = call("GET", "/api/v1/alerts", bearer(viewer_));
  ASSERT_EQ(r.status, 200) << r.body;
  auto alerts = bodyOf(r)["alerts"];
  ASSERT_EQ(alerts.size(), 2u) << r.body;
  auto& a = alerts[0];
  EXPECT_EQ(a["id"], std::stoll(firing_));
  EXPECT_EQ(a["subject"], "adt/lab");
  EXPECT_EQ(a["interface"], "adt");
  EXPECT_EQ(a["destination"], "lab");
  EXPECT_TRUE(a["certificate"].is_null());
  EXPECT_EQ(a["phase"], "firing");
  EXPECT_EQ(a["state"], "stalled");
  EXPECT_EQ(a["severity"], "critical");
  EXPECT_THAT(a["openedAt"].get<std::string>(), ::testing::EndsWith("Z"));
  EXPECT_TRUE(a["acknowledgedAt"].is_null());
  EXPECT_TRUE(a["silencedUntil"].is_null());
  EXPECT_EQ(a["told"], true);
  ASSERT_EQ(a["events"].size(), 1u);
  EXPECT_EQ(a["events"][0]["change"], "fired");
  EXPECT_EQ(a["events"][0]["reason"], "nothing sent");
  EXPECT_EQ(alerts[1]["subject"], "certificate:server");
  EXPECT_EQ(alerts[1]["certificate"], "server");
  EXPECT_TRUE(alerts[1]["events"].empty());
  EXPECT_EQ(call("GET", "/api/v1/alerts").status, 401);
}

TEST_F(AlertRoutesTest, AnOperatorAcknowledgesAFiringAlertWithItsAuditRow) {
  std::string path = "/api/v1/alerts/" + firing_ + "/acknowledge";
  auto refused = post(path, nullptr, viewer_);
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_EQ(auditRows("alert.acknowledge"), "");

  auto r = post(path, nullptr, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  auto b = bodyOf(r);
  EXPECT_EQ(b["acknowledgedBy"], "ops");
  EXPECT_THAT(b["acknowledgedAt"].get<std::string>(), ::testing::EndsWith("Z"));
  EXPECT_EQ(auditRows("alert.acknowledge"), "ops alert " + firing_ + " adt/lab");
  EXPECT_EQ(db_.value("SELECT acknowledged_by || ' ' || (remind_at IS NULL) FROM alert_state "
                      "WHERE id = $1::int8",
                      {firing_}),
            "ops true");
  EXPECT_EQ(db_.value("SELECT change FROM alert_events ORDER BY id DESC LIMIT 1"), "acknowledged");

  // Not firing: 409; no such alert: 404; not an id: 400. None audited.
  r = post("/api/v1/alerts/" + ok_ + "/acknowledge", nullptr, ops_);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(post("/api/v1/alerts/999999/acknowledge", nullptr, ops_).status, 404);
  EXPECT_EQ(post("/api/v1/alerts/x1/acknowledge", nullptr, ops_).status, 400);
  EXPECT_EQ(post("/api/v1/alerts/-3/acknowledge", nullptr, ops_).status, 400);
  EXPECT_EQ(post("/api/v1/alerts/99999999999999999999/acknowledge", nullptr, ops_).status, 400);
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log WHERE action = 'alert.acknowledge'"), "1");
}

TEST_F(AlertRoutesTest, AnOperatorSilencesForABoundedWhileWithItsAuditRow) {
  std::string path = "/api/v1/alerts/" + firing_ + "/silence";
  EXPECT_EQ(post(path, {{"for", "2h"}}, viewer_).status, 403);
  for (json bad : {json(nullptr), json::object(), json{{"for", 7200}}, json{{"for", "2"}},
                   json{{"for", "30s"}}, json{{"for", "31d"}}, json{{"for", "-1h"}}}) {
    auto r = post(path, bad, ops_);
    EXPECT_EQ(r.status, 400) << bad.dump() << " " << r.body;
  }
  EXPECT_EQ(auditRows("alert.silence"), "");
  EXPECT_EQ(db_.value("SELECT count(*) FROM alert_deliveries WHERE NOT given_up"), "1");

  auto r = post(path, {{"for", "2h"}}, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  auto b = bodyOf(r);
  EXPECT_EQ(b["silencedBy"], "ops");
  EXPECT_EQ(db_.value("SELECT abs(extract(epoch FROM silenced_until - now() - interval '2 hours')) "
                      "< 60 FROM alert_state WHERE id = $1::int8",
                      {firing_}),
            "t");
  EXPECT_EQ(auditRows("alert.silence"), "ops alert " + firing_ + " adt/lab");
  EXPECT_EQ(db_.value("SELECT detail->>'for' FROM audit_log WHERE action = 'alert.silence'"), "2h");
  // Its unsent notification is given up.
  EXPECT_EQ(db_.value("SELECT count(*) FROM alert_deliveries WHERE NOT given_up"), "0");
  EXPECT_EQ(post("/api/v1/alerts/" + ok_ + "/silence", {{"for", "1m"}}, ops_).status, 409);
  EXPECT_EQ(post("/api/v1/alerts/999999/silence", {{"for", "30d"}}, ops_).status, 404);
}

}  // namespace
}  // namespace ductus::api::test
