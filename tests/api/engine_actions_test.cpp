// The operator's actions on the engine over real HTTP and a real
// PostgreSQL, on an engine view of the test's own: pause / resume (the
// pause's row and its audit row in one transaction, the loops held only
// after the commit), stop / start of an interface's intake (likewise),
// restart of a stopped interface and drain (their audit row first: refused
// with 503 when it can't be written), and who may call them; and the
// read-only configuration view, which never shows a secret.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <utility>

#include "api/engine_actions.h"
#include "api/interface_configuration.h"
#include "common/config/loader.h"
#include "tests/api/auth_fixture.h"
#include "tests/common/config/project_dir.h"

namespace ductus::api::test {
namespace {

using json = nlohmann::json;

// Runs interface adt (mllp; destinations ehr and billing) and routed
// (internal), and hears what the actions ask of it; its configuration is
// the project's the test loads, when it loads one.
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
    InterfaceInfo routed;
    routed.name = "routed";
    routed.source = "internal";
    done(std::vector<InterfaceInfo>{adt, routed});
  }
  Status setIntakeStopped(const std::string& interface,
                          std::optional<IntakeStopInfo> stop) override {
    std::lock_guard lock(mutex_);
    calls.push_back((stop ? "stop " : "start ") + interface +
                    (stop ? " by " + stop->by + " reason " + stop->reason.value_or("none") : ""));
    return {};
  }
  const config::InterfaceConfig* interfaceConfig(const std::string& interface) const override {
    return project ? project->find(interface) : nullptr;
  }
  std::optional<config::Project> project;
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
    serveWith([&] {
      auto routes = engineActionRoutes(deps_.get(), &engine_);
      for (auto& r : interfaceConfigurationRoutes(&engine_)) routes.push_back(std::move(r));
      return routes;
    });
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
  std::vector<std::string> stops() {
    return db_.column(
        "SELECT interface || ' ' || stopped_by || ' ' || coalesce(reason, '-') FROM "
        "interface_stops ORDER BY 1");
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

TEST_F(EngineActionsTest, AStopIsStoredWithItsAuditRowThenClosesAndAgainIsAConflict) {
  auto r = post("/api/v1/interfaces/adt/stop", {{"reason", "sender floods us"}}, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  auto b = bodyOf(r);
  EXPECT_EQ(b["interface"], "adt");
  EXPECT_EQ(b["intakeStopped"]["by"], "ops");
  EXPECT_EQ(b["intakeStopped"]["reason"], "sender floods us");
  EXPECT_THAT(b["intakeStopped"]["since"].get<std::string>(), ::testing::EndsWith("Z"));
  EXPECT_THAT(stops(), ::testing::ElementsAre("adt ops sender floods us"));
  EXPECT_EQ(db_.value("SELECT target_kind || ' ' || target_name || ' ' || actor || ' ' || "
                      "(detail->>'reason') FROM audit_log WHERE action = 'interface.stop'"),
            "interface adt ops sender floods us");
  EXPECT_THAT(engine_.take(), ::testing::ElementsAre("stop adt by ops reason sender floods us"));

  // Stopped already: 409, the first stop stays, nothing audited or asked.
  r = post("/api/v1/interfaces/adt/stop", nullptr, ops2_);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(bodyOf(r)["error"], "conflict");
  EXPECT_THAT(stops(), ::testing::ElementsAre("adt ops sender floods us"));
  EXPECT_EQ(auditCount("interface.stop"), "1");
  EXPECT_TRUE(engine_.take().empty());

  r = post("/api/v1/interfaces/adt/start", nullptr, ops2_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(bodyOf(r)["intakeStopped"].is_null()) << r.body;
  EXPECT_TRUE(stops().empty());
  // The start's row says which stop it ended.
  EXPECT_EQ(db_.value("SELECT actor || ' ' || (detail->>'by') || ' ' || (detail->>'reason') FROM "
                      "audit_log WHERE action = 'interface.start'"),
            "night-ops ops sender floods us");
  EXPECT_THAT(engine_.take(), ::testing::ElementsAre("start adt"));
  r = post("/api/v1/interfaces/adt/start", nullptr, ops_);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(auditCount("interface.start"), "1");

  // No body (or no reason): a stop without a reason.
  r = post("/api/v1/interfaces/adt/stop", nullptr, ops_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(bodyOf(r)["intakeStopped"]["reason"].is_null()) << r.body;
  EXPECT_THAT(stops(), ::testing::ElementsAre("adt ops -"));
  EXPECT_THAT(engine_.take(), ::testing::ElementsAre("stop adt by ops reason none"));
}

TEST_F(EngineActionsTest, AStopNeedsAnInterfaceThisEngineRunsWithAnIntakeOfItsOwn) {
  EXPECT_EQ(post("/api/v1/interfaces/lab/stop", nullptr, ops_).status, 404);
  EXPECT_EQ(post("/api/v1/interfaces/lab/start", nullptr, ops_).status, 404);
  auto r = post("/api/v1/interfaces/routed/stop", nullptr, ops_);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_THAT(bodyOf(r)["message"].get<std::string>(), ::testing::HasSubstr("internal"));
  EXPECT_EQ(post("/api/v1/interfaces/adt/stop", {{"reason", 5}}, ops_).status, 400);
  EXPECT_EQ(post("/api/v1/interfaces/adt/stop", {{"reason", std::string(1001, 'x')}}, ops_).status,
            400);
  // A NUL is refused in the engine's words, not PostgreSQL's.
  r = post("/api/v1/interfaces/adt/stop", {{"reason", std::string("down\0now", 8)}}, ops_);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.body, ::testing::Not(::testing::HasSubstr("ERROR:")));
  EXPECT_TRUE(stops().empty());
  EXPECT_TRUE(engine_.take().empty());
  EXPECT_EQ(auditCount("interface.stop"), "0");

  refuseAudit();
  EXPECT_EQ(post("/api/v1/interfaces/adt/stop", nullptr, ops_).status, 503);
  EXPECT_TRUE(stops().empty()) << "the stop's row went with its refused audit row";
  EXPECT_TRUE(engine_.take().empty());
}

// The secrets interface.yaml holds, one of each kind the model keeps.
constexpr const char* kSecrets[] = {"sftp-Pa55word", "url-Pa55word",     "query-T0ken",
                                    "header-T0ken",  "PRIVATE-KEY-BODY", "api-Key-Value"};

TEST_F(EngineActionsTest, TheConfigurationShowsTheInterfaceAsRunAndNoSecret) {
  config::test::ProjectDir dir;
  dir.iface("feed",
            "source:\n"
            "  mllp:\n"
            "    listen: 127.0.0.1:2575\n"
            "    allow: [10.1.2.3, 10.20.0.0/16]\n"
            "format: hl7v2\n"
            "ordering: { key: PID.3.1, partitions: 8 }\n"
            "dedupe: { key: MSH.10, window: 2d }\n"
            "retention: 3w\n"
            "monitor: { active_within: 30m, behind: { waiting: 5 } }\n"
            "destinations:\n"
            "  ehr:\n"
            "    http:\n"
            "      url: \"https://ductus:url-Pa55word@ehr.example:8443/hl7?key=query-T0ken\"\n"
            "      headers: { Authorization: \"Bearer header-T0ken\", X-Api-Key: api-Key-Value }\n"
            "    retry: { max_attempts: 5 }\n"
            "  lab:\n"
            "    sftp:\n"
            "      host: lab.example\n"
            "      user: ductus\n"
            "      password: sftp-Pa55word\n"
            "      private_key: \"-----BEGIN OPENSSH PRIVATE KEY-----\\nPRIVATE-KEY-BODY\\n"
            "-----END OPENSSH PRIVATE KEY-----\\n\"\n"
            "      host_key: \"ssh-ed25519 "
            "AAAAC3NzaC1lZDI1NTE5AAAAIAkUt5CgstUNshcz4pink7vlO2LXNGaqbB//9HWYoX6I\"\n"
            "      path: inbox/\n"
            "  billing:\n"
            "    mllp: { host: billing.example, port: 2576 }\n"
            "    transform: toBilling\n");
  auto loaded = dir.load();
  ASSERT_TRUE(loaded.project) << dir.errors();
  engine_.project = std::move(loaded.project);

  auto r = call("GET", "/api/v1/interfaces/feed/configuration", bearer(viewer_));
  ASSERT_EQ(r.status, 200) << r.body;
  for (const char* secret : kSecrets)
    EXPECT_THAT(r.body, ::testing::Not(::testing::HasSubstr(secret))) << secret;
  auto b = bodyOf(r);
  EXPECT_EQ(b["name"], "feed");
  EXPECT_EQ(b["source"]["kind"], "mllp");
  EXPECT_EQ(b["source"]["listen"], "127.0.0.1:2575");
  EXPECT_TRUE(b["source"]["tls"].is_null());
  EXPECT_EQ(b["source"]["allow"], (json{"10.1.2.3", "10.20.0.0/16"}));
  EXPECT_EQ(b["format"], "hl7v2");
  EXPECT_EQ(b["ordering"], (json{{"key", "PID.3.1"}, {"partitions", 8}}));
  EXPECT_EQ(b["dedupe"], (json{{"key", "MSH.10"}, {"window", "2d"}}));
  EXPECT_EQ(b["retention"], "3w");
  EXPECT_EQ(b["monitor"]["activeWithin"]["within"], "30m");
  EXPECT_EQ(b["monitor"]["behind"]["waiting"], 5);
  ASSERT_EQ(b["destinations"].size(), 3u) << b.dump();
  std::map<std::string, json> dests;
  for (auto& d : b["destinations"]) dests[d["name"]] = d;
  EXPECT_EQ(dests["ehr"]["kind"], "http");
  EXPECT_EQ(dests["ehr"]["target"], "https://***@ehr.example:8443/hl7?***");
  EXPECT_EQ(dests["ehr"]["headers"], (json{{"Authorization", "***"}, {"X-Api-Key", "***"}}));
  EXPECT_EQ(dests["ehr"]["retry"]["maxAttempts"], 5);
  EXPECT_EQ(dests["lab"]["kind"], "sftp");
  EXPECT_EQ(dests["lab"]["target"], "ductus@lab.example:22:inbox/");
  EXPECT_EQ(dests["lab"]["server"]["password"], "***");
  EXPECT_EQ(dests["lab"]["server"]["privateKey"], (json{{"inline", "***"}}));
  EXPECT_EQ(dests["billing"]["target"], "billing.example:2576");
  EXPECT_EQ(dests["billing"]["transform"], "toBilling");
  EXPECT_TRUE(dests["billing"]["tls"].is_null());

  EXPECT_EQ(call("GET", "/api/v1/interfaces/lab/configuration", bearer(viewer_)).status, 404);
  EXPECT_EQ(call("GET", "/api/v1/interfaces/feed/configuration").status, 401);
}

TEST(RedactedUrl, TakesOffUserInformationAndTheQueryOnly) {
  EXPECT_EQ(redactedUrl("https://ehr.example/hl7"), "https://ehr.example/hl7");
  EXPECT_EQ(redactedUrl("https://u:p@ehr.example/hl7"), "https://***@ehr.example/hl7");
  EXPECT_EQ(redactedUrl("http://u@h:80"), "http://***@h:80");
  EXPECT_EQ(redactedUrl("https://h/p?token=x&a=b#frag"), "https://h/p?***#frag");
  EXPECT_EQ(redactedUrl("https://h/p@q"), "https://h/p@q") << "an @ in the path is no user";
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
  for (auto [method, path] :
       std::vector<std::pair<std::string, std::string>>{{"POST", pausePath},
                                                        {"POST", resumePath},
                                                        {"POST", "/api/v1/interfaces/adt/restart"},
                                                        {"POST", "/api/v1/interfaces/adt/stop"},
                                                        {"POST", "/api/v1/interfaces/adt/start"},
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
  EXPECT_TRUE(stops().empty());
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log WHERE action LIKE 'destination.%' OR "
                      "action LIKE 'engine.%' OR action LIKE 'interface.%'"),
            "0");
}

}  // namespace
}  // namespace ductus::api::test
