// The audit log over real HTTP and PostgreSQL: who may read it, paging by
// id, filters, the NDJSON export (oldest first, itself audited, refused
// when its row can't be written), and pruning old rows in batches.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "tests/api/auth_fixture.h"

namespace ductus::api::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class AuditTest : public AuthFixture {
 protected:
  // n rows of action `action`, written as the engine's standalone writes are.
  void write(int n, const std::string& action, const std::string& actor = "someone") {
    for (int i = 0; i < n; ++i) {
      auto r = onLoop<bool>([&](auto done) {
        AuditEntry e;
        e.actor = actor;
        e.actorKind = ActorKind::User;
        e.via = "token";
        e.action = action;
        e.detail["i"] = i;
        audit_->write(e, [done](Status s) {
          if (!s) return done(s.error());
          done(true);
        });
      });
      ASSERT_TRUE(r.ok()) << r.error().message;
    }
  }
};

TEST_F(AuditTest, OnlyCallersWithTheAuditPermissionReadIt) {
  auto plainAdmin = makeToken("root", Role::Admin, kNoPermission);
  auto auditor = makeToken("auditor", Role::Viewer, kAudit);
  EXPECT_EQ(call("GET", "/api/v1/audit", bearer(plainAdmin.token)).status, 403);
  EXPECT_EQ(call("GET", "/api/v1/audit").status, 401);
  auto r = call("GET", "/api/v1/audit", bearer(auditor.token));
  ASSERT_EQ(r.status, 200) << r.body;
  auto items = bodyOf(r)["items"];
  ASSERT_EQ(items.size(), 2u);  // the two token.create rows, newest first
  EXPECT_EQ(items[0]["target"]["name"], "auditor");
  EXPECT_EQ(items[0]["actorKind"], "system");
  EXPECT_EQ(items[0]["via"], "cli");
  EXPECT_EQ(items[0]["detail"]["permissions"], json::array({"audit"}));
  EXPECT_TRUE(bodyOf(r)["next"].is_null());
}

TEST_F(AuditTest, PagesGoBackByIdAndFiltersNarrowThem) {
  auto auditor = makeToken("auditor", Role::Viewer, kAudit);
  write(5, "thing.done", "ann");
  write(3, "other.thing", "ben");
  std::vector<int64_t> ids;
  std::string next;
  for (int pages = 0; pages < 10; ++pages) {
    auto r = call("GET", "/api/v1/audit?limit=3&action=thing.done" +
                             (next.empty() ? "" : "&before=" + next),
                  bearer(auditor.token));
    ASSERT_EQ(r.status, 200) << r.body;
    auto page = bodyOf(r);
    EXPECT_FALSE(page["items"].empty()) << r.body;
    for (auto& item : page["items"]) {
      EXPECT_EQ(item["actor"], "ann");
      ids.push_back(item["id"].get<int64_t>());
    }
    if (page["next"].is_null()) break;
    next = std::to_string(page["next"].get<int64_t>());
  }
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_TRUE(std::is_sorted(ids.rbegin(), ids.rend()));
  auto ben = call("GET", "/api/v1/audit?actor=ben", bearer(auditor.token));
  EXPECT_EQ(bodyOf(ben)["items"].size(), 3u);
  auto future = call("GET", "/api/v1/audit?since=2999-01-01T00:00:00Z", bearer(auditor.token));
  EXPECT_EQ(bodyOf(future)["items"].size(), 0u);
  EXPECT_EQ(call("GET", "/api/v1/audit?since=yesterday-ish", bearer(auditor.token)).status, 400);
  EXPECT_EQ(call("GET", "/api/v1/audit?limit=0", bearer(auditor.token)).status, 400);
  EXPECT_EQ(call("GET", "/api/v1/audit?before=x", bearer(auditor.token)).status, 400);
}

TEST_F(AuditTest, TheNdjsonExportIsOldestFirstAndAuditedFirst) {
  auto auditor = makeToken("auditor", Role::Viewer, kAudit);
  write(4, "thing.done");
  auto r = call("GET", "/api/v1/audit?format=ndjson&limit=3", bearer(auditor.token));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/x-ndjson");
  std::istringstream lines(r.body);
  std::vector<int64_t> ids;
  for (std::string line; std::getline(lines, line);) ids.push_back(json::parse(line)["id"]);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_EQ(r.header("x-ductus-next-after"), std::to_string(ids.back()));
  // The export's own row, written before the rows were read.
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log WHERE action = 'audit.export' "
                      "AND actor = 'auditor' AND detail->'query'->>'format' = 'ndjson'"),
            "1");
  auto rest = call("GET", "/api/v1/audit?format=ndjson&after=" + std::to_string(ids.back()),
                   bearer(auditor.token));
  ASSERT_EQ(rest.status, 200);
  // 2 thing.done left, then the first export's row, then this one's.
  EXPECT_EQ(std::count(rest.body.begin(), rest.body.end(), '\n'), 4);
  EXPECT_TRUE(rest.header("x-ductus-next-after").empty());
}

TEST_F(AuditTest, AnExportWhoseRowCannotBeWrittenIsRefused) {
  auto auditor = makeToken("auditor", Role::Viewer, kAudit);
  db_.value(
      "CREATE FUNCTION refuse_export() RETURNS trigger LANGUAGE plpgsql AS "
      "$$BEGIN RAISE EXCEPTION 'no room'; END$$");
  db_.value("CREATE TRIGGER refuse_export BEFORE INSERT ON audit_log FOR EACH ROW "
            "WHEN (NEW.action = 'audit.export') EXECUTE FUNCTION refuse_export()");
  auto r = call("GET", "/api/v1/audit?format=ndjson", bearer(auditor.token));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(bodyOf(r)["error"], "audit_unavailable");
  EXPECT_THAT(r.body, ::testing::Not(::testing::HasSubstr("token.create")));
}

TEST_F(AuditTest, PruneDeletesRowsOlderThanKeepInBatches) {
  write(7, "old.thing");
  advance(std::chrono::hours(24 * 400));
  write(2, "new.thing");
  auto r = onLoop<int64_t>([&](auto done) { audit_->prune(std::chrono::hours(24 * 365), 3, done); });
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, 7);
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log"), "2");
}

}  // namespace
}  // namespace ductus::api::test
