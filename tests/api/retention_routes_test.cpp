// GET /retention and POST /retention/confirm over real HTTP and a real
// PostgreSQL, on an engine view of the test's own: the view as JSON, who
// may call them, a confirmation's row and audit row written in one
// transaction (neither without the other) before the engine is told, and
// each refusal before anything is written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <utility>

#include "api/retention_routes.h"
#include "tests/api/auth_fixture.h"

namespace ductus::api::test {
namespace {

using json = nlohmann::json;

// Keeps interface adt 7w while its project asks for 1w, and hears the
// confirmations.
class RetentionEngine : public EngineView {
 public:
  EngineState state() const override { return EngineState::Serving; }
  EngineInfo engine() const override { return {}; }
  void interfaces(std::function<void(Result<std::vector<InterfaceInfo>>)> done) override {
    done(std::vector<InterfaceInfo>{});
  }
  void retention(std::function<void(Result<RetentionInfo>)> done) override {
    RetentionInfo r;
    {
      std::lock_guard lock(mutex_);
      RetentionInterfaceInfo adt;
      adt.interface = "adt";
      adt.configured = "1w";
      adt.applied = applied_;
      adt.change = applied_ == "1w" ? "none" : "waiting";
      if (applied_ != "1w") adt.requestedAt = "2026-12-01T08:00:00Z";
      r.interfaces.push_back(adt);
    }
    r.periods.push_back(
        {"7w", "2026-10-05", "2026-10-12", "2026-11-30", true, 1200, 1200, 331776, 1, false});
    r.periods.push_back(
        {"held", "2026-10-01", "2026-11-01", "2026-11-01", true, 1, 1, 16384, 1, false});
    r.held = HeldInfo{1, 2, 0, 3, 16384, 3};
    RetentionRunInfo run;
    run.at = "2026-12-06T09:00:05Z";
    run.dropped = 2;
    run.moved = 3;
    run.kept = {"7w 2026-10-05"};
    r.lastRun = run;
    done(std::move(r));
  }
  Status retentionConfirmed(const std::string& interface, const std::string& tier) override {
    std::lock_guard lock(mutex_);
    calls_.push_back("confirmed " + interface + " " + tier);
    applied_ = tier;
    return {};
  }
  void setApplied(std::string tier) {
    std::lock_guard lock(mutex_);
    applied_ = std::move(tier);
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(calls_, {});
  }

 private:
  mutable std::mutex mutex_;
  std::string applied_ = "7w";
  std::vector<std::string> calls_;
};

class RetentionRoutesTest : public AuthFixture {
 protected:
  void SetUp() override {
    AuthFixture::SetUp();
    if (HasFatalFailure()) return;
    serveWith([&] { return retentionRoutes(deps_.get(), &engine_); });
    if (HasFatalFailure()) return;
    db_.value("INSERT INTO interfaces (name) VALUES ('adt')");
    db_.value(
        "INSERT INTO interface_retention (interface_id, tier, requested_tier, requested_at) "
        "SELECT id, 49, 7, now() FROM interfaces WHERE name = 'adt'");
    ops_ = makeToken("ops", Role::Operator, kNoPermission).token;
    viewer_ = makeToken("watcher", Role::Viewer, kNoPermission).token;
  }
  ductus::test::HttpReply confirm(const json& body, const std::string& token) {
    return call("POST", "/api/v1/retention/confirm", bearer(token),
                body.is_null() ? std::string() : body.dump());
  }
  std::string stored() {
    return db_.value(
        "SELECT tier || '/' || coalesce(requested_tier::text, '-') FROM interface_retention");
  }
  std::string auditCount() {
    return db_.value("SELECT count(*) FROM audit_log WHERE action = 'retention.confirm'");
  }

  RetentionEngine engine_;
  std::string ops_, viewer_;
};

TEST_F(RetentionRoutesTest, AViewerReadsTiersPeriodsTheHeldAreaAndTheLastRun) {
  auto r = call("GET", "/api/v1/retention", bearer(viewer_));
  ASSERT_EQ(r.status, 200) << r.body;
  auto b = bodyOf(r);
  ASSERT_EQ(b["interfaces"].size(), 1u);
  EXPECT_EQ(b["interfaces"][0]["interface"], "adt");
  EXPECT_EQ(b["interfaces"][0]["configured"], "1w");
  EXPECT_EQ(b["interfaces"][0]["applied"], "7w");
  EXPECT_EQ(b["interfaces"][0]["change"], "waiting");
  EXPECT_EQ(b["interfaces"][0]["requestedAt"], "2026-12-01T08:00:00Z");
  EXPECT_EQ(b["interfaces"][0]["quarantined"], "keep");
  ASSERT_EQ(b["periods"].size(), 2u);
  EXPECT_EQ(b["periods"][1]["tier"], "held");
  EXPECT_EQ(b["periods"][0]["unfinished"], 1);
  EXPECT_EQ(b["held"]["pending"], 1);
  EXPECT_EQ(b["held"]["quarantined"], 2);
  EXPECT_EQ(b["held"]["bytes"], 16384);
  EXPECT_EQ(b["lastRun"]["moved"], 3);
  EXPECT_EQ(b["lastRun"]["kept"][0], "7w 2026-10-05");
  EXPECT_EQ(call("GET", "/api/v1/retention").status, 401);
}

TEST_F(RetentionRoutesTest, AConfirmationWritesTheTierWithItsAuditRowThenTellsTheEngine) {
  auto r = confirm({{"interface", "adt"}, {"tier", "1w"}}, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  auto b = bodyOf(r);
  EXPECT_EQ(b["interface"], "adt");
  EXPECT_EQ(b["applied"], "1w");
  EXPECT_EQ(b["change"], "none");
  EXPECT_EQ(stored(), "7/-");
  EXPECT_EQ(db_.value("SELECT target_name || ' ' || (detail->>'from') || ' -> ' || "
                      "(detail->>'tier') || ' by ' || actor FROM audit_log WHERE action = "
                      "'retention.confirm'"),
            "adt 7w -> 1w by ops");
  EXPECT_THAT(engine_.take(), ::testing::ElementsAre("confirmed adt 1w"));
  // Again (a second tab): already so, nothing written.
  r = confirm({{"interface", "adt"}, {"tier", "1w"}}, ops_);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(auditCount(), "1");
}

TEST_F(RetentionRoutesTest, AConfirmationMadeElsewhereMeanwhileIsFollowedWithoutWritingAgain) {
  // The command line confirmed while the console's page was open.
  engine_.setApplied("1w");
  auto r = confirm({{"interface", "adt"}, {"tier", "1w"}}, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(bodyOf(r)["applied"], "1w");
  EXPECT_EQ(auditCount(), "0");
  EXPECT_THAT(engine_.take(), ::testing::ElementsAre("confirmed adt 1w"));
}

TEST_F(RetentionRoutesTest, RefusalsWriteNothingAndTellTheEngineNothing) {
  EXPECT_EQ(confirm({{"interface", "adt"}, {"tier", "1w"}}, viewer_).status, 403);
  EXPECT_EQ(confirm(nullptr, ops_).status, 400);
  EXPECT_EQ(confirm({{"interface", "adt"}}, ops_).status, 400);
  EXPECT_EQ(confirm({{"interface", "adt"}, {"tier", "2w"}}, ops_).status, 400);
  EXPECT_EQ(confirm({{"interface", 7}, {"tier", "1w"}}, ops_).status, 400);
  EXPECT_EQ(confirm({{"interface", "lab"}, {"tier", "1w"}}, ops_).status, 404);
  // Not what the project asks for: the caller saw something else.
  EXPECT_EQ(confirm({{"interface", "adt"}, {"tier", "7w"}}, ops_).status, 409);
  auto stale = confirm({{"interface", "adt"}, {"tier", "3w"}}, ops_);
  EXPECT_EQ(stale.status, 409) << stale.body;
  EXPECT_THAT(stale.body, ::testing::HasSubstr("the project asks for 1w"));
  // The audit log refuses: the tier is not written either.
  db_.value(
      "CREATE OR REPLACE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$ "
      "BEGIN RAISE EXCEPTION 'audit refused by the test'; END $$");
  db_.value(
      "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log FOR EACH ROW "
      "EXECUTE FUNCTION refuse_audit()");
  auto refused = confirm({{"interface", "adt"}, {"tier", "1w"}}, ops_);
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(stored(), "49/7");
  EXPECT_EQ(auditCount(), "0");
  EXPECT_TRUE(engine_.take().empty());
}

}  // namespace
}  // namespace ductus::api::test
