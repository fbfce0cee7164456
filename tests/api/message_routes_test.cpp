// The quarantine list and the message actions (resend, dismiss) over real
// HTTP and a real PostgreSQL: what each changes, row by row, that its audit
// row goes in the same transaction (a failing audit insert leaves nothing
// changed), who may call them, and that the list reads the partial index
// rather than the whole deliveries table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <utility>

#include "api/message_routes.h"
#include "schema/message_pages.h"
#include "tests/api/auth_fixture.h"

namespace ductus::api::test {
namespace {

using json = nlohmann::json;

// Hears which interfaces' loops a resend woke.
class WakeRecorder : public EngineView {
 public:
  EngineState state() const override { return EngineState::Serving; }
  EngineInfo engine() const override { return {}; }
  void interfaces(std::function<void(Result<std::vector<InterfaceInfo>>)> done) override {
    done(std::vector<InterfaceInfo>{});
  }
  void wake(const std::string& interface) override {
    std::lock_guard lock(mutex_);
    woken_.push_back(interface);
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(woken_, {});
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> woken_;
};

struct Delivery {
  std::string destination;
  int status;  // 0 pending, 1 sent, 2 filtered, 3 quarantined
  int attempts = 0;
  std::string lastError = {};
};

class MessageRoutesTest : public AuthFixture {
 protected:
  void SetUp() override {
    AuthFixture::SetUp();
    if (HasFatalFailure()) return;
    serveWith([&] { return messageRoutes(deps_.get(), &engine_); });
    if (HasFatalFailure()) return;
    for (const char* table : {"messages", "deliveries"})
      db_.value(std::string("SELECT created FROM ductus_ensure_partitions('") + table +
                "', 7::int2, NULL, 1, 5000)");
    db_.value("INSERT INTO interfaces (name) VALUES ('adt'), ('lab')");
    db_.value(
        "INSERT INTO destinations (interface_id, name) SELECT i.id, d FROM interfaces i, "
        "unnest(ARRAY['ehr', 'billing']) d WHERE i.name = 'adt' "
        "UNION ALL SELECT id, 'lis' FROM interfaces WHERE name = 'lab'");
    ops_ = makeToken("ops", Role::Operator, kNoPermission).token;
    viewer_ = makeToken("watcher", Role::Viewer, kNoPermission).token;
  }

  // A message of `iface` with these deliveries; its status as settle
  // would have left it. Answers its id.
  int64_t message(const std::string& iface, const std::vector<Delivery>& deliveries) {
    int status = 2;
    bool pending = false, quarantined = false, sent = false;
    for (auto& d : deliveries) {
      pending |= d.status == 0;
      quarantined |= d.status == 3;
      sent |= d.status == 1;
    }
    status = pending ? 0 : quarantined ? 3 : sent ? 1 : 2;
    std::string id = db_.value(
        "INSERT INTO messages (tier, interface_id, status, payload) SELECT 7, id, $2::int2, 'MSH|' "
        "FROM interfaces WHERE name = $1 RETURNING id",
        {iface, std::to_string(status)});
    for (auto& d : deliveries)
      db_.value(
          "INSERT INTO deliveries (message_id, destination_id, tier, received_at, status, "
          "attempts, last_error, updated_at) "
          "SELECT m.id, dst.id, m.tier, m.received_at, $3::int2, $4::int4, nullif($5::text, ''), "
          "now() "
          "FROM messages m JOIN destinations dst ON dst.interface_id = m.interface_id "
          "WHERE m.id = $1::int8 AND dst.name = $2",
          {id, d.destination, std::to_string(d.status), std::to_string(d.attempts), d.lastError});
    return std::stoll(id);
  }

  // "ehr:3:5:refused" for each delivery of the message, by destination.
  std::vector<std::string> deliveries(int64_t id) {
    return db_.column(
        "SELECT dst.name || ':' || d.status || ':' || d.attempts || ':' || "
        "coalesce(d.last_error, '') FROM deliveries d JOIN destinations dst ON dst.id = "
        "d.destination_id WHERE d.message_id = $1 ORDER BY dst.name",
        {std::to_string(id)});
  }
  std::string statusOf(int64_t id) {
    return db_.value("SELECT status FROM messages WHERE id = $1", {std::to_string(id)});
  }
  // Every delivery and message, to compare before and after a refused call.
  std::vector<std::string> everything() {
    auto rows = db_.column(
        "SELECT message_id || '/' || destination_id || ':' || status || ':' || attempts || "
        "':' || coalesce(last_error, '') FROM deliveries ORDER BY 1");
    for (auto& m : db_.column("SELECT id || ':' || status FROM messages ORDER BY id"))
      rows.push_back(m);
    return rows;
  }
  std::string auditCount(const std::string& action) {
    return db_.value("SELECT count(*) FROM audit_log WHERE action = $1", {action});
  }

  ductus::test::HttpReply post(const std::string& path, const json& body,
                               const std::string& token) {
    return call("POST", path, bearer(token), body.is_null() ? std::string() : body.dump());
  }

  WakeRecorder engine_;
  std::string ops_, viewer_;
};

std::vector<std::string> rowsOf(const json& page) {
  std::vector<std::string> out;
  for (auto& i : page["items"])
    out.push_back(std::to_string(i["messageId"].get<int64_t>()) + " " +
                  i["interface"].get<std::string>() + "/" + i["destination"].get<std::string>());
  return out;
}

TEST_F(MessageRoutesTest, ListsQuarantinedDeliveriesNewestFirstAndPagesByMessage) {
  auto m1 = message("adt", {{"ehr", 3, 5, "refused"}, {"billing", 1, 1}});
  auto m2 = message("lab", {{"lis", 3, 2, "AE: unknown test"}});
  message("adt", {{"ehr", 1, 1}, {"billing", 1, 1}});
  auto m4 = message("adt", {{"ehr", 3, 5}, {"billing", 3, 5}});
  message("adt", {{"ehr", 0}, {"billing", 0}});
  auto s = [](int64_t id) { return std::to_string(id); };

  auto r = call("GET", "/api/v1/quarantine", bearer(viewer_));
  ASSERT_EQ(r.status, 200) << r.body;
  auto page = bodyOf(r);
  EXPECT_THAT(rowsOf(page), ::testing::ElementsAre(s(m4) + " adt/billing", s(m4) + " adt/ehr",
                                                   s(m2) + " lab/lis", s(m1) + " adt/ehr"));
  EXPECT_TRUE(page["next"].is_null());
  auto last = page["items"][3];
  EXPECT_EQ(last["attempts"], 5);
  EXPECT_EQ(last["lastError"], "refused");
  EXPECT_THAT(last["receivedAt"].get<std::string>(), ::testing::EndsWith("Z"));
  EXPECT_TRUE(last["updatedAt"].is_string());

  // Two messages a page: m4's two deliveries stay together.
  r = call("GET", "/api/v1/quarantine?limit=2", bearer(viewer_));
  ASSERT_EQ(r.status, 200) << r.body;
  page = bodyOf(r);
  EXPECT_THAT(rowsOf(page), ::testing::ElementsAre(s(m4) + " adt/billing", s(m4) + " adt/ehr",
                                                   s(m2) + " lab/lis"));
  ASSERT_EQ(page["next"], m2);
  r = call("GET", "/api/v1/quarantine?limit=2&before=" + s(m2), bearer(viewer_));
  page = bodyOf(r);
  EXPECT_THAT(rowsOf(page), ::testing::ElementsAre(s(m1) + " adt/ehr"));
  EXPECT_TRUE(page["next"].is_null());

  r = call("GET", "/api/v1/quarantine?interface=lab", bearer(viewer_));
  EXPECT_THAT(rowsOf(bodyOf(r)), ::testing::ElementsAre(s(m2) + " lab/lis"));
  r = call("GET", "/api/v1/quarantine?interface=nosuch", bearer(viewer_));
  EXPECT_TRUE(bodyOf(r)["items"].empty()) << r.body;

  EXPECT_EQ(call("GET", "/api/v1/quarantine?limit=0", bearer(viewer_)).status, 400);
  EXPECT_EQ(call("GET", "/api/v1/quarantine?limit=501", bearer(viewer_)).status, 400);
  EXPECT_EQ(call("GET", "/api/v1/quarantine?before=x", bearer(viewer_)).status, 400);
  EXPECT_EQ(call("GET", "/api/v1/quarantine").status, 401);
}

TEST_F(MessageRoutesTest, TheListReadsThePartialIndexNotTheTables) {
  // A day of traffic: 20,000 messages sent, a few quarantined among them.
  db_.value(
      "WITH m AS (INSERT INTO messages (tier, interface_id, status, payload) "
      "SELECT 7, (SELECT id FROM interfaces WHERE name = 'adt'), "
      "CASE WHEN g % 1000 = 0 THEN 3 ELSE 1 END, 'MSH|' FROM generate_series(1, 20000) g "
      "RETURNING id, tier, received_at, status) "
      "INSERT INTO deliveries (message_id, destination_id, tier, received_at, status, attempts) "
      "SELECT m.id, dst.id, m.tier, m.received_at, m.status, 1 FROM m JOIN destinations dst "
      "ON dst.name = 'ehr' RETURNING 1");
  db_.value("ANALYZE messages");
  db_.value("ANALYZE deliveries");
  // Today's partition holds the rows (an empty one beside it costs nothing
  // to scan, and the planner may).
  std::string part = db_.value("SELECT tableoid::regclass FROM deliveries LIMIT 1");
  ASSERT_FALSE(part.empty());
  for (bool filtered : {false, true})
    for (bool paged : {false, true}) {
      auto q = store::quarantineSelect(paged ? std::optional<int64_t>(15000) : std::nullopt, 100,
                                filtered ? std::optional<std::string>("adt") : std::nullopt);
      std::vector<std::string> params;
      for (auto& p : q.params) params.push_back(*p);
      std::string plan;
      for (auto& line : db_.column("EXPLAIN " + q.sql, params)) plan += line + "\n";
      SCOPED_TRACE(plan);
      // The partition's copy of deliveries_quarantined.
      EXPECT_THAT(plan, ::testing::HasSubstr("using " + part + "_message_id_destination_id_idx"));
      EXPECT_THAT(plan, ::testing::Not(::testing::HasSubstr("Seq Scan on " + part + " ")));
      EXPECT_THAT(plan, ::testing::Not(::testing::HasSubstr("Seq Scan on messages")));
    }
  auto r = call("GET", "/api/v1/quarantine?limit=500&interface=adt", bearer(viewer_));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(bodyOf(r)["items"].size(), 20u);
}

TEST_F(MessageRoutesTest, ResendMovesTheQuarantinedDeliveriesBackInPlaceAndAuditsIt) {
  auto m1 = message("adt", {{"ehr", 3, 5, "refused"}, {"billing", 1, 1}});
  auto other = message("adt", {{"ehr", 3, 4, "refused"}, {"billing", 3, 4}});
  auto before = deliveries(other);

  auto r = post("/api/v1/messages/" + std::to_string(m1) + "/resend", nullptr, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  auto b = bodyOf(r);
  EXPECT_EQ(b["deliveries"], 1);
  EXPECT_EQ(b["messages"], 1);
  EXPECT_EQ(b["resent"][0]["destination"], "ehr");
  EXPECT_EQ(b["resent"][0]["interface"], "adt");
  // Attempts kept, the error cleared; the sent delivery untouched.
  EXPECT_THAT(deliveries(m1), ::testing::ElementsAre("billing:1:1:", "ehr:0:5:"));
  EXPECT_EQ(statusOf(m1), "0");
  EXPECT_EQ(deliveries(other), before);
  EXPECT_THAT(engine_.take(), ::testing::ElementsAre("adt"));

  EXPECT_EQ(auditCount("message.resend"), "1");
  EXPECT_EQ(db_.value("SELECT actor || ' ' || target_kind || ' ' || target_id || ' ' || "
                      "target_name || ' ' || (detail->>'deliveries') || ' ' || "
                      "(detail->>'destinations') FROM audit_log WHERE action = 'message.resend'"),
            "ops message " + std::to_string(m1) + " adt 1 quarantined");

  // Nothing quarantined any more: 409, nothing written.
  r = post("/api/v1/messages/" + std::to_string(m1) + "/resend", nullptr, ops_);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(bodyOf(r)["error"], "nothing_to_change");
  EXPECT_EQ(auditCount("message.resend"), "1");
  EXPECT_TRUE(engine_.take().empty());

  r = post("/api/v1/messages/99999999/resend", nullptr, ops_);
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(post("/api/v1/messages/abc/resend", nullptr, ops_).status, 400);
  EXPECT_EQ(post("/api/v1/messages/" + std::to_string(m1) + "/resend",
                 {{"destinations", json::array()}}, ops_)
                .status,
            400);
}

TEST_F(MessageRoutesTest, ResendOfNamedDestinationsTakesThemWhateverTheyEndedAs) {
  auto sent = message("adt", {{"ehr", 1, 1}, {"billing", 1, 2}});
  auto r = post("/api/v1/messages/" + std::to_string(sent) + "/resend",
                {{"destinations", {"billing"}}}, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(bodyOf(r)["deliveries"], 1);
  EXPECT_THAT(deliveries(sent), ::testing::ElementsAre("billing:0:2:", "ehr:1:1:"));
  EXPECT_EQ(statusOf(sent), "0");
  // billing is pending now, and no destination "lis" in adt: nothing to do.
  r = post("/api/v1/messages/" + std::to_string(sent) + "/resend",
           {{"destinations", {"billing", "lis"}}}, ops_);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(db_.value("SELECT detail->'destinations'->>0 FROM audit_log "
                      "WHERE action = 'message.resend'"),
            "billing");
}

TEST_F(MessageRoutesTest, AResendsReasonIsKeptInItsAuditRowAndABadOneRefused) {
  auto sent = message("adt", {{"ehr", 1, 1}, {"billing", 1, 2}});
  auto path = "/api/v1/messages/" + std::to_string(sent) + "/resend";
  EXPECT_EQ(post(path, {{"destinations", {"ehr"}}, {"reason", 7}}, ops_).status, 400);
  EXPECT_EQ(
      post(path, {{"destinations", {"ehr"}}, {"reason", std::string(1001, 'x')}}, ops_).status,
      400);
  auto r = post(path, {{"destinations", {"ehr"}}, {"reason", "the lab asked for a replay"}}, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(db_.value("SELECT detail->>'reason' FROM audit_log WHERE action = 'message.resend'"),
            "the lab asked for a replay");
  EXPECT_THAT(deliveries(sent), ::testing::ElementsAre("billing:1:2:", "ehr:0:1:"));
}

TEST_F(MessageRoutesTest, BatchResendChangesEveryMessageInOneTransaction) {
  auto m1 = message("adt", {{"ehr", 3, 5}, {"billing", 1, 1}});
  auto m2 = message("lab", {{"lis", 3, 2}});
  auto m3 = message("adt", {{"ehr", 3, 5}, {"billing", 3, 5}});
  auto untouched = message("adt", {{"ehr", 3, 5}, {"billing", 1, 1}});
  auto snapshot = everything();

  // One id missing: 404 and nothing changed.
  auto r = post("/api/v1/messages/resend", {{"ids", {m1, m2, 99999999}}}, ops_);
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_THAT(bodyOf(r)["message"].get<std::string>(), ::testing::HasSubstr("99999999"));
  EXPECT_EQ(everything(), snapshot);

  r = post("/api/v1/messages/resend", {{"ids", {m3, m1, m2, m1}}}, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(bodyOf(r)["deliveries"], 4);
  EXPECT_EQ(bodyOf(r)["messages"], 3);
  EXPECT_THAT(deliveries(m1), ::testing::ElementsAre("billing:1:1:", "ehr:0:5:"));
  EXPECT_THAT(deliveries(m2), ::testing::ElementsAre("lis:0:2:"));
  EXPECT_THAT(deliveries(m3), ::testing::ElementsAre("billing:0:5:", "ehr:0:5:"));
  EXPECT_THAT(deliveries(untouched), ::testing::ElementsAre("billing:1:1:", "ehr:3:5:"));
  for (auto id : {m1, m2, m3}) EXPECT_EQ(statusOf(id), "0");
  EXPECT_THAT(engine_.take(), ::testing::UnorderedElementsAre("adt", "lab"));
  EXPECT_EQ(db_.value("SELECT target_id || ' ' || (detail->>'messages') FROM audit_log "
                      "WHERE action = 'message.resend'"),
            std::to_string(m1) + "," + std::to_string(m2) + "," + std::to_string(m3) + " 3");

  std::vector<int64_t> tooMany(kMaxResendIds + 1, m1);
  EXPECT_EQ(post("/api/v1/messages/resend", {{"ids", tooMany}}, ops_).status, 400);
  EXPECT_EQ(post("/api/v1/messages/resend", {{"ids", json::array()}}, ops_).status, 400);
  EXPECT_EQ(post("/api/v1/messages/resend", {{"ids", {"1"}}}, ops_).status, 400);
}

TEST_F(MessageRoutesTest, WithoutItsAuditRowNothingChanges) {
  auto m1 = message("adt", {{"ehr", 3, 5, "refused"}, {"billing", 1, 1}});
  db_.value(
      "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$ "
      "BEGIN RAISE EXCEPTION 'audit refused by the test'; END $$");
  db_.value(
      "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log FOR EACH ROW "
      "EXECUTE FUNCTION refuse_audit()");
  auto snapshot = everything();
  auto one = "/api/v1/messages/" + std::to_string(m1);

  auto r = post(one + "/resend", nullptr, ops_);
  EXPECT_EQ(r.status, 503) << r.body;
  r = post("/api/v1/messages/resend", {{"ids", {m1}}}, ops_);
  EXPECT_EQ(r.status, 503) << r.body;
  r = post(one + "/dismiss", {{"reason", "known bad"}}, ops_);
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(everything(), snapshot);
  EXPECT_TRUE(engine_.take().empty());

  // The same calls go through once the audit row can be written.
  db_.value("DROP TRIGGER refuse_audit ON audit_log");
  EXPECT_EQ(post(one + "/resend", nullptr, ops_).status, 200);
  EXPECT_EQ(auditCount("message.resend"), "1");
}

TEST_F(MessageRoutesTest, DismissFiltersTheQuarantinedDeliveriesWithWhoAndWhy) {
  auto m1 = message("adt", {{"ehr", 3, 5, "refused"}, {"billing", 1, 1}});
  auto m2 = message("adt", {{"ehr", 3, 5}, {"billing", 3, 5}});
  auto m3 = message("adt", {{"ehr", 3, 5}, {"billing", 0, 1}});
  auto path = [](int64_t id) { return "/api/v1/messages/" + std::to_string(id) + "/dismiss"; };
  auto snapshot = everything();

  EXPECT_EQ(post(path(m1), nullptr, ops_).status, 400);
  EXPECT_EQ(post(path(m1), json::object(), ops_).status, 400);
  EXPECT_EQ(post(path(m1), {{"reason", "  "}}, ops_).status, 400);
  EXPECT_EQ(post(path(m1), {{"reason", std::string(1001, 'x')}}, ops_).status, 400);
  EXPECT_EQ(post(path(99999999), {{"reason", "x"}}, ops_).status, 404);
  // A NUL is refused in the engine's words, before PostgreSQL can refuse
  // it in its own (with the audit row's JSON).
  auto nul = post(path(m1), {{"reason", std::string("sent\0by hand", 12)}}, ops_);
  EXPECT_EQ(nul.status, 400) << nul.body;
  for (const char* mark : {"ERROR:", "CONTEXT", "HINT", "portal", "audit", "\\u0000by"})
    EXPECT_THAT(nul.body, ::testing::Not(::testing::HasSubstr(mark)));
  EXPECT_EQ(everything(), snapshot);

  auto r = post(path(m1), {{"reason", "sent by hand"}}, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(bodyOf(r)["deliveries"], 1);
  // The other destination sent it: the message settles as sent.
  EXPECT_EQ(bodyOf(r)["messageStatus"], "sent");
  EXPECT_THAT(deliveries(m1),
              ::testing::ElementsAre("billing:1:1:", "ehr:2:5:dismissed by ops: sent by hand"));
  EXPECT_EQ(statusOf(m1), "1");

  r = post(path(m2), {{"reason", "test feed"}}, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(bodyOf(r)["deliveries"], 2);
  EXPECT_EQ(statusOf(m2), "2");
  // Still pending elsewhere: the message stays pending.
  r = post(path(m3), {{"reason", "test feed"}}, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(deliveries(m3),
              ::testing::ElementsAre("billing:0:1:", "ehr:2:5:dismissed by ops: test feed"));
  EXPECT_EQ(statusOf(m3), "0");

  EXPECT_EQ(post(path(m2), {{"reason", "again"}}, ops_).status, 409);
  EXPECT_EQ(auditCount("message.dismiss"), "3");
  EXPECT_EQ(db_.value("SELECT target_id || ' ' || (detail->>'reason') || ' ' || "
                      "(detail->>'deliveries') FROM audit_log WHERE action = 'message.dismiss' "
                      "ORDER BY id LIMIT 1"),
            std::to_string(m1) + " sent by hand 1");
  EXPECT_TRUE(engine_.take().empty());
}

TEST_F(MessageRoutesTest, OnlyOperatorsChangeAndASessionMustSayXDuctus) {
  auto m1 = message("adt", {{"ehr", 3, 5}, {"billing", 3, 5}});
  auto snapshot = everything();
  auto one = "/api/v1/messages/" + std::to_string(m1);
  EXPECT_EQ(post(one + "/resend", nullptr, viewer_).status, 403);
  EXPECT_EQ(post("/api/v1/messages/resend", {{"ids", {m1}}}, viewer_).status, 403);
  EXPECT_EQ(post(one + "/dismiss", {{"reason", "x"}}, viewer_).status, 403);
  EXPECT_EQ(call("POST", one + "/resend").status, 401);

  makeUser("olga", Role::Operator, kNoPermission, "a long enough password");
  auto session = sessionOf(signIn("olga", "a long enough password"));
  ASSERT_FALSE(session.empty());
  auto r = call("POST", one + "/resend", cookie(session));
  EXPECT_EQ(r.status, 403) << r.body;
  r = call("POST", one + "/dismiss", cookie(session), json{{"reason", "x"}}.dump());
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(everything(), snapshot);
  EXPECT_EQ(auditCount("message.resend"), "0");

  r = call("POST", one + "/dismiss", cookie(session, true), json{{"reason", "x"}}.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(deliveries(m1), ::testing::Each(::testing::EndsWith("dismissed by olga: x")));
}

}  // namespace
}  // namespace ductus::api::test
