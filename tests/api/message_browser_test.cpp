// The message browser over real HTTP and a real PostgreSQL: an interface's
// messages paged and filtered, a search by control id or key value finding
// its message, one message with its deliveries, the payload read (its
// audit row written first, and no payload without it), and the edited copy
// (exactly the rows it says, its audit row in the same transaction, refused
// while the original is pending); who may call each; and the browser's
// three lookups reading their indexes on a table of some size.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>

#include "api/message_browser.h"
#include "api/message_export.h"
#include "intake/message_keys.h"
#include "intake/payload_check.h"
#include "schema/message_pages.h"
#include "tests/api/api_harness.h"
#include "tests/api/auth_fixture.h"

namespace ductus::api::test {
namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The engine as the edit needs it: "adt" is run here (its keys: the lane
// from PID-3.1 over 4 lanes, dedupe on MSH-10), "lab" is not.
class FakeEngine : public EngineView {
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
  Result<MessageKeysView> readKeys(const std::string& interface,
                                   std::string_view payload) override {
    if (interface != "adt") return Error{interface + " is not run here", ErrorKind::NotRunHere};
    intake::KeySpec spec;
    spec.orderingKey = "PID.3.1";
    spec.partitions = 4;
    spec.dedupeKey = "MSH.10";
    auto k = intake::keysOf(spec, payload);
    MessageKeysView v;
    v.interfaceId = adtId;
    v.tier = 7;
    v.destinationIds = adtDestinations;
    v.lane = k.lane;
    v.dedupeKey = k.dedupe;
    v.columns = k.columns;
    return v;
  }
  // intake's own check, as the engine's adapter makes it: HL7 v2, a
  // 64 KB max_message_size.
  Result<PayloadCheckInfo> checkPayload(const std::string& interface,
                                        std::string_view payload) override {
    if (interface != "adt") return Error{interface + " is not run here", ErrorKind::NotRunHere};
    PayloadCheckInfo c{"hl7v2", kMaxBytes, {}};
    if (auto p = intake::checkPayload(config::Format::Hl7v2, payload, kMaxBytes))
      c.problems.push_back({p->text, p->line, p->column, p->segment, p->field});
    return c;
  }
  static constexpr uint64_t kMaxBytes = 64 * 1024;
  std::vector<std::string> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(woken_, {});
  }

  int64_t adtId = 0;
  std::vector<int64_t> adtDestinations;

 private:
  std::mutex mutex_;
  std::vector<std::string> woken_;
};

struct Delivery {
  std::string destination;
  int status;  // 0 pending, 1 sent, 2 filtered, 3 quarantined
  int attempts = 0;
  std::string lastError = {};
  std::string output = {};  // saved when not empty
};

struct Message {
  std::string iface = "adt";
  std::string payload = "MSH|^~\\&|A|B|C|D|1||ADT^A01|C1|P|2.5\rPID|1||M1\r";
  std::string type = "ADT^A01^ADT_A01";
  std::string control = "";
  std::string key = "";
  std::string charset = "";
  std::vector<Delivery> deliveries = {};
  int status = -1;  // -1: as settle leaves it after the deliveries
};

std::string hex(std::string_view bytes) {
  static const char* d = "0123456789abcdef";
  std::string out = "\\x";
  for (char c : bytes) {
    out += d[static_cast<unsigned char>(c) >> 4];
    out += d[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

class MessageBrowserTest : public AuthFixture {
 protected:
  void SetUp() override {
    AuthFixture::SetUp();
    if (HasFatalFailure()) return;
    serveWith([&] {
      auto routes = messageBrowserRoutes(deps_.get(), &engine_);
      for (auto& r : messageExportRoutes(deps_.get(), &engine_)) routes.push_back(std::move(r));
      return routes;
    });
    if (HasFatalFailure()) return;
    // From yesterday: the time filter's test moves messages an hour back.
    for (const char* table : {"messages", "deliveries"})
      db_.value(std::string("SELECT created FROM ductus_ensure_partitions('") + table +
                "', 7::int2, (now() AT TIME ZONE 'UTC')::date - 1, 2, 5000)");
    db_.value("INSERT INTO interfaces (name) VALUES ('adt'), ('lab')");
    db_.value(
        "INSERT INTO destinations (interface_id, name) SELECT i.id, d FROM interfaces i, "
        "unnest(ARRAY['ehr', 'billing']) d WHERE i.name = 'adt' "
        "UNION ALL SELECT id, 'lis' FROM interfaces WHERE name = 'lab'");
    engine_.adtId = std::stoll(db_.value("SELECT id FROM interfaces WHERE name = 'adt'"));
    for (auto& id : db_.column("SELECT d.id FROM destinations d JOIN interfaces i ON i.id = "
                               "d.interface_id WHERE i.name = 'adt' ORDER BY d.name"))
      engine_.adtDestinations.push_back(std::stoll(id));
    ops_ = makeToken("ops", Role::Operator, kNoPermission).token;
    viewer_ = makeToken("watcher", Role::Viewer, kNoPermission).token;
    reader_ = makeToken("reader", Role::Viewer, kPayloads).token;
  }

  int64_t message(const Message& m) {
    int status = m.status;
    if (status < 0) {
      bool pending = false, quarantined = false, sent = false;
      for (auto& d : m.deliveries) {
        pending |= d.status == 0;
        quarantined |= d.status == 3;
        sent |= d.status == 1;
      }
      status = pending ? 0 : quarantined ? 3 : sent ? 1 : 2;
    }
    std::string id = db_.value(
        "INSERT INTO messages (tier, interface_id, status, payload, message_type, control_id, "
        "key_value, charset) SELECT 7, id, $2::int2, $3::bytea, nullif($4, ''), nullif($5, ''), "
        "nullif($6, ''), nullif($7, '') FROM interfaces WHERE name = $1 RETURNING id",
        {m.iface, std::to_string(status), hex(m.payload), m.type, m.control, m.key, m.charset});
    for (auto& d : m.deliveries)
      db_.value(
          "INSERT INTO deliveries (message_id, destination_id, tier, received_at, status, "
          "attempts, last_error, output, updated_at) "
          "SELECT m.id, dst.id, m.tier, m.received_at, $3::int2, $4::int4, nullif($5::text, ''), "
          "CASE WHEN $6 = '\\x' THEN NULL ELSE $6::bytea END, now() "
          "FROM messages m JOIN destinations dst ON dst.interface_id = m.interface_id "
          "WHERE m.id = $1::int8 AND dst.name = $2",
          {id, d.destination, std::to_string(d.status), std::to_string(d.attempts), d.lastError,
           hex(d.output)});
    return std::stoll(id);
  }

  std::vector<std::string> deliveries(int64_t id) {
    return db_.column(
        "SELECT dst.name || ':' || d.status || ':' || d.attempts || ':' || "
        "coalesce(d.last_error, '') FROM deliveries d JOIN destinations dst ON dst.id = "
        "d.destination_id WHERE d.message_id = $1 ORDER BY dst.name",
        {std::to_string(id)});
  }
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
  void refuseAudit() {
    db_.value(
        "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN RAISE EXCEPTION 'audit refused by the test'; END $$");
    db_.value(
        "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log FOR EACH ROW "
        "EXECUTE FUNCTION refuse_audit()");
  }

  ductus::test::HttpReply get(const std::string& path, const std::string& token) {
    return call("GET", path, bearer(token));
  }
  ductus::test::HttpReply post(const std::string& path, const json& body,
                               const std::string& token) {
    return call("POST", path, bearer(token), body.is_null() ? std::string() : body.dump());
  }
  // The ids of a page, newest first.
  std::vector<int64_t> ids(const std::string& query) {
    auto r = get("/api/v1/interfaces/adt/messages" + query, viewer_);
    EXPECT_EQ(r.status, 200) << query << ": " << r.body;
    std::vector<int64_t> out;
    auto page = bodyOf(r);
    for (auto& i : page["items"]) out.push_back(i["id"].get<int64_t>());
    return out;
  }

  FakeEngine engine_;
  std::string ops_, viewer_, reader_;
};

TEST_F(MessageBrowserTest, EveryRouteRefusesACallerWithoutItsRoleOrPermission) {
  auto m = message({.deliveries = {{"ehr", 3, 1}}});
  auto one = "/api/v1/messages/" + std::to_string(m);
  json edit{{"payload", "MSH|^~\\&|A|B|C|D|1||ADT^A01|C2|P|2.5\r"}};
  for (auto path : {std::string("/api/v1/interfaces/adt/messages"), one, one + "/payload"}) {
    auto r = call("GET", path);
    EXPECT_EQ(r.status, 401) << path;
    EXPECT_FALSE(errorOf(r)["error"].is_null()) << r.body;
  }
  EXPECT_EQ(call("POST", one + "/edit", {}, edit.dump()).status, 401);
  // A viewer reads metadata, not payloads, and changes nothing.
  EXPECT_EQ(get(one, viewer_).status, 200);
  auto r = get(one + "/payload", viewer_);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(get(one + "/payload", ops_).status, 403);  // operators need `payloads` too
  r = post(one + "/edit", edit, viewer_);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(errorOf(r)["error"], "forbidden");
  r = post(one + "/edit", edit, reader_);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(auditCount("message.payload"), "0");
  EXPECT_EQ(auditCount("message.edit"), "0");
}

TEST_F(MessageBrowserTest, PagesNewestFirstByIdAndFiltersEachWay) {
  auto a1 = message({.control = "C-1", .key = "MRN-1", .deliveries = {{"ehr", 1, 1}}});
  auto a2 = message({.type = "ADT^A08", .control = "C-2", .key = "MRN-2",
                     .deliveries = {{"ehr", 3, 5, "refused"}, {"billing", 1, 1}}});
  auto a3 = message({.type = "ADT^A011", .control = "C-3", .key = "MRN-1",
                     .deliveries = {{"ehr", 0}}});
  auto a4 = message({.type = "ORU^R01", .control = "C-4", .deliveries = {{"ehr", 2, 1}}});
  auto a5 = message({.type = "ADT^A01", .control = "C-5", .key = "MRN-1", .status = 4});
  auto other = message({.iface = "lab", .control = "C-1", .key = "MRN-1"});
  (void)other;

  EXPECT_THAT(ids(""), ElementsAre(a5, a4, a3, a2, a1));
  auto r = get("/api/v1/interfaces/adt/messages?limit=2", viewer_);
  ASSERT_EQ(r.status, 200) << r.body;
  auto page = bodyOf(r);
  ASSERT_EQ(page["items"].size(), 2u);
  ASSERT_EQ(page["next"], a4);
  EXPECT_THAT(ids("?limit=2&before=" + std::to_string(a4)), ElementsAre(a3, a2));
  r = get("/api/v1/interfaces/adt/messages?limit=5", viewer_);
  EXPECT_TRUE(bodyOf(r)["next"].is_null()) << "no next page after the last message";

  // An item: what it is and where it went.
  r = get("/api/v1/interfaces/adt/messages?control_id=C-2", viewer_);
  auto item = bodyOf(r)["items"][0];
  EXPECT_EQ(item["id"], a2);
  EXPECT_EQ(item["status"], "quarantined");
  EXPECT_EQ(item["type"], "ADT^A08");
  EXPECT_EQ(item["controlId"], "C-2");
  EXPECT_EQ(item["key"], "MRN-2");
  EXPECT_THAT(item["receivedAt"].get<std::string>(), ::testing::EndsWith("Z"));
  EXPECT_EQ(item["interface"], "adt");
  EXPECT_EQ(item["deliveries"],
            json::parse(R"([{"destination":"billing","status":"sent","attempts":1,
                             "lastError":null,"paused":false},
                            {"destination":"ehr","status":"quarantined","attempts":5,
                             "lastError":"refused","paused":false}])"));
  EXPECT_TRUE(item["duplicateOf"].is_null());
  EXPECT_TRUE(item["editedFrom"].is_null());
  EXPECT_EQ(item["editedTo"], json::array());

  EXPECT_THAT(ids("?status=quarantined"), ElementsAre(a2));
  EXPECT_THAT(ids("?status=duplicate"), ElementsAre(a5));
  EXPECT_THAT(ids("?status=pending"), ElementsAre(a3));
  // The type: equal, or its first components; never part of one.
  EXPECT_THAT(ids("?type=ADT%5EA01"), ElementsAre(a5, a1));
  EXPECT_THAT(ids("?type=ADT"), ElementsAre(a5, a3, a2, a1));
  EXPECT_THAT(ids("?type=ADT%5EA0"), ElementsAre());
  EXPECT_THAT(ids("?type=ADT%5EA01%5EADT_A01"), ElementsAre(a1));
  // Search by control id and by key value finds the message (this
  // interface's only).
  EXPECT_THAT(ids("?control_id=C-1"), ElementsAre(a1));
  EXPECT_THAT(ids("?key=MRN-1"), ElementsAre(a5, a3, a1));
  EXPECT_THAT(ids("?key=MRN-1&limit=1&before=" + std::to_string(a5)), ElementsAre(a3));
  EXPECT_THAT(ids("?key=MRN-1&type=ADT%5EA01&status=sent"), ElementsAre(a1));

  // Time: from inclusive, to exclusive.
  db_.value("UPDATE messages SET received_at = received_at - interval '1 hour' WHERE id <= $1",
            {std::to_string(a2)});
  std::string cut = db_.value(
      "SELECT to_char(received_at AT TIME ZONE 'UTC' + interval '1 minute', "
      "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM messages WHERE id = $1",
      {std::to_string(a2)});
  EXPECT_THAT(ids("?to=" + cut), ElementsAre(a2, a1));
  EXPECT_THAT(ids("?from=" + cut), ElementsAre(a5, a4, a3));
  EXPECT_THAT(ids("?from=2000-01-01T00:00:00%2B02:00&to=" + cut + "&status=sent"),
              ElementsAre(a1));

  // A wrong parameter is named.
  for (auto [query, name] : std::vector<std::pair<std::string, std::string>>{
           {"limit=0", "limit"},
           {"limit=501", "limit"},
           {"before=x", "before"},
           {"after=-1", "after"},
           {"after=12a", "after"},
           {"order=sideways", "order"},
           {"order=", "order"},
           {"status=lost", "status"},
           {"status=error", "status"},
           {"from=yesterday", "from"},
           {"to=2026-13-01T00:00:00Z", "to"},
           {"from=2026-02-30T00:00:00Z", "from"},
           // Before 1970 or past 9999: PostgreSQL's own refusal never shows.
           {"from=0000-01-01T00:00:00Z", "from"},
           {"to=1969-12-31T23:59:59Z", "to"},
           {"control_id=", "control_id"}}) {
    r = get("/api/v1/interfaces/adt/messages?" + query, viewer_);
    EXPECT_EQ(r.status, 400) << query;
    EXPECT_THAT(errorOf(r)["message"].get<std::string>(), HasSubstr("`" + name + "`")) << query;
    for (const char* mark : {"ERROR:", "CONTEXT", "HINT", "portal", "timestamptz"})
      EXPECT_THAT(r.body, ::testing::Not(HasSubstr(mark))) << query;
  }
  EXPECT_EQ(get("/api/v1/interfaces/adt/messages?sort=asc", viewer_).status, 400);
  r = get("/api/v1/interfaces/nosuch/messages", viewer_);
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(errorOf(r)["error"], "not_found");
}

TEST_F(MessageBrowserTest, AKeyTooLongForTheIndexIsFoundByItsHash) {
  std::string longKey(600, 'k');
  auto m = message({.key = store::searchableText(longKey)});
  EXPECT_THAT(ids("?key=" + longKey), ElementsAre(m));
}

TEST_F(MessageBrowserTest, TheBrowsersLookupsAreIndexScans) {
  // A day of traffic: 30,000 messages, a few hundred patients, each sent to
  // ehr; a backlog of 2,000 waiting for billing, five of them retried.
  db_.value(
      "INSERT INTO messages (tier, interface_id, status, payload, message_type, control_id, "
      "key_value) SELECT 7, (SELECT id FROM interfaces WHERE name = 'adt'), 1, 'MSH|', "
      "'ADT^A01', 'CTL-' || g, 'MRN-' || (g % 300) FROM generate_series(1, 30000) g");
  db_.value(
      "INSERT INTO messages (tier, interface_id, status, payload) SELECT 7, (SELECT id FROM "
      "interfaces WHERE name = 'lab'), 1, '{}' FROM generate_series(1, 30000) g");
  db_.value(
      "INSERT INTO deliveries (message_id, destination_id, tier, received_at, status, attempts) "
      "SELECT m.id, dst.id, m.tier, m.received_at, 1, 1 FROM messages m JOIN destinations dst "
      "ON dst.interface_id = m.interface_id AND dst.name IN ('ehr', 'lis')");
  db_.value(
      "INSERT INTO deliveries (message_id, destination_id, tier, received_at, status, attempts) "
      "SELECT m.id, dst.id, m.tier, m.received_at, 0, CASE WHEN m.id % 400 = 0 THEN 3 ELSE 0 "
      "END FROM (SELECT * FROM messages WHERE message_type IS NOT NULL ORDER BY id DESC "
      "LIMIT 2000) m JOIN destinations dst ON dst.interface_id = m.interface_id "
      "AND dst.name = 'billing'");
  db_.value("ANALYZE messages");
  db_.value("ANALYZE deliveries");
  int64_t adt = engine_.adtId;
  std::string part = db_.value(
      "SELECT tableoid::regclass FROM messages WHERE interface_id = $1 LIMIT 1",
      {std::to_string(adt)});
  ASSERT_FALSE(part.empty());
  std::string dpart = "deliveries" + part.substr(std::string("messages").size());
  std::string from = db_.value(
      "SELECT to_char(now() AT TIME ZONE 'UTC' - interval '1 hour', "
      "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')");
  std::string to = db_.value(
      "SELECT to_char(now() AT TIME ZONE 'UTC' + interval '1 hour', "
      "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')");
  struct Case {
    store::BrowseQuery q;
    std::string index;
    bool count = false;  // browseCount instead of browseSelect
    // A bitmap of the index is as good: the planner expects fewer matches
    // than the count's cap (a patient's hundred), so it reads them all.
    bool bitmap = false;
  };
  auto query = [adt](std::function<void(store::BrowseQuery&)> set) {
    store::BrowseQuery q;
    q.interfaceId = adt;
    set(q);
    return q;
  };
  auto everywhere = [](std::function<void(store::BrowseQuery&)> set) {
    store::BrowseQuery q;
    set(q);
    return q;
  };
  auto oldest = store::BrowseOrder::OldestFirst;
  std::vector<Case> cases{
      {query([](auto&) {}), "interface_id_id_idx"},
      {query([](auto& q) { q.before = 20000; }), "interface_id_id_idx"},
      // Oldest first: the same index, forward, from the head.
      {query([&](auto& q) { q.order = oldest; }), "interface_id_id_idx"},
      {query([&](auto& q) {
         q.order = oldest;
         q.after = 20000;
       }),
       "interface_id_id_idx"},
      // Through the deliveries' partial indexes, then each message by id.
      {query([](auto& q) { q.status = store::MessageStatus::Quarantined; }),
       "message_id_destination_id_idx"},
      {query([](auto& q) { q.errors = true; }), "message_id_destination_id_idx"},
      {query([&](auto& q) {
         q.errors = true;
         q.order = oldest;
         q.after = 100;
       }),
       "message_id_destination_id_idx"},
      // The one control id index (migration 0015's; 0019 dropped the one
      // with the interface first): the value is nearly unique.
      {query([](auto& q) { q.controlId = "CTL-777"; }), "control_id_id_idx"},
      {query([](auto& q) { q.key = "MRN-42"; }), "interface_id_key_value_id_idx"},
      {query([](auto& q) {
         q.before = 20000;
         q.key = "MRN-42";
       }),
       "interface_id_key_value_id_idx"},
      {query([&](auto& q) {
         q.key = "MRN-42";
         q.order = oldest;
       }),
       "interface_id_key_value_id_idx"},
      // Across interfaces: migration 0015's indexes.
      {everywhere([](auto& q) { q.controlId = "CTL-777"; }), "control_id_id_idx"},
      {everywhere([](auto& q) { q.key = "MRN-42"; }), "key_value_id_idx"},
      {everywhere([&](auto& q) {
         q.key = "MRN-42";
         q.order = oldest;
         q.after = 100;
       }),
       "key_value_id_idx"},
      // A content search walks the window in id order.
      {query([&](auto& q) {
         q.contains = {"M1"};
         q.from = from;
         q.to = to;
       }),
       "interface_id_id_idx"},
      // Totals: the same indexes, stopped at 1,001.
      {query([](auto&) {}), "interface_id_id_idx", true},
      {query([](auto& q) { q.errors = true; }), "message_id_destination_id_idx", true},
      {everywhere([](auto& q) { q.key = "MRN-42"; }), "key_value_id_idx", true, true},
  };
  // The store's connections plan generically (see Store); the test checks
  // both plans.
  for (const char* mode : {"auto", "force_generic_plan"}) {
    db_.value(std::string("SELECT set_config('plan_cache_mode', '") + mode + "', false)");
    for (size_t i = 0; i < cases.size(); ++i) {
      auto& c = cases[i];
      auto s = c.count ? store::browseCount(c.q) : store::browseSelect(c.q);
      std::vector<std::string> params;
      for (auto& p : s.params) params.push_back(*p);
      std::string plan;
      for (auto& line : db_.column("EXPLAIN " + s.sql, params)) plan += line + "\n";
      SCOPED_TRACE(std::string(mode) + " case " + std::to_string(i) + "\n" + plan);
      EXPECT_THAT(plan, HasSubstr("Index"));
      bool viaDeliveries = c.index.starts_with("message_id");
      EXPECT_THAT(plan, HasSubstr((viaDeliveries ? dpart : part) + "_" + c.index));
      for (auto& big : {part, dpart})
        EXPECT_THAT(plan, ::testing::Not(HasSubstr("Seq Scan on " + big)));
      if (!c.bitmap) {
        EXPECT_THAT(plan, ::testing::Not(HasSubstr("Bitmap Heap Scan on " + part)));
      }
      // Retried deliveries come from their own partial index (a bitmap of
      // it reads only them), never from the backlog's queue index.
      if (c.q.errors) {
        EXPECT_THAT(plan, ::testing::Not(HasSubstr(dpart + "_destination_id_message_id")));
      } else {
        EXPECT_THAT(plan, ::testing::Not(HasSubstr("Bitmap Heap Scan on " + dpart)));
      }
    }
  }
  db_.value("SELECT set_config('plan_cache_mode', 'auto', false)");
  EXPECT_EQ(ids("?control_id=CTL-777").size(), 1u);
  EXPECT_EQ(ids("?key=MRN-42&limit=500").size(), 100u);
  EXPECT_EQ(ids("?status=errors&limit=500").size(), 5u);
  auto total = bodyOf(get("/api/v1/interfaces/adt/messages", viewer_))["total"];
  EXPECT_EQ(total, json::parse(R"({"count":1000,"exact":false})"));
}

TEST_F(MessageBrowserTest, OneMessageWithItsDeliveries) {
  auto m = message({.control = "C-9", .key = "MRN-9",
                    .deliveries = {{"ehr", 3, 5, "AE: unknown patient"},
                                   {"billing", 1, 1, "", "OUT"}}});
  auto r = get("/api/v1/messages/" + std::to_string(m), viewer_);
  ASSERT_EQ(r.status, 200) << r.body;
  auto b = bodyOf(r);
  EXPECT_EQ(b["id"], m);
  EXPECT_EQ(b["interface"], "adt");
  EXPECT_EQ(b["status"], "quarantined");
  EXPECT_EQ(b["controlId"], "C-9");
  EXPECT_EQ(b["key"], "MRN-9");
  EXPECT_TRUE(b["originId"].is_null());
  EXPECT_EQ(b["bytes"], Message{}.payload.size());
  ASSERT_EQ(b["deliveries"].size(), 2u);
  auto billing = b["deliveries"][0], ehr = b["deliveries"][1];
  EXPECT_EQ(billing["destination"], "billing");
  EXPECT_EQ(billing["outputSaved"], true);
  EXPECT_EQ(ehr["status"], "quarantined");
  EXPECT_EQ(ehr["attempts"], 5);
  EXPECT_EQ(ehr["lastError"], "AE: unknown patient");
  EXPECT_EQ(ehr["outputSaved"], false);
  EXPECT_THAT(ehr["updatedAt"].get<std::string>(), ::testing::EndsWith("Z"));
  EXPECT_FALSE(r.body.find("PID") != std::string::npos) << "metadata only";

  EXPECT_EQ(get("/api/v1/messages/99999999", viewer_).status, 404);
  EXPECT_EQ(get("/api/v1/messages/x", viewer_).status, 400);
}

TEST_F(MessageBrowserTest, APayloadReadIsAuditedFirstAndGivenAsTheTextItWasReadAs) {
  auto utf8 = message({.payload = "MSH|^~\\&|A|B|C|D|1||ADT^A01|C1|P|2.5\rPID|1||M\xc3\xbc\r",
                       .deliveries = {{"ehr", 1, 1, "", "OUT\xc3\xa9"}, {"billing", 1, 1}}});
  auto latin1 = message(
      {.payload = "MSH|^~\\&|A|B|C|D|1||ADT^A01|C1|P|2.5||||||8859/1\rPID|1||M\xfc\r",
       .charset = "iso-8859-1"});
  auto undeclared = message({.payload = "PID|1||M\xfc\r"});
  auto binary = message({.payload = std::string("A\0B", 3)});

  auto r = get("/api/v1/messages/" + std::to_string(utf8) + "/payload", reader_);
  ASSERT_EQ(r.status, 200) << r.body;
  auto b = bodyOf(r);
  EXPECT_EQ(b["encoding"], "text");
  EXPECT_EQ(b["charset"], "utf-8");
  EXPECT_EQ(b["payload"], "MSH|^~\\&|A|B|C|D|1||ADT^A01|C1|P|2.5\rPID|1||M\xc3\xbc\r");
  ASSERT_EQ(b["outputs"].size(), 1u);
  EXPECT_EQ(b["outputs"][0]["destination"], "ehr");
  EXPECT_EQ(b["outputs"][0]["output"], "OUT\xc3\xa9");
  EXPECT_EQ(db_.value("SELECT actor || ' ' || target_kind || ' ' || target_id FROM audit_log "
                      "WHERE action = 'message.payload'"),
            "reader message " + std::to_string(utf8));

  b = bodyOf(get("/api/v1/messages/" + std::to_string(latin1) + "/payload", reader_));
  EXPECT_EQ(b["charset"], "iso-8859-1");
  EXPECT_THAT(b["payload"].get<std::string>(), ::testing::EndsWith("PID|1||M\xc3\xbc\r"));
  b = bodyOf(get("/api/v1/messages/" + std::to_string(undeclared) + "/payload", reader_));
  EXPECT_EQ(b["charset"], "iso-8859-1");  // not UTF-8: read as the SDK reads it
  EXPECT_EQ(b["payload"], "PID|1||M\xc3\xbc\r");
  b = bodyOf(get("/api/v1/messages/" + std::to_string(binary) + "/payload", reader_));
  EXPECT_EQ(b["encoding"], "base64");
  EXPECT_EQ(b["payload"], "QQBC");
  EXPECT_EQ(auditCount("message.payload"), "4");
  EXPECT_EQ(get("/api/v1/messages/99999999/payload", reader_).status, 404);

  // No audit row, no payload.
  refuseAudit();
  r = get("/api/v1/messages/" + std::to_string(utf8) + "/payload", reader_);
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(errorOf(r)["error"], "unavailable");
  EXPECT_EQ(r.body.find("PID"), std::string::npos) << r.body;
  EXPECT_EQ(r.header("retry-after"), "1");
}

TEST_F(MessageBrowserTest, EditStoresACorrectedCopyAndReplacesTheQuarantinedDeliveries) {
  auto original = message({.control = "C-1", .key = "M1",
                           .deliveries = {{"ehr", 3, 5, "AE: unknown patient"},
                                          {"billing", 1, 1}}});
  auto bystander = message({.deliveries = {{"ehr", 3, 2, "refused"}}});
  auto before = deliveries(bystander);
  std::string fixed = "MSH|^~\\&|A|B|C|D|1||ADT^A08|C-1|P|2.5\rPID|1||MRN-77^^^H\r";

  auto r = post("/api/v1/messages/" + std::to_string(original) + "/edit",
                {{"payload", fixed}, {"reason", "wrong MRN"}}, ops_);
  ASSERT_EQ(r.status, 201) << r.body;
  auto b = bodyOf(r);
  int64_t copy = b["messageId"].get<int64_t>();
  EXPECT_GT(copy, bystander);
  EXPECT_EQ(b["originId"], original);
  EXPECT_EQ(b["status"], "pending");
  EXPECT_EQ(b["replaced"], json::array({"ehr"}));
  EXPECT_EQ(b["originalStatus"], "sent");

  // The copy: this interface, its keys read from the new payload, a
  // delivery pending to each destination; its dedupe key not claimed.
  intake::KeySpec spec;
  spec.orderingKey = "PID.3.1";
  spec.partitions = 4;
  EXPECT_EQ(db_.value("SELECT concat_ws('|', i.name, m.origin_id, m.status, m.partition_key, "
                      "m.dedupe_key, m.message_type, m.control_id, m.key_value, m.tier, "
                      "convert_from(m.payload, 'UTF8')) FROM messages m JOIN interfaces i ON "
                      "i.id = m.interface_id WHERE m.id = $1",
                      {std::to_string(copy)}),
            "adt|" + std::to_string(original) + "|0|" +
                std::to_string(intake::keysOf(spec, fixed).lane) + "|C-1|ADT^A08|C-1|MRN-77|7|" +
                fixed);
  EXPECT_THAT(deliveries(copy), ElementsAre("billing:0:0:", "ehr:0:0:"));
  EXPECT_EQ(db_.value("SELECT count(*) FROM dedupe_keys"), "0");
  // The original: the quarantined delivery replaced, the sent one as it was.
  EXPECT_THAT(deliveries(original),
              ElementsAre("billing:1:1:", "ehr:2:5:replaced by edited copy " +
                                              std::to_string(copy)));
  EXPECT_EQ(db_.value("SELECT status FROM messages WHERE id = $1", {std::to_string(original)}),
            "1");
  EXPECT_EQ(deliveries(bystander), before);
  EXPECT_EQ(db_.value("SELECT count(*) FROM messages"), "3");
  EXPECT_THAT(engine_.take(), ElementsAre("adt"));
  EXPECT_EQ(db_.value("SELECT concat_ws('|', actor, target_id, target_name, detail->>'copyId', "
                      "detail->>'reason', detail->'replaced'->>0) FROM audit_log "
                      "WHERE action = 'message.edit'"),
            "ops|" + std::to_string(original) + "|adt|" + std::to_string(copy) +
                "|wrong MRN|ehr");

  // The copy is browsable by its new key, and names its origin.
  EXPECT_THAT(ids("?key=MRN-77"), ElementsAre(copy));
  EXPECT_EQ(bodyOf(get("/api/v1/messages/" + std::to_string(copy), viewer_))["originId"],
            original);
}

TEST_F(MessageBrowserTest, EditKeepsTheCharsetTheOriginalWasReadIn) {
  auto original = message({.charset = "iso-8859-1", .deliveries = {{"ehr", 3, 1}}});
  auto r = post("/api/v1/messages/" + std::to_string(original) + "/edit",
                {{"payload", "MSH|^~\\&|A|B|C|D|1||ADT^A01|C1|P|2.5\rPID|1||M\xc3\xbc\r"}},
                ops_);
  ASSERT_EQ(r.status, 201) << r.body;
  auto copy = std::to_string(bodyOf(r)["messageId"].get<int64_t>());
  EXPECT_EQ(db_.value("SELECT encode(payload, 'escape') FROM messages WHERE id = $1", {copy}),
            "MSH|^~\\\\&|A|B|C|D|1||ADT^A01|C1|P|2.5\rPID|1||M\\374\r");
  // Read back as the text that was sent.
  EXPECT_EQ(db_.value("SELECT key_value FROM messages WHERE id = $1", {copy}), "M\xc3\xbc");

  r = post("/api/v1/messages/" + std::to_string(original) + "/edit",
           {{"payload", "PID|1||\xe2\x82\xac"}, {"charset", "iso-8859-1"}}, ops_);
  EXPECT_EQ(r.status, 400) << r.body;  // no euro sign in ISO-8859-1
  r = post("/api/v1/messages/" + std::to_string(original) + "/edit",
           {{"payload", "x"}, {"charset", "ebcdic"}}, ops_);
  EXPECT_EQ(r.status, 400) << r.body;
}

// An edited copy holding MLLP framing bytes would leave an MLLP destination
// as two messages, the second never stored: refused as intake refuses it.
TEST_F(MessageBrowserTest, EditRefusesAPayloadHoldingMllpFramingBytes) {
  auto quarantined = message({.deliveries = {{"ehr", 3, 5}}});
  auto path = "/api/v1/messages/" + std::to_string(quarantined) + "/edit";
  auto snapshot = everything();
  for (std::string smuggled :
       {std::string("MSH|^~\\&|A|B|C|D|1||ADT^A01|C2|P|2.5\rPID|1||M2\r\x1c\r"
                    "\x0bMSH|^~\\&|EVIL|B|C|D|1||ADT^A01|INJECTED1|P|2.5\rPID|1||VICTIM\r"),
        std::string("MSH|^~\\&|A|B|C|D|1||ADT^A01|C3|P|2.5\rPID|1||M\x0b" "2\r")}) {
    auto r = post(path, {{"payload", smuggled}}, ops_);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_THAT(errorOf(r)["message"].get<std::string>(),
                HasSubstr("contains MLLP framing bytes"));
  }
  EXPECT_EQ(everything(), snapshot);
  EXPECT_EQ(auditCount("message.edit"), "0");
}

// A payload the interface's intake would refuse (AR over MLLP, 400 over
// HTTP) is refused before anything is written, named where it is wrong:
// the original keeps its quarantined deliveries, and no audit row claims
// an edit (a refused input is not audited, as no other 400 is).
TEST_F(MessageBrowserTest, EditRefusesAPayloadIntakeWouldRefuseAndLeavesTheOriginal) {
  auto quarantined =
      message({.deliveries = {{"ehr", 3, 5, "AE: unknown patient"}, {"billing", 1, 1}}});
  auto path = "/api/v1/messages/" + std::to_string(quarantined) + "/edit";
  auto snapshot = everything();
  auto before = deliveries(quarantined);

  // No MSH at all: a PID alone.
  auto r = post(path, {{"payload", "PID|1||M2\r"}}, ops_);
  ASSERT_EQ(r.status, 400) << r.body;
  auto b = bodyOf(r);
  EXPECT_EQ(b["error"], "invalid_payload");
  EXPECT_EQ(b["format"], "hl7v2");
  EXPECT_THAT(b["message"].get<std::string>(), HasSubstr("no MSH segment"));
  ASSERT_EQ(b["problems"].size(), 1u);
  EXPECT_EQ(b["problems"][0]["text"], "no MSH segment");
  EXPECT_EQ(b["problems"][0]["line"], 1);

  // A broken MSH segment on line 2 (after a stray line): MSH-2 declares
  // '^' twice, so no field of the message can be read.
  r = post(path, {{"payload", "\rMSH|^^\\&|A|B|C|D|1||ADT^A01|C2|P|2.5\rPID|1||M2\r"}}, ops_);
  ASSERT_EQ(r.status, 400) << r.body;
  b = bodyOf(r);
  EXPECT_EQ(b["error"], "invalid_payload");
  ASSERT_EQ(b["problems"].size(), 1u);
  EXPECT_EQ(b["problems"][0]["line"], 2);
  EXPECT_EQ(b["problems"][0]["segment"], "MSH");
  EXPECT_EQ(b["problems"][0]["field"], "MSH.2");
  EXPECT_THAT(b["problems"][0]["text"].get<std::string>(), HasSubstr("'^' twice"));
  EXPECT_THAT(b["message"].get<std::string>(), HasSubstr("line 2, MSH.2: "));

  // A framing byte inside PID (line 2): intake's check names the segment.
  r = post(path,
           {{"payload",
             "MSH|^~\\&|A|B|C|D|1||ADT^A01|C3|P|2.5\rPID|1||M\x1c"
             "2\r"}},
           ops_);
  ASSERT_EQ(r.status, 400) << r.body;
  b = bodyOf(r);
  EXPECT_EQ(b["problems"][0]["line"], 2);
  EXPECT_EQ(b["problems"][0]["segment"], "PID");

  // Over the interface's max_message_size.
  r = post(path,
           {{"payload", "MSH|^~\\&|A|B|C|D|1||ADT^A01|C4|P|2.5\rNTE|1||" +
                            std::string(FakeEngine::kMaxBytes, 'x') + "\r"}},
           ops_);
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(bodyOf(r)["problems"][0]["text"].get<std::string>(), HasSubstr("max_message_size"));

  EXPECT_EQ(deliveries(quarantined), before);
  EXPECT_EQ(everything(), snapshot);
  EXPECT_EQ(auditCount("message.edit"), "0");
  EXPECT_TRUE(engine_.take().empty());

  // The same original takes a valid copy afterwards.
  r = post(path, {{"payload", "MSH|^~\\&|A|B|C|D|1||ADT^A01|C5|P|2.5\rPID|1||M2\r"}}, ops_);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(bodyOf(r)["replaced"], json::array({"ehr"}));
  EXPECT_EQ(auditCount("message.edit"), "1");
}

TEST_F(MessageBrowserTest, EditIsRefusedWhilePendingAndChangesNothingWithoutItsAuditRow) {
  auto pending = message({.deliveries = {{"ehr", 3, 5}, {"billing", 0, 1}}});
  auto quarantined = message({.deliveries = {{"ehr", 3, 5}, {"billing", 3, 5}}});
  auto lab = message({.iface = "lab", .deliveries = {{"lis", 3, 1}}});
  json edit{{"payload", "MSH|^~\\&|A|B|C|D|1||ADT^A01|C2|P|2.5\rPID|1||M2\r"}};
  auto path = [](int64_t id) { return "/api/v1/messages/" + std::to_string(id) + "/edit"; };
  auto snapshot = everything();

  auto r = post(path(pending), edit, ops_);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(errorOf(r)["error"], "still_pending");
  EXPECT_THAT(errorOf(r)["message"].get<std::string>(), HasSubstr("billing"));
  r = post(path(lab), edit, ops_);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(errorOf(r)["error"], "not_run_here");
  EXPECT_EQ(post(path(99999999), edit, ops_).status, 404);
  EXPECT_EQ(post(path(quarantined), json::object(), ops_).status, 400);
  EXPECT_EQ(post(path(quarantined), {{"payload", ""}}, ops_).status, 400);
  EXPECT_EQ(post(path(quarantined), {{"payload", "x"}, {"reason", std::string(1001, 'r')}}, ops_)
                .status,
            400);
  EXPECT_EQ(everything(), snapshot);

  refuseAudit();
  r = post(path(quarantined), edit, ops_);
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(everything(), snapshot);
  EXPECT_TRUE(engine_.take().empty());
  EXPECT_EQ(auditCount("message.edit"), "0");

  db_.value("DROP TRIGGER refuse_audit ON audit_log");
  r = post(path(quarantined), edit, ops_);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(bodyOf(r)["replaced"], json::array({"billing", "ehr"}));
  EXPECT_EQ(bodyOf(r)["originalStatus"], "filtered");
  EXPECT_EQ(auditCount("message.edit"), "1");
}

// The list's rows say why each message waits without opening it: each
// delivery's last error (where a retried or quarantined delivery keeps
// it), a paused destination, a duplicate's original, an edit's two ends.
TEST_F(MessageBrowserTest, ARowSaysWhyItsMessageWaitsAndWhereItCameFrom) {
  auto sent = message({.deliveries = {{"ehr", 1, 1}, {"billing", 1, 1}}});
  auto retried = message({.deliveries = {{"ehr", 0, 3, "connection refused"}, {"billing", 1, 1}}});
  std::string longError(800, 'e');
  auto quarantined =
      message({.control = "Q-1", .deliveries = {{"ehr", 3, 5, longError}, {"billing", 1, 1}}});
  auto held = message({.deliveries = {{"ehr", 1, 1}, {"billing", 0}}});
  db_.value(
      "INSERT INTO destination_pauses (destination_id, paused_by) SELECT d.id, 'ops' FROM "
      "destinations d JOIN interfaces i ON i.id = d.interface_id WHERE i.name = 'adt' AND "
      "d.name = 'billing'");
  // A duplicate: stored as intake stores one (status 4, its dedupe key,
  // no deliveries), the key claimed by the original.
  auto original = message({.control = "D-1", .deliveries = {{"ehr", 1, 1}, {"billing", 1, 1}}});
  db_.value("UPDATE messages SET dedupe_key = 'D-1' WHERE id = $1", {std::to_string(original)});
  db_.value("INSERT INTO dedupe_keys (interface_id, key, message_id) VALUES ($1, 'D-1', $2)",
            {std::to_string(engine_.adtId), std::to_string(original)});
  auto duplicate = message({.control = "D-1", .status = 4});
  db_.value(
      "UPDATE messages SET dedupe_key = 'D-1', last_error = 'duplicate: dedupe key seen before' "
      "WHERE id = $1",
      {std::to_string(duplicate)});
  // A routed copy: its origin is another interface's message.
  auto labOrigin = message({.iface = "lab", .deliveries = {{"lis", 1, 1}}});
  auto routed = message({.deliveries = {{"ehr", 1, 1}, {"billing", 1, 1}}});
  db_.value("UPDATE messages SET origin_id = $2 WHERE id = $1",
            {std::to_string(routed), std::to_string(labOrigin)});
  // An edited copy, through the API.
  auto r = post("/api/v1/messages/" + std::to_string(quarantined) + "/edit",
                {{"payload", "MSH|^~\\&|A|B|C|D|1||ADT^A01|Q-2|P|2.5\rPID|1||M2\r"}}, ops_);
  ASSERT_EQ(r.status, 201) << r.body;
  int64_t copy = bodyOf(r)["messageId"].get<int64_t>();

  auto page = bodyOf(get("/api/v1/interfaces/adt/messages", viewer_));
  std::map<int64_t, json> rows;
  for (auto& item : page["items"]) rows[item["id"].get<int64_t>()] = item;
  ASSERT_EQ(rows.size(), 8u) << page.dump();
  auto delivery = [&](int64_t id, const char* dst) {
    for (auto& d : rows[id]["deliveries"])
      if (d["destination"] == dst) return d;
    return json();
  };
  EXPECT_EQ(delivery(sent, "ehr")["lastError"], nullptr);
  EXPECT_EQ(delivery(retried, "ehr"),
            json::parse(R"({"destination":"ehr","status":"pending","attempts":3,
                            "lastError":"connection refused","paused":false})"));
  // Quarantined, then replaced by the copy: the error kept was the edit's.
  EXPECT_EQ(delivery(quarantined, "ehr")["lastError"],
            "replaced by edited copy " + std::to_string(copy));
  EXPECT_EQ(delivery(held, "billing")["paused"], true);
  EXPECT_EQ(delivery(held, "billing")["status"], "pending");
  EXPECT_EQ(delivery(held, "ehr")["paused"], false) << "sent: not held by the pause";
  EXPECT_EQ(delivery(copy, "billing")["paused"], true);
  EXPECT_EQ(delivery(copy, "ehr")["paused"], false);
  EXPECT_EQ(rows[duplicate]["duplicateOf"], original);
  EXPECT_EQ(rows[duplicate]["status"], "duplicate");
  EXPECT_TRUE(rows[original]["duplicateOf"].is_null());
  EXPECT_EQ(rows[copy]["editedFrom"], quarantined);
  EXPECT_EQ(rows[copy]["originId"], quarantined);
  EXPECT_EQ(rows[quarantined]["editedTo"], json::array({copy}));
  EXPECT_TRUE(rows[routed]["editedFrom"].is_null()) << "a routed copy is not an edit";
  EXPECT_EQ(rows[routed]["originId"], labOrigin);
  EXPECT_EQ(rows[routed]["editedTo"], json::array());

  // A second edit of the same original: both copies, oldest first.
  r = post("/api/v1/messages/" + std::to_string(quarantined) + "/edit",
           {{"payload", "MSH|^~\\&|A|B|C|D|1||ADT^A01|Q-3|P|2.5\rPID|1||M3\r"}}, ops_);
  ASSERT_EQ(r.status, 201) << r.body;
  int64_t copy2 = bodyOf(r)["messageId"].get<int64_t>();

  // The single message: the same marks, each delivery's error whole.
  auto one = [&](int64_t id) {
    return bodyOf(get("/api/v1/messages/" + std::to_string(id), viewer_));
  };
  EXPECT_EQ(one(quarantined)["editedTo"], json::array({copy, copy2}));
  EXPECT_EQ(one(copy2)["editedFrom"], quarantined);
  EXPECT_EQ(one(duplicate)["duplicateOf"], original);
  EXPECT_EQ(one(duplicate)["lastError"], "duplicate: dedupe key seen before");
  EXPECT_EQ(one(held)["deliveries"][0]["destination"], "billing");
  EXPECT_EQ(one(held)["deliveries"][0]["paused"], true);
  EXPECT_EQ(one(retried)["deliveries"][1]["lastError"], "connection refused");
  EXPECT_TRUE(one(routed)["editedFrom"].is_null());

  // A long error: cut in the list, whole in the message.
  auto bystander = message({.deliveries = {{"ehr", 3, 2, longError}, {"billing", 1, 1}}});
  auto listed = bodyOf(get("/api/v1/interfaces/adt/messages?limit=1", viewer_))["items"][0];
  ASSERT_EQ(listed["id"], bystander);
  EXPECT_EQ(listed["deliveries"][1]["lastError"], std::string(store::kListErrorChars, 'e'));
  EXPECT_EQ(one(bystander)["deliveries"][1]["lastError"], longError);

  // errors: a quarantined delivery, or a pending one tried before; not a
  // pending one never tried (held by the pause), nor a sent one.
  EXPECT_THAT(ids("?status=errors"), ElementsAre(bystander, retried));
  EXPECT_THAT(ids("?status=errors&order=oldest"), ElementsAre(retried, bystander));
  EXPECT_THAT(ids("?status=errors&limit=1&before=" + std::to_string(bystander)),
              ElementsAre(retried));
  EXPECT_THAT(ids("?status=errors&order=oldest&after=" + std::to_string(retried)),
              ElementsAre(bystander));
  // The other statuses are what they were.
  EXPECT_THAT(ids("?status=quarantined"), ElementsAre(bystander));
  EXPECT_THAT(ids("?status=duplicate"), ElementsAre(duplicate));
  EXPECT_THAT(ids("?status=pending"), ElementsAre(copy2, copy, held, retried));
}

// Oldest first reaches the head of a queue; paging either way meets every
// message once, in order, with no gap and no repeat.
TEST_F(MessageBrowserTest, PagesOldestFirstWithAfterAsNewestFirstWithBefore) {
  std::vector<int64_t> all;
  for (int i = 0; i < 11; ++i)
    all.push_back(
        message({.key = i % 2 ? "ODD" : "EVEN", .deliveries = {{"ehr", i % 3 == 0 ? 3 : 1, 1}}}));
  (void)message({.iface = "lab", .deliveries = {{"lis", 3, 1}}});
  auto walk = [&](const std::string& query, const char* cursor) {
    std::vector<int64_t> seen;
    std::string next;
    for (int pages = 0; pages < 20; ++pages) {
      auto body = bodyOf(get("/api/v1/interfaces/adt/messages?" + query +
                                 (next.empty() ? "" : std::string("&") + cursor + "=" + next),
                             viewer_));
      for (auto& i : body["items"]) seen.push_back(i["id"].get<int64_t>());
      if (body["next"].is_null()) break;
      EXPECT_EQ(body["next"], seen.back());
      next = std::to_string(body["next"].get<int64_t>());
    }
    return seen;
  };
  std::vector<int64_t> reversed(all.rbegin(), all.rend());
  EXPECT_EQ(walk("order=oldest&limit=3", "after"), all);
  EXPECT_EQ(walk("limit=3", "before"), reversed);
  EXPECT_EQ(walk("order=newest&limit=4", "before"), reversed);
  EXPECT_EQ(walk("order=oldest&limit=11", "after"), all);
  // Filters page the same way.
  std::vector<int64_t> odd, quarantinedOnes;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i % 2) odd.push_back(all[i]);
    if (i % 3 == 0) quarantinedOnes.push_back(all[i]);
  }
  EXPECT_EQ(walk("order=oldest&limit=2&key=ODD", "after"), odd);
  EXPECT_EQ(walk("order=oldest&limit=2&status=quarantined", "after"), quarantinedOnes);
  EXPECT_EQ(walk("order=oldest&limit=1&status=errors", "after"), quarantinedOnes);
  // before and after together: the ids between.
  EXPECT_THAT(
      ids("?order=oldest&after=" + std::to_string(all[2]) + "&before=" + std::to_string(all[5])),
      ElementsAre(all[3], all[4]));
  // A page from the middle of the other way's cursor: no overlap.
  EXPECT_THAT(ids("?order=oldest&limit=2&after=" + std::to_string(all[8])),
              ElementsAre(all[9], all[10]));
}

TEST_F(MessageBrowserTest, EveryListGivesItsTotalExactUpToAThousand) {
  auto total = [&](const std::string& path) {
    auto r = get(path, viewer_);
    EXPECT_EQ(r.status, 200) << r.body;
    return bodyOf(r)["total"];
  };
  auto exact = [](int n) { return json{{"count", n}, {"exact", true}}; };
  EXPECT_EQ(total("/api/v1/interfaces/adt/messages"), exact(0));
  auto q = message({.key = "K", .deliveries = {{"ehr", 3, 1}}});
  for (int i = 0; i < 4; ++i) message({.key = "K", .deliveries = {{"ehr", 1, 1}}});
  EXPECT_EQ(total("/api/v1/interfaces/adt/messages"), exact(5));
  // The whole list's, whatever the page and its cursor.
  EXPECT_EQ(total("/api/v1/interfaces/adt/messages?limit=1&before=" + std::to_string(q + 2)),
            exact(5));
  EXPECT_EQ(total("/api/v1/interfaces/adt/messages?status=quarantined"), exact(1));
  EXPECT_EQ(total("/api/v1/interfaces/adt/messages?status=errors"), exact(1));
  EXPECT_EQ(total("/api/v1/messages?key=K"), exact(5));
  db_.value(
      "INSERT INTO messages (tier, interface_id, status, payload, key_value) SELECT 7, id, 1, "
      "'MSH|', 'K' FROM interfaces, generate_series(1, 995) WHERE name = 'adt'");
  EXPECT_EQ(total("/api/v1/interfaces/adt/messages"), exact(1000));
  EXPECT_EQ(total("/api/v1/interfaces/adt/messages?order=oldest"), exact(1000));
  EXPECT_EQ(total("/api/v1/messages?key=K"), exact(1000));
  message({});
  json atLeast{{"count", 1000}, {"exact", false}};
  EXPECT_EQ(total("/api/v1/interfaces/adt/messages"), atLeast);
  EXPECT_EQ(total("/api/v1/messages?key=K"), exact(1000));
  message({.key = "K"});
  EXPECT_EQ(total("/api/v1/messages?key=K"), atLeast);
  EXPECT_EQ(total("/api/v1/interfaces/adt/messages?status=quarantined"), exact(1));
}

// GET /api/v1/messages finds a message by control id or key whatever its
// interface, each row naming it.
TEST_F(MessageBrowserTest, ASearchByControlIdOrKeyFindsMessagesOfEveryInterface) {
  auto a1 = message({.control = "C-7", .key = "MRN-7", .deliveries = {{"ehr", 1, 1}}});
  auto l1 = message({.iface = "lab",
                     .control = "C-7",
                     .key = "MRN-7",
                     .deliveries = {{"lis", 3, 2, "AR: unknown test"}}});
  auto a2 = message({.control = "C-8", .key = "MRN-7", .deliveries = {{"ehr", 1, 1}}});
  (void)message({.iface = "lab", .control = "C-9", .key = "MRN-8"});
  auto search = [&](const std::string& query) {
    auto r = get("/api/v1/messages?" + query, viewer_);
    EXPECT_EQ(r.status, 200) << query << ": " << r.body;
    std::vector<std::string> out;
    auto body = bodyOf(r);
    for (auto& i : body["items"])
      out.push_back(i["interface"].get<std::string>() + ":" +
                    std::to_string(i["id"].get<int64_t>()));
    return out;
  };
  auto at = [](const char* iface, int64_t id) {
    return std::string(iface) + ":" + std::to_string(id);
  };
  EXPECT_THAT(search("control_id=C-7"), ElementsAre(at("lab", l1), at("adt", a1)));
  EXPECT_THAT(search("key=MRN-7"), ElementsAre(at("adt", a2), at("lab", l1), at("adt", a1)));
  EXPECT_THAT(search("key=MRN-7&order=oldest"),
              ElementsAre(at("adt", a1), at("lab", l1), at("adt", a2)));
  EXPECT_THAT(search("key=MRN-7&limit=1&before=" + std::to_string(a2)), ElementsAre(at("lab", l1)));
  EXPECT_THAT(search("key=MRN-7&order=oldest&limit=1&after=" + std::to_string(a1)),
              ElementsAre(at("lab", l1)));
  EXPECT_THAT(search("key=MRN-7&status=errors"), ElementsAre(at("lab", l1)));
  EXPECT_THAT(search("key=MRN-7&control_id=C-8"), ElementsAre(at("adt", a2)));
  EXPECT_THAT(search("key=NOBODY"), ElementsAre());
  auto r = get("/api/v1/messages?control_id=C-7", viewer_);
  auto b = bodyOf(r);
  EXPECT_TRUE(b["next"].is_null());
  EXPECT_EQ(b["total"], (json{{"count", 2}, {"exact", true}}));
  EXPECT_FALSE(b.contains("scanned")) << "not a content search";
  EXPECT_EQ(b["items"][0]["deliveries"][0]["lastError"], "AR: unknown test");
  r = get("/api/v1/messages?key=MRN-7&limit=2", viewer_);
  EXPECT_EQ(bodyOf(r)["next"], l1);

  // Who may search, and what a search must say.
  EXPECT_EQ(call("GET", "/api/v1/messages?key=MRN-7").status, 401);
  for (auto [query, name] :
       std::vector<std::pair<std::string, std::string>>{{"", "control_id"},
                                                        {"status=errors", "control_id"},
                                                        {"key=", "key"},
                                                        {"key=K&limit=0", "limit"},
                                                        {"key=K&limit=501", "limit"},
                                                        {"key=K&before=ten", "before"},
                                                        {"key=K&order=up", "order"},
                                                        {"key=K&status=bad", "status"},
                                                        {"key=K&from=yesterday", "from"},
                                                        {"key=K&to=yesterday", "to"}}) {
    r = get("/api/v1/messages?" + query, viewer_);
    EXPECT_EQ(r.status, 400) << query;
    EXPECT_THAT(errorOf(r)["message"].get<std::string>(), HasSubstr("`" + name + "`")) << query;
  }
  EXPECT_EQ(bodyOf(get("/api/v1/messages?key=MRN-7&limit=500", viewer_))["items"].size(), 3u);
  EXPECT_EQ(get("/api/v1/messages?key=MRN-7&interface=adt", viewer_).status, 400);
}

// q searches payloads: PHI, so it needs `payloads`, is audited first (not
// the text), reads a bounded window and at most 20,000 messages a page.
TEST_F(MessageBrowserTest, AContentSearchIsBoundedAuditedAndNeedsPayloads) {
  auto time = [&](const char* shift) {
    return db_.value("SELECT to_char(now() AT TIME ZONE 'UTC' + interval '" + std::string(shift) +
                     "', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')");
  };
  std::string window = "&from=" + time("-1 hour") + "&to=" + time("1 hour");
  auto smith = message({.payload = "MSH|^~\\&|A|B|C|D|1||ADT^A01|C1|P|2.5\rPID|1||M1||SMITH^JO\r",
                        .deliveries = {{"ehr", 1, 1}}});
  auto jones = message({.payload = "MSH|^~\\&|A|B|C|D|1||ADT^A01|C2|P|2.5\rPID|1||M2||JONES^AL\r"});
  auto latin1 = message({.payload = "MSH|^~\\&|A|B|C|D|1||ADT^A01|C3|P|2.5\rPID|1||M3||M\xfcLLER\r",
                         .charset = "iso-8859-1"});
  auto labSmith = message({.iface = "lab", .payload = "OBR|1||SMITH"});
  auto list = [&](const std::string& path) {
    auto r = get(path, reader_);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return bodyOf(r);
  };
  auto idsOf = [](const json& body) {
    std::vector<int64_t> out;
    for (auto& i : body["items"]) out.push_back(i["id"].get<int64_t>());
    return out;
  };

  auto b = list("/api/v1/interfaces/adt/messages?q=SMITH" + window);
  EXPECT_THAT(idsOf(b), ElementsAre(smith));
  EXPECT_EQ(b["complete"], true);
  EXPECT_EQ(b["scanned"], 3);
  EXPECT_TRUE(b["total"].is_null()) << "no count: it would read every payload";
  EXPECT_THAT(idsOf(list("/api/v1/messages?q=SMITH" + window)), ElementsAre(labSmith, smith));
  EXPECT_THAT(idsOf(list("/api/v1/messages?q=SMITH&order=oldest" + window)),
              ElementsAre(smith, labSmith));
  // UTF-8 text finds the ISO-8859-1 bytes of the same letters.
  EXPECT_THAT(idsOf(list("/api/v1/interfaces/adt/messages?q=M%C3%BCLLER" + window)),
              ElementsAre(latin1));
  EXPECT_THAT(idsOf(list("/api/v1/interfaces/adt/messages?q=smith" + window)), ElementsAre())
      << "case-sensitive";
  EXPECT_THAT(idsOf(list("/api/v1/interfaces/adt/messages?q=PID&status=sent" + window)),
              ElementsAre(smith));
  // Paged as any list.
  b = list("/api/v1/interfaces/adt/messages?q=PID&limit=2" + window);
  EXPECT_THAT(idsOf(b), ElementsAre(latin1, jones));
  ASSERT_FALSE(b["next"].is_null());
  EXPECT_THAT(idsOf(list("/api/v1/interfaces/adt/messages?q=PID&limit=2&before=" +
                         std::to_string(b["next"].get<int64_t>()) + window)),
              ElementsAre(smith));

  // Audited, each page: who, where, the window; the text's length only.
  std::string searches = auditCount("message.search");
  EXPECT_EQ(searches, "8");
  auto row = json::parse(db_.value(
      "SELECT json_build_object('actor', actor, 'name', target_name, 'detail', detail)::text "
      "FROM audit_log WHERE action = 'message.search' ORDER BY id LIMIT 1"));
  EXPECT_EQ(row["actor"], "reader");
  EXPECT_EQ(row["name"], "adt");
  EXPECT_EQ(row["detail"]["textBytes"], 5);
  EXPECT_EQ(row["detail"]["interface"], "adt");
  EXPECT_FALSE(row["detail"]["from"].is_null());
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log WHERE detail::text LIKE '%SMITH%'"), "0");

  // Without `payloads`: 403, nothing read, nothing audited.
  for (auto& token : {viewer_, ops_}) {
    auto r = get("/api/v1/interfaces/adt/messages?q=SMITH" + window, token);
    EXPECT_EQ(r.status, 403) << r.body;
    EXPECT_THAT(errorOf(r)["message"].get<std::string>(), HasSubstr("payloads"));
    EXPECT_EQ(r.body.find("PID"), std::string::npos);
    EXPECT_EQ(get("/api/v1/messages?q=SMITH" + window, token).status, 403);
  }
  // The bounds, each named: a window of both ends and at most 24 hours,
  // 1 to 256 bytes of text.
  for (auto [query, name] : std::vector<std::pair<std::string, std::string>>{
           {"q=SMITH", "from"},
           {"q=SMITH&from=" + time("-1 hour"), "to"},
           {"q=SMITH&to=" + time("1 hour"), "from"},
           {"q=SMITH&from=" + time("-24 hours -1 second") + "&to=" + time("0 hours"), "24 hours"},
           {"q=SMITH&from=" + time("1 hour") + "&to=" + time("-1 hour"), "after `from`"},
           {"q=" + window, "q"},
           {"q=" + std::string(257, 'x') + window, "256 bytes"}}) {
    auto r = get("/api/v1/interfaces/adt/messages?" + query, reader_);
    EXPECT_EQ(r.status, 400) << query;
    EXPECT_THAT(errorOf(r)["message"].get<std::string>(), HasSubstr(name)) << query;
  }
  // 24 hours exactly is allowed; 256 bytes too.
  EXPECT_EQ(get("/api/v1/interfaces/adt/messages?q=SMITH&from=" + time("-12 hours") +
                    "&to=" + time("12 hours"),
                reader_)
                .status,
            200);
  EXPECT_EQ(
      get("/api/v1/interfaces/adt/messages?q=" + std::string(256, 'x') + window, reader_).status,
      200);
  EXPECT_EQ(get("/api/v1/interfaces/adt/messages?q=SMITH&from=2026-01-01T00:00:00%2B02:00"
                "&to=2026-01-01T21:00:00-01:00",
                reader_)
                .status,
            200)
      << "24 hours, with the offsets";
  EXPECT_EQ(get("/api/v1/interfaces/adt/messages?q=SMITH&from=2026-01-01T00:00:00%2B01:00"
                "&to=2026-01-02T00:00:00.000001%2B01:00",
                reader_)
                .status,
            400);

  // No audit row, no search.
  auto before = auditCount("message.search");
  refuseAudit();
  auto r = get("/api/v1/interfaces/adt/messages?q=SMITH" + window, reader_);
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.body.find("SMITH^JO"), std::string::npos);
  db_.value("DROP TRIGGER refuse_audit ON audit_log");
  EXPECT_EQ(auditCount("message.search"), before);
}

TEST_F(MessageBrowserTest, AContentSearchStopsAfterTwentyThousandMessagesAndSaysSo) {
  auto time = [&](const char* shift) {
    return db_.value("SELECT to_char(now() AT TIME ZONE 'UTC' + interval '" + std::string(shift) +
                     "', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')");
  };
  std::string window = "&from=" + time("-1 hour") + "&to=" + time("1 hour");
  auto needle = message({.payload = "PID|1||NEEDLE"});
  db_.value(
      "INSERT INTO messages (tier, interface_id, status, payload) SELECT 7, id, 1, 'PID|1||HAY' "
      "FROM interfaces, generate_series(1, $1::int) WHERE name = 'adt'",
      {std::to_string(store::kContentScanRows + 10)});
  auto first = bodyOf(get("/api/v1/interfaces/adt/messages?q=NEEDLE" + window, reader_));
  EXPECT_EQ(first["items"], json::array());
  EXPECT_EQ(first["scanned"], store::kContentScanRows);
  EXPECT_EQ(first["complete"], false);
  ASSERT_FALSE(first["next"].is_null()) << first.dump();
  // The next page goes on from the last message read, and finds it.
  auto second = bodyOf(get("/api/v1/interfaces/adt/messages?q=NEEDLE&before=" +
                               std::to_string(first["next"].get<int64_t>()) + window,
                           reader_));
  ASSERT_EQ(second["items"].size(), 1u) << second.dump();
  EXPECT_EQ(second["items"][0]["id"], needle);
  EXPECT_EQ(second["scanned"], 11);
  EXPECT_EQ(second["complete"], true);
  EXPECT_TRUE(second["next"].is_null());
  // A page that fills stops there, whatever is left to read.
  auto full = bodyOf(get("/api/v1/interfaces/adt/messages?q=HAY&limit=3" + window, reader_));
  EXPECT_EQ(full["items"].size(), 3u);
  EXPECT_EQ(full["scanned"], 4);
  EXPECT_EQ(full["complete"], true);
  EXPECT_EQ(full["next"], full["items"][2]["id"]);
}

}  // namespace
}  // namespace ductus::api::test

namespace ductus::api::test {
namespace {

// RFC 4180 read back: records of fields, quoted fields with "" for a
// quote, records ended by CRLF outside quotes.
std::vector<std::vector<std::string>> readCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      row.push_back(std::exchange(field, {}));
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      row.push_back(std::exchange(field, {}));
      rows.push_back(std::exchange(row, {}));
      ++i;
    } else {
      EXPECT_NE(c, '\n') << "a bare LF outside quotes at " << i;
      EXPECT_NE(c, '\r') << "a bare CR outside quotes at " << i;
      field += c;
    }
  }
  (void)any;
  EXPECT_TRUE(field.empty() && row.empty()) << "the file ends inside a record";
  return rows;
}

std::map<std::string, std::string> byColumn(const std::vector<std::string>& head,
                                            const std::vector<std::string>& row) {
  std::map<std::string, std::string> out;
  EXPECT_EQ(head.size(), row.size());
  for (size_t i = 0; i < head.size() && i < row.size(); ++i) out[head[i]] = row[i];
  return out;
}

TEST_F(MessageBrowserTest, AnExportIsTheListsMatchesAsCsvQuotedAsRfc4180Says) {
  auto plain = message({.control = "C-1", .key = "MRN-1", .deliveries = {{"ehr", 1, 1}}});
  // Every character CSV must quote, in fields a sender chooses, and a
  // receiver's error; a key a spreadsheet would run as a formula.
  auto awkward =
      message({.payload = "MSH|^~\\&|A|B|C|D|1||ADT^A01|C,2|P|2.5\rPID|1||\"M\"\r",
               .control = "C,2 \"quoted\"",
               .key = "=HYPERLINK(\"x\")",
               .deliveries = {{"ehr", 3, 4, "refused,\r\nline two"}, {"billing", 1, 1}}});
  auto other = message({.iface = "lab", .control = "C-9"});
  (void)other;

  auto r = get("/api/v1/interfaces/adt/messages/export", viewer_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "text/csv; charset=utf-8");
  EXPECT_EQ(r.header("content-disposition"), "attachment; filename=\"adt-messages.csv\"");
  EXPECT_EQ(r.header("x-ductus-export-rows"), "2");
  EXPECT_EQ(r.header("x-ductus-export-complete"), "true");
  auto rows = readCsv(r.body);
  ASSERT_EQ(rows.size(), 3u) << r.body;
  EXPECT_THAT(rows[0], ElementsAre("id", "interface", "received_at", "status", "type", "control_id",
                                   "key", "last_error", "origin_id", "duplicate_of", "edited_from",
                                   "deliveries", "delivery_errors"));
  // Newest first, as the list.
  auto a = byColumn(rows[0], rows[1]);
  EXPECT_EQ(a["id"], std::to_string(awkward));
  EXPECT_EQ(a["interface"], "adt");
  EXPECT_EQ(a["status"], "quarantined");
  EXPECT_EQ(a["control_id"], "C,2 \"quoted\"");
  EXPECT_EQ(a["key"], "'=HYPERLINK(\"x\")") << "a formula is not a formula";
  EXPECT_EQ(a["deliveries"], "billing=sent/1; ehr=quarantined/4");
  EXPECT_EQ(a["delivery_errors"], "ehr: refused,\r\nline two");
  EXPECT_EQ(byColumn(rows[0], rows[2])["id"], std::to_string(plain));
  EXPECT_EQ(byColumn(rows[0], rows[2])["deliveries"], "ehr=sent/1");
  // The same filters as the list.
  r = get("/api/v1/interfaces/adt/messages/export?status=sent&order=oldest", viewer_);
  ASSERT_EQ(r.status, 200) << r.body;
  rows = readCsv(r.body);
  ASSERT_EQ(rows.size(), 2u) << r.body;
  EXPECT_EQ(rows[1][0], std::to_string(plain));
  EXPECT_EQ(
      readCsv(get("/api/v1/interfaces/adt/messages/export?control_id=C-9", viewer_).body).size(),
      1u)
      << "lab's control id is not adt's";

  // Payloads: not for a viewer without the permission, and nothing recorded.
  r = get("/api/v1/interfaces/adt/messages/export?include=payload", viewer_);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(auditCount("message.export"), "0") << "a metadata export is a list read";
  r = get("/api/v1/interfaces/adt/messages/export?include=payload&key=%3DHYPERLINK(%22x%22)",
          reader_);
  ASSERT_EQ(r.status, 200) << r.body;
  rows = readCsv(r.body);
  ASSERT_EQ(rows.size(), 2u) << r.body;
  auto p = byColumn(rows[0], rows[1]);
  // HL7's segments end in CR: quoted, kept as they are.
  EXPECT_EQ(p["payload"], "MSH|^~\\&|A|B|C|D|1||ADT^A01|C,2|P|2.5\rPID|1||\"M\"\r");
  EXPECT_EQ(p["payload_encoding"], "text");
  EXPECT_EQ(p["charset"], "utf-8");
  // Audited with the filter and the count, not the key searched for.
  EXPECT_EQ(auditCount("message.export"), "1");
  auto detail = json::parse(
      db_.value("SELECT detail FROM audit_log WHERE action = 'message.export' AND actor = 'reader' "
                "AND target_name = 'adt'"));
  EXPECT_EQ(detail["count"], 1);
  EXPECT_EQ(detail["filter"]["given"], json::array({"key"}));
  EXPECT_EQ(detail["include"], "payload");
  EXPECT_THAT(detail.dump(), ::testing::Not(HasSubstr("HYPERLINK")));

  // No audit row, no payloads.
  refuseAudit();
  r = get("/api/v1/interfaces/adt/messages/export?include=payload", reader_);
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_THAT(r.body, ::testing::Not(HasSubstr("MSH")));
}

TEST_F(MessageBrowserTest, AnNdjsonExportGivesEachListRowAndItsPayload) {
  auto m1 = message({.control = "N-1", .deliveries = {{"ehr", 1, 1}}});
  auto m2 = message({.payload = std::string("MSH|^~\\&|\0|\r", 12),
                     .control = "N-2",
                     .deliveries = {{"ehr", 3, 2, "no"}}});
  auto r = get("/api/v1/interfaces/adt/messages/export?format=ndjson&include=payload", reader_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/x-ndjson; charset=utf-8");
  std::vector<json> lines;
  std::istringstream in(r.body);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 2u) << r.body;
  auto list = bodyOf(get("/api/v1/interfaces/adt/messages", viewer_))["items"];
  for (size_t i = 0; i < 2; ++i) {
    json row = lines[i];
    for (auto k : {"encoding", "charset", "payload"}) row.erase(k);
    EXPECT_EQ(row, list[i]) << "the list's row, whole";
  }
  EXPECT_EQ(lines[0]["id"], m2);
  EXPECT_EQ(lines[0]["encoding"], "base64") << "a NUL is no text";
  EXPECT_EQ(lines[1]["id"], m1);
  EXPECT_EQ(lines[1]["payload"], "MSH|^~\\&|A|B|C|D|1||ADT^A01|C1|P|2.5\rPID|1||M1\r");
}

TEST_F(MessageBrowserTest, AnExportIsBoundedAndWalksPageAfterPage) {
  EXPECT_EQ(kExportRowsMax, 100000) << "the documented bound, and the default limit";
  // More than a page of the store's (500) and of payloads (25).
  db_.value(
      "INSERT INTO messages (tier, interface_id, status, payload, control_id) SELECT 7, id, 1, "
      "convert_to('MSH|^~\\&|A|B|C|D|1||ADT^A01|X' || g || '|P|2.5' || chr(13), 'UTF8'), "
      "'X' || g FROM interfaces, generate_series(1, 1203) g WHERE name = 'adt'");
  auto r = get("/api/v1/interfaces/adt/messages/export?order=oldest", viewer_);
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 500);
  auto rows = readCsv(r.body);
  ASSERT_EQ(rows.size(), 1204u);
  for (size_t i = 1; i < rows.size(); ++i)
    ASSERT_EQ(rows[i][5], "X" + std::to_string(i)) << "in order, none twice, none missed";
  r = get("/api/v1/interfaces/adt/messages/export?include=payload", reader_);
  ASSERT_EQ(r.status, 200);
  rows = readCsv(r.body);
  ASSERT_EQ(rows.size(), 1204u);
  EXPECT_EQ(rows[1][5], "X1203");
  EXPECT_EQ(rows[1].back(), "MSH|^~\\&|A|B|C|D|1||ADT^A01|X1203|P|2.5\r");
  EXPECT_EQ(rows[1203].back(), "MSH|^~\\&|A|B|C|D|1||ADT^A01|X1|P|2.5\r");

  // At most `limit`: the headers say more matched.
  r = get("/api/v1/interfaces/adt/messages/export?limit=600", viewer_);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("x-ductus-export-rows"), "600");
  EXPECT_EQ(r.header("x-ductus-export-complete"), "false");
  rows = readCsv(r.body);
  ASSERT_EQ(rows.size(), 601u);
  EXPECT_EQ(rows[1][5], "X1203");
  EXPECT_EQ(rows[600][5], "X604");
  r = get("/api/v1/interfaces/adt/messages/export?limit=1203", viewer_);
  EXPECT_EQ(r.header("x-ductus-export-complete"), "true");

  for (auto [query, name] :
       std::vector<std::pair<std::string, std::string>>{{"limit=0", "`limit`"},
                                                        {"limit=100001", "`limit`"},
                                                        {"limit=x", "`limit`"},
                                                        {"format=xml", "`format`"},
                                                        {"include=outputs", "`include`"},
                                                        {"status=lost", "`status`"},
                                                        {"from=yesterday", "`from`"},
                                                        {"before=5", "before"},
                                                        {"q=text", "q"}}) {
    r = get("/api/v1/interfaces/adt/messages/export?" + query, viewer_);
    EXPECT_EQ(r.status, 400) << query;
    EXPECT_THAT(errorOf(r)["message"].get<std::string>(), HasSubstr(name)) << query;
  }
  EXPECT_EQ(get("/api/v1/interfaces/nosuch/messages/export", viewer_).status, 404);
  EXPECT_EQ(call("GET", "/api/v1/interfaces/adt/messages/export").status, 401);
}

TEST(CsvField, QuotesWhatRfc4180SaysAndDisarmsFormulas) {
  EXPECT_EQ(csvField("plain"), "plain");
  EXPECT_EQ(csvField(""), "");
  EXPECT_EQ(csvField("a,b"), "\"a,b\"");
  EXPECT_EQ(csvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csvField("MSH|x\rPID|y\r"), "\"MSH|x\rPID|y\r\"");
  EXPECT_EQ(csvField("one\ntwo"), "\"one\ntwo\"");
  EXPECT_EQ(csvField("=1+1"), "'=1+1");
  EXPECT_EQ(csvField("-2"), "'-2");
  EXPECT_EQ(csvField("@SUM(A1)"), "'@SUM(A1)");
  EXPECT_EQ(csvField("\rPID"), "\"'\rPID\"");
}

}  // namespace
}  // namespace ductus::api::test
