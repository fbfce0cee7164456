// The operator's actions on the engine over real HTTP and a real
// PostgreSQL, on an engine view of the test's own: pause / resume (the
// pause's row and its audit row in one transaction, the loops held only
// after the commit), restart of a stopped interface and drain (their audit
// row first: refused with 503 when it can't be written), and who may call
// them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <utility>

#include "api/engine_actions.h"
#include "tests/api/auth_fixture.h"

namespace ductus::api::test {
namespace {

using json = nlohmann::json;

// Runs interface adt (mllp; destinations ehr and billing) and hears what
// the actions ask of it.
class ActionEngine : public EngineView {
 public:
  EngineState state() const override {
    std::lock_guard lock(mutex_);
    return draining ? EngineState::Draining : EngineState::Serving;
  }
  EngineInfo engine() const override { return {}; }
  void interfaces(std::function<void(Result<std::vector<InterfaceInfo>>)> done) override {
    InterfaceInfo adt;
    adt.name = "adt";
    adt.source = "mllp";
    {
      std::lock_guard lock(mutex_);
      adt.state = stopped ? "stopped" : "running";
    }
    for (const char* d : {"ehr", "billing"}) {
      DestinationInfo di;
      di.name = d;
      adt.destinations.push_back(di);
    }
    done(std::vector<InterfaceInfo>{adt});
  }
  Status setPaused(const std::string& interface, const std::string& destination,
                   std::optional<PauseInfo> pause) override {
    std::lock_guard lock(mutex_);
    calls.push_back((pause ? "pause " : "resume ") + interface + "/" + destination +
                    (pause ? " by " + pause->by + " reasons " +
                                 std::to_string(pause->reasons.size())
                           : ""));
    return {};
  }
  void restartInterface(const std::string& interface, std::function<void(Status)> done) override {
    Status answer;
    {
      std::lock_guard lock(mutex_);
      calls.push_back("restart " + interface);
      if (loadError)
        answer = Error{"interfaces/adt/transform.js:1:1: SyntaxError", ErrorKind::Code};
      else stopped = false;
    }
    done(answer);
  }
  Status startDrain(bool stop) override {
    std::lock_guard lock(mutex_);
    calls.push_back(std::string("drain") + (stop ? " stop" : ""));
    draining = true;
    stopWhenDrained = stop;
    return {};
  }
  Status stopDrain() override {
    std::lock_guard lock(mutex_);
    calls.push_back("undrain");
    draining = false;
    return {};
  }
  void drainStatus(std::function<void(Result<DrainInfo>)> done) override {
    DrainInfo d;
    {
      std::lock_guard lock(mutex_);
      d.draining = draining;
      d.stopWhenDrained = stopWhenDrained;
    }
    d.pending = 3;
    done(d);
  }

  std::vector<std::string> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(calls, {});
  }
  void set(bool isStopped, bool failsToLoad) {
    std::lock_guard lock(mutex_);
    stopped = isStopped;
    loadError = failsToLoad;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> calls;
  bool stopped = false, loadError = false, draining = false, stopWhenDrained = false;
};

class EngineActionsTest : public AuthFixture {
 protected:
  void SetUp() override {
    AuthFixture::SetUp();
    if (HasFatalFailure()) return;
    serveWith([&] { return engineActionRoutes(deps_.get(), &engine_); });
    if (HasFatalFailure()) return;
    db_.value("INSERT INTO interfaces (name) VALUES ('adt')");
    db_.value(
        "INSERT INTO destinations (interface_id, name) SELECT i.id, d FROM interfaces i, "
        "unnest(ARRAY['ehr', 'billing']) d");
    ops_ = makeToken("ops", Role::Operator, kNoPermission).token;
    ops2_ = makeToken("night-ops", Role::Operator, kNoPermission).token;
    viewer_ = makeToken("watcher", Role::Viewer, kNoPermission).token;
  }

  ductus::test::HttpReply post(const std::string& path, const json& body,
                               const std::string& token) {
    return call("POST", path, bearer(token), body.is_null() ? std::string() : body.dump());
  }
  std::string auditCount(const std::string& action) {
    return db_.value("SELECT count(*) FROM audit_log WHERE action = $1", {action});
  }
  std::vector<std::string> pauses() {
    return db_.column(
        "SELECT d.name || ' ' || p.paused_by || ' ' || jsonb_array_length(p.reasons) "
        "FROM destination_pauses p JOIN destinations d ON d.id = p.destination_id ORDER BY 1");
  }
  void refuseAudit() {
    db_.value(
        "CREATE OR REPLACE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN RAISE EXCEPTION 'audit refused by the test'; END $$");
    db_.value(
        "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log FOR EACH ROW "
        "EXECUTE FUNCTION refuse_audit()");
  }

  const std::string pausePath = "/api/v1/interfaces/adt/destinations/ehr/pause";
  const std::string resumePath = "/api/v1/interfaces/adt/destinations/ehr/resume";
  ActionEngine engine_;
  std::string ops_, ops2_, viewer_;
};

TEST_F(EngineActionsTest, APauseIsStoredWithItsAuditRowThenHoldsAndAgainAddsAReason) {
  auto r = post(pausePath, {{"reason", "receiver down for maintenance"}}, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  auto b = bodyOf(r);
  EXPECT_EQ(b["interface"], "adt");
  EXPECT_EQ(b["destination"], "ehr");
  EXPECT_EQ(b["paused"]["by"], "ops");
  EXPECT_THAT(b["paused"]["since"].get<std::string>(), ::testing::EndsWith("Z"));
  ASSERT_EQ(b["paused"]["reasons"].size(), 1u);
  EXPECT_EQ(b["paused"]["reasons"][0]["reason"], "receiver down for maintenance");
  EXPECT_THAT(pauses(), ::testing::ElementsAre("ehr ops 1"));
  EXPECT_EQ(auditCount("destination.pause"), "1");
  EXPECT_EQ(db_.value("SELECT target_name || ' ' || (detail->>'reason') FROM audit_log WHERE "
                      "action = 'destination.pause'"),
            "adt/ehr receiver down for maintenance");
  EXPECT_THAT(engine_.take(), ::testing::ElementsAre("pause adt/ehr by ops reasons 1"));

  // Again, by someone else: the first time and author stay, a reason is added.
  std::string since = b["paused"]["since"];
  r = post(pausePath, {{"reason", "still down"}}, ops2_);
  ASSERT_EQ(r.status, 200) << r.body;
  b = bodyOf(r);
  EXPECT_EQ(b["paused"]["by"], "ops");
  EXPECT_EQ(b["paused"]["since"], since);
  ASSERT_EQ(b["paused"]["reasons"].size(), 2u);
  EXPECT_EQ(b["paused"]["reasons"][1]["by"], "night-ops");
  EXPECT_EQ(b["paused"]["reasons"][1]["reason"], "still down");
  EXPECT_THAT(pauses(), ::testing::ElementsAre("ehr ops 2"));
  EXPECT_THAT(engine_.take(), ::testing::ElementsAre("pause adt/ehr by ops reasons 2"));

  r = post(resumePath, nullptr, ops2_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(bodyOf(r)["paused"].is_null()) << r.body;
  EXPECT_TRUE(pauses().empty());
  EXPECT_EQ(auditCount("destination.resume"), "1");
  EXPECT_THAT(engine_.take(), ::testing::ElementsAre("resume adt/ehr"));
  r = post(resumePath, nullptr, ops_);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(bodyOf(r)["error"], "conflict");
  EXPECT_EQ(auditCount("destination.resume"), "1");
}

TEST_F(EngineActionsTest, APauseNeedsAReasonAndADestinationThisEngineDelivers) {
  EXPECT_EQ(post(pausePath, nullptr, ops_).status, 400);
  EXPECT_EQ(post(pausePath, json::object(), ops_).status, 400);
  EXPECT_EQ(post(pausePath, {{"reason", " \t"}}, ops_).status, 400);
  EXPECT_EQ(post(pausePath, {{"reason", std::string(1001, 'x')}}, ops_).status, 400);
  // A NUL is refused in the engine's words, not PostgreSQL's.
  auto nul = post(pausePath, {{"reason", std::string("down\0for now", 12)}}, ops_);
  EXPECT_EQ(nul.status, 400) << nul.body;
  for (const char* mark : {"ERROR:", "CONTEXT", "HINT", "portal", "audit"})
    EXPECT_THAT(nul.body, ::testing::Not(::testing::HasSubstr(mark)));
  auto r = post("/api/v1/interfaces/adt/destinations/nosuch/pause", {{"reason", "x"}}, ops_);
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(post("/api/v1/interfaces/lab/destinations/ehr/pause", {{"reason", "x"}}, ops_).status,
            404);
  EXPECT_TRUE(pauses().empty());
  EXPECT_TRUE(engine_.take().empty());
  EXPECT_EQ(auditCount("destination.pause"), "0");
}

TEST_F(EngineActionsTest, RestartLoadsAStoppedInterfaceAndRefusesARunningOne) {
  auto r = post("/api/v1/interfaces/adt/restart", nullptr, ops_);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(auditCount("interface.restart"), "0");
  EXPECT_TRUE(engine_.take().empty());
  EXPECT_EQ(post("/api/v1/interfaces/lab/restart", nullptr, ops_).status, 404);

  engine_.set(true, true);
  r = post("/api/v1/interfaces/adt/restart", nullptr, ops_);
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_THAT(bodyOf(r)["message"].get<std::string>(), ::testing::HasSubstr("SyntaxError"));

  engine_.set(true, false);
  r = post("/api/v1/interfaces/adt/restart", nullptr, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(bodyOf(r), (json{{"interface", "adt"}, {"state", "running"}}));
  EXPECT_THAT(engine_.take(), ::testing::ElementsAre("restart adt", "restart adt"));
  EXPECT_EQ(auditCount("interface.restart"), "2");
  EXPECT_EQ(db_.value("SELECT DISTINCT target_kind || ' ' || target_name || ' ' || actor FROM "
                      "audit_log WHERE action = 'interface.restart'"),
            "interface adt ops");
}

TEST_F(EngineActionsTest, DrainClosesUntilUndrainedAndSaysItsStatus) {
  auto r = call("GET", "/api/v1/engine/drain", bearer(viewer_));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(bodyOf(r), (json{{"draining", false},
                             {"stopWhenDrained", false},
                             {"storesInFlight", 0},
                             {"pending", 3},
                             {"drained", false}}));
  EXPECT_EQ(post("/api/v1/engine/drain", {{"stop", "yes"}}, ops_).status, 400);
  EXPECT_EQ(call("DELETE", "/api/v1/engine/drain", bearer(ops_)).status, 409);

  r = post("/api/v1/engine/drain", {{"stop", true}}, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(bodyOf(r)["draining"], true);
  EXPECT_EQ(bodyOf(r)["stopWhenDrained"], true);
  EXPECT_EQ(db_.value("SELECT (detail->>'stop') || ' ' || target_kind FROM audit_log WHERE "
                      "action = 'engine.drain'"),
            "true engine");
  // No body: a drain without a stop.
  r = post("/api/v1/engine/drain", nullptr, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(bodyOf(r)["stopWhenDrained"], false);

  r = call("DELETE", "/api/v1/engine/drain", bearer(ops_));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(bodyOf(r)["draining"], false);
  EXPECT_EQ(auditCount("engine.undrain"), "1");
  EXPECT_THAT(engine_.take(), ::testing::ElementsAre("drain stop", "drain", "undrain"));
}

TEST_F(EngineActionsTest, WithoutTheirAuditRowNoActionIsTaken) {
  refuseAudit();
  engine_.set(true, false);
  EXPECT_EQ(post(pausePath, {{"reason", "x"}}, ops_).status, 503);
  EXPECT_TRUE(pauses().empty());
  EXPECT_EQ(post("/api/v1/interfaces/adt/restart", nullptr, ops_).status, 503);
  EXPECT_EQ(post("/api/v1/engine/drain", {{"stop", true}}, ops_).status, 503);
  EXPECT_TRUE(engine_.take().empty());

  db_.value("DROP TRIGGER refuse_audit ON audit_log");
  EXPECT_EQ(post(pausePath, {{"reason", "x"}}, ops_).status, 200);
  refuseAudit();
  EXPECT_EQ(post(resumePath, nullptr, ops_).status, 503);
  EXPECT_THAT(pauses(), ::testing::ElementsAre("ehr ops 1"));
  EXPECT_EQ(call("DELETE", "/api/v1/engine/drain", bearer(ops_)).status, 409);  // not draining
}

TEST_F(EngineActionsTest, OnlyOperatorsActAndViewersReadTheDrain) {
  engine_.set(true, false);
  for (auto [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"POST", pausePath},
           {"POST", resumePath},
           {"POST", "/api/v1/interfaces/adt/restart"},
           {"POST", "/api/v1/engine/drain"},
           {"DELETE", "/api/v1/engine/drain"}}) {
    auto r = call(method, path, bearer(viewer_), json{{"reason", "x"}}.dump());
    EXPECT_EQ(r.status, 403) << method << " " << path << ": " << r.body;
    EXPECT_EQ(bodyOf(r)["error"], "forbidden") << r.body;
    r = call(method, path, {}, json{{"reason", "x"}}.dump());
    EXPECT_EQ(r.status, 401) << method << " " << path;
    EXPECT_FALSE(bodyOf(r)["error"].is_null()) << r.body;
  }
  EXPECT_EQ(call("GET", "/api/v1/engine/drain").status, 401);
  EXPECT_TRUE(engine_.take().empty());
  EXPECT_TRUE(pauses().empty());
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log WHERE action LIKE 'destination.%' OR "
                      "action LIKE 'engine.%' OR action LIKE 'interface.%'"),
            "0");
}

}  // namespace
}  // namespace ductus::api::test
