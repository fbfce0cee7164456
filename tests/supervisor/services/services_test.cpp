// The script services as the engine answers them (issue #5): ProjectServices
// behind real worker processes, against a real HTTP server on 127.0.0.1
// (tests/senders/receivers.*), a real PostgreSQL and a real secrets file.
// A few cases call ProjectServices directly where no script is needed to
// show the behaviour (a server that is down, a response over the limit).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/config/secrets.h"
#include "common/tls/certificates.h"
#include "supervisor/services/project_services.h"
#include "tests/supervisor/workers/pool_fixture.h"
#include "tests/support/pg_cluster.h"
#include "tests/support/ports.h"
#include "tests/support/receivers.h"
#include "tests/support/script_server.h"
#include "tests/support/tds_responder.h"
#include "tests/support/test_ca.h"
#include "tests/support/test_database.h"

namespace ductus::test {
namespace {

using supervisor::Outcome;
using supervisor::ProjectServices;
using supervisor::ServiceCall;
using Kind = supervisor::Outcome::Kind;
using nlohmann::json;

constexpr const char* kKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

// One module that does what the payload (JSON) asks, so each test loads it
// once and calls it many times.
const char* kModule = R"JS(
import { fetch, api, env, secret, db } from 'ductus';
async function answer(r) {
  return JSON.stringify({ status: r.status, ok: r.ok, headers: r.headers, body: await r.text() });
}
export async function transform(s) {
  const q = JSON.parse(s);
  switch (q.op) {
    case 'fetch': return answer(await fetch(q.url, q.init));
    case 'api': {
      const a = api(q.name);
      return answer(await (q.method === 'get' ? a.get(q.path, q.init) : a[q.method](q.path, q.body, q.init)));
    }
    case 'env': return await env(q.name);
    case 'secret': return await secret(q.name);
    case 'query': return JSON.stringify(await db(q.db).query(q.sql, q.params));
    case 'execute': return JSON.stringify(await db(q.db).execute(q.sql, q.params));
  }
  throw new Error('unknown op ' + q.op);
}
)JS";

class ServicesTest : public PoolTest {
 protected:
  void SetUp() override {
    PoolTest::SetUp();
    // The key comes from the project's key file only, whatever the shell has.
    ::unsetenv("DUCTUS_SECRETS_KEY");
    project_cfg_.root = project_;
    project_cfg_.environment = "test";
    config::ApiResource lab;
    lab.name = "lab";
    lab.url = http_.url("/base");
    lab.headers = {{"Authorization", "Bearer t0ken"}};
    lab.timeout = std::chrono::seconds(5);
    project_cfg_.resources.apis.emplace("lab", lab);
    writeFile("interfaces/svc/transform.js", kModule);
  }

  void TearDown() override {
    if (pool_) {
      bool down = false;
      pool_->shutdown([&] { down = true; });
      runUntil([&] { return down; }, std::chrono::seconds(5));
      pool_.reset();
    }
    real_.reset();  // its handles close while the loop still runs
    PoolTest::TearDown();
  }

  // The services as configured so far, and a pool of workers asking them.
  ProjectServices& services(ProjectServices::Options o = {}) {
    if (!real_) real_ = std::make_unique<ProjectServices>(&loop_, project_cfg_, o);
    return *real_;
  }

  supervisor::WorkerPool::FunctionId loadModule() {
    supervisor::WorkerPool::Options o;
    o.binary = ductusBinary();
    o.sharedWorkers = 1;
    pool_ = std::make_unique<supervisor::WorkerPool>(&loop_, o, services());
    auto fn = load(spec("svc", "text"));
    EXPECT_TRUE(fn) << (fn ? "" : fn.error().message);
    return fn ? *fn : supervisor::WorkerPool::FunctionId{};
  }

  Outcome run(supervisor::WorkerPool::FunctionId fn, const json& q) { return call(fn, q.dump()); }

  // One request straight to the services, waiting for its answer.
  Result<std::string> ask(ServiceCall c) {
    std::optional<Result<std::string>> got;
    services().call(c, [&](Result<std::string> r) { got = std::move(r); });
    runUntil([&] { return got.has_value(); }, std::chrono::seconds(10));
    if (!got) return Error{"no answer"};
    return *got;
  }

  static ServiceCall fetchCall(const std::string& url, const std::string& init = "{}") {
    ServiceCall c{};
    c.kind = ServiceCall::Kind::Fetch;
    c.url = url;
    c.initJson = init;
    return c;
  }

  void writeSecrets(const std::string& keyHex, const std::map<std::string, std::string>& values) {
    writeFile("secrets.key", keyHex);
    project_cfg_.engine.secretsKeyFile = project_ / "secrets.key";
    auto key = config::parseSecretsKey(keyHex);
    ASSERT_TRUE(key);
    auto file = config::SecretsFile::open(project_ / "secrets" / "test.json", *key);
    ASSERT_TRUE(file) << file.error().message;
    for (auto& [k, v] : values) file->set(k, v);
    std::filesystem::create_directories(project_ / "secrets");
    ASSERT_TRUE(file->save());
  }

  // An interface "own" (isolation: dedicated, a 2 s timeout) with one
  // connection of its own to `database`; then the services, where the
  // other interfaces' calls have 20 s.
  void startWithOwnPool(const std::string& database) {
    config::InterfaceConfig own;
    own.name = "own";
    own.isolation = config::Isolation::Dedicated;
    own.dedicatedPools = {{database, 1}};
    own.timeout = std::chrono::seconds(2);
    project_cfg_.interfaces.push_back(own);
    ProjectServices::Options o;
    o.dbTimeout = std::chrono::seconds(20);
    services(o);
  }

  senders::test::HttpReceiver http_;
  config::Project project_cfg_;
  std::unique_ptr<ProjectServices> real_;
};

TEST_F(ServicesTest, FetchToADeclaredOriginAnswersStatusHeadersAndBodyAndSendsMethodHeadersBody) {
  auto fn = loadModule();
  auto out = run(fn, {{"op", "fetch"},
                      {"url", http_.url("/hello?q=1")},
                      {"init", {{"method", "post"}, {"headers", {{"X-Trace", "7"}}}, {"body", {{"a", 1}}}}}});
  ASSERT_EQ(out.kind, Kind::Output) << out.data;
  auto r = json::parse(out.data);
  EXPECT_EQ(r["status"], 200);
  EXPECT_EQ(r["ok"], true);
  EXPECT_EQ(r["body"], "ok");
  EXPECT_EQ(r["headers"]["content-length"], "2");
  auto seen = http_.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].path, "/hello?q=1");
  EXPECT_EQ(seen[0].body, "{\"a\":1}");
  EXPECT_EQ(seen[0].header("Content-Type"), "application/json");
  EXPECT_EQ(seen[0].header("X-Trace"), "7");
  // A plain fetch() is not an api() call: the api's token is not sent.
  EXPECT_EQ(seen[0].header("Authorization"), "");
}

TEST_F(ServicesTest, Fetch503And429AreTransientSoTheMessageIsRetriedUnlessRetryIsFalse) {
  auto fn = loadModule();
  auto a = run(fn, {{"op", "fetch"}, {"url", http_.url("/status/503")}});
  EXPECT_EQ(a.kind, Kind::Transient) << a.data;
  EXPECT_NE(a.data.find("503"), std::string::npos) << a.data;
  auto b = run(fn, {{"op", "fetch"}, {"url", http_.url("/status/429")}});
  EXPECT_EQ(b.kind, Kind::Transient) << b.data;
  auto c = run(fn, {{"op", "fetch"}, {"url", http_.url("/status/503")}, {"init", {{"retry", false}}}});
  ASSERT_EQ(c.kind, Kind::Output) << c.data;
  EXPECT_EQ(json::parse(c.data)["status"], 503);
  // A 404 is an answer the script reads, never a retry.
  auto d = run(fn, {{"op", "fetch"}, {"url", http_.url("/status/404")}});
  ASSERT_EQ(d.kind, Kind::Output) << d.data;
  EXPECT_EQ(json::parse(d.data)["status"], 404);
  EXPECT_EQ(http_.requests().size(), 4u);
}

TEST_F(ServicesTest, FetchToAnUndeclaredOriginIsRefusedNamingTheUrlAndHowToDeclareIt) {
  auto fn = loadModule();
  uint16_t other = 0;
  Fd otherPort = closedPort(&other);  // an origin no api declares
  std::string url = "http://127.0.0.1:" + std::to_string(other) + "/patients?token=abc";
  auto out = run(fn, {{"op", "fetch"}, {"url", url}});
  ASSERT_EQ(out.kind, Kind::Quarantine) << out.data;
  EXPECT_NE(out.data.find("http://127.0.0.1:" + std::to_string(other) + "/patients"), std::string::npos)
      << out.data;
  EXPECT_NE(out.data.find("resources.yaml"), std::string::npos) << out.data;
  EXPECT_NE(out.data.find("apis:"), std::string::npos) << out.data;
  EXPECT_EQ(out.data.find("token=abc"), std::string::npos) << "the query is never shown: " << out.data;
  // The same host on the declared port but another scheme is another origin.
  auto https = run(fn, {{"op", "fetch"}, {"url", "https://127.0.0.1:" + std::to_string(http_.port()) + "/"}});
  EXPECT_EQ(https.kind, Kind::Quarantine) << https.data;
  auto file = run(fn, {{"op", "fetch"}, {"url", "file:///etc/passwd"}});
  EXPECT_EQ(file.kind, Kind::Quarantine) << file.data;
  EXPECT_TRUE(http_.requests().empty());
}

TEST_F(ServicesTest, ApiPutsThePathUnderItsUrlWithItsHeadersWhichTheScriptMayOverride) {
  auto fn = loadModule();
  auto a = run(fn, {{"op", "api"}, {"name", "lab"}, {"method", "get"}, {"path", "/orders?x=1"}});
  ASSERT_EQ(a.kind, Kind::Output) << a.data;
  auto b = run(fn, {{"op", "api"},
                    {"name", "lab"},
                    {"method", "put"},
                    {"path", "/orders/7"},
                    {"body", "PID|1"},
                    {"init", {{"headers", {{"authorization", "Bearer mine"}}}}}});
  ASSERT_EQ(b.kind, Kind::Output) << b.data;
  auto seen = http_.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "GET");
  EXPECT_EQ(seen[0].path, "/base/orders?x=1");
  EXPECT_EQ(seen[0].header("Authorization"), "Bearer t0ken");
  EXPECT_EQ(seen[1].method, "PUT");
  EXPECT_EQ(seen[1].path, "/base/orders/7");
  EXPECT_EQ(seen[1].body, "PID|1");
  EXPECT_EQ(seen[1].header("Authorization"), "Bearer mine");
  EXPECT_EQ(seen[1].header("Content-Type"), "text/plain;charset=UTF-8");

  // A path that would move the request to another host, and an unknown api.
  auto evil = run(fn, {{"op", "api"}, {"name", "lab"}, {"method", "get"}, {"path", "@evil.example/"}});
  EXPECT_EQ(evil.kind, Kind::Quarantine) << evil.data;
  EXPECT_NE(evil.data.find("must start with /"), std::string::npos) << evil.data;
  auto unknown = run(fn, {{"op", "api"}, {"name", "nope"}, {"method", "get"}, {"path", "/"}});
  EXPECT_EQ(unknown.kind, Kind::Quarantine) << unknown.data;
  EXPECT_NE(unknown.data.find("no such api in resources.yaml"), std::string::npos) << unknown.data;
  EXPECT_EQ(http_.requests().size(), 2u);
}

TEST_F(ServicesTest, AServerThatIsDownOrTooSlowIsTransient) {
  config::ApiResource down;
  down.name = "down";
  uint16_t downPort = 0;
  Fd held = closedPort(&downPort);  // refuses connections while held
  ASSERT_TRUE(held.valid());
  down.url = "http://127.0.0.1:" + std::to_string(downPort);
  project_cfg_.resources.apis.emplace("down", down);
  auto refused = ask(fetchCall(down.url + "/x"));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("[ductus:transient]"), std::string::npos)
      << refused.error().message;
  auto slow = ask(fetchCall(http_.url("/slow/3000"), R"({"timeout": 100})"));
  ASSERT_FALSE(slow);
  EXPECT_NE(slow.error().message.find("no response within 100 ms [ductus:transient]"),
            std::string::npos)
      << slow.error().message;
}

TEST_F(ServicesTest, StoppingTheServicesWithAFetchInFlightAbandonsItWithoutAnAnswer) {
  int answers = 0;
  services().call(fetchCall(http_.url("/slow/2000")), [&](Result<std::string>) { ++answers; });
  // Until the server has the request, so the transfer is really running.
  ASSERT_TRUE(runUntil([&] { return !http_.requests().empty(); }, std::chrono::seconds(5)));
  real_.reset();
  runUntil([] { return false; }, std::chrono::milliseconds(50));
  EXPECT_EQ(answers, 0);
}

TEST_F(ServicesTest, AResponseOverTheLimitIsRefusedAndNotRetried) {
  ProjectServices::Options o;
  o.maxResponseBytes = 200;  // /status/200's body alone is 311 bytes
  services(o);
  auto small = ask(fetchCall(http_.url("/")));
  ASSERT_TRUE(small) << small.error().message;
  auto big = ask(fetchCall(http_.url("/status/200")));
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("larger than 200 bytes"), std::string::npos)
      << big.error().message;
  EXPECT_EQ(big.error().message.find("[ductus:transient]"), std::string::npos);
}

TEST_F(ServicesTest, EnvReadsOnlyVariablesNamedDuctusPublic) {
  ::setenv("DUCTUS_PUBLIC_SERVICES_TEST_SITE", "north \"1\"", 1);
  ::setenv("SERVICES_TEST_PRIVATE", "hidden", 1);
  auto fn = loadModule();
  auto ok = run(fn, {{"op", "env"}, {"name", "DUCTUS_PUBLIC_SERVICES_TEST_SITE"}});
  EXPECT_EQ(ok.kind, Kind::Output) << ok.data;
  EXPECT_EQ(ok.data, "north \"1\"");
  for (const char* name : {"SERVICES_TEST_PRIVATE", "DUCTUS_SECRETS_KEY", "HOME"}) {
    auto no = run(fn, {{"op", "env"}, {"name", name}});
    EXPECT_EQ(no.kind, Kind::Quarantine) << no.data;
    EXPECT_NE(no.data.find("only variables named DUCTUS_PUBLIC_*"), std::string::npos) << no.data;
    EXPECT_EQ(no.data.find("hidden"), std::string::npos);
  }
  auto unset = run(fn, {{"op", "env"}, {"name", "DUCTUS_PUBLIC_SERVICES_TEST_UNSET"}});
  EXPECT_EQ(unset.kind, Kind::Quarantine) << unset.data;
  EXPECT_NE(unset.data.find("not set"), std::string::npos) << unset.data;
  ::unsetenv("DUCTUS_PUBLIC_SERVICES_TEST_SITE");
  ::unsetenv("SERVICES_TEST_PRIVATE");
}

TEST_F(ServicesTest, SecretReadsTheProjectsSecretsAndRefusesUnknownNames) {
  writeSecrets(kKey, {{"LAB_TOKEN", "s3cr\xC3\xA9t"}});
  auto fn = loadModule();
  auto ok = run(fn, {{"op", "secret"}, {"name", "LAB_TOKEN"}});
  EXPECT_EQ(ok.kind, Kind::Output) << ok.data;
  EXPECT_EQ(ok.data, "s3cr\xC3\xA9t");
  auto no = run(fn, {{"op", "secret"}, {"name", "PHARMACY_TOKEN"}});
  EXPECT_EQ(no.kind, Kind::Quarantine) << no.data;
  EXPECT_NE(no.data.find("no such secret in secrets/test.json"), std::string::npos) << no.data;
  EXPECT_NE(no.data.find("ductus secret set PHARMACY_TOKEN --env test"), std::string::npos)
      << no.data;
  EXPECT_EQ(no.data.find("s3cr"), std::string::npos) << "no value in a message: " << no.data;
}

TEST_F(ServicesTest, ASecretsFileTheKeyCannotOpenMakesSecretTransientNotQuarantined) {
  writeSecrets(kKey, {{"LAB_TOKEN", "x"}});
  // The operator's key file now holds another key.
  writeFile("secrets.key", std::string(64, 'f'));
  ServiceCall c{};
  c.kind = ServiceCall::Kind::Secret;
  c.name = "LAB_TOKEN";
  auto r = ask(c);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("[ductus:transient]"), std::string::npos) << r.error().message;
}

TEST_F(ServicesTest, DbQueryAndExecuteBindTheirParametersOnARealDatabase) {
  TestDatabase db;
  ASSERT_FALSE(db.url().empty());
  db.value("CREATE TABLE patients (mrn text PRIMARY KEY, name text)");
  config::DatabaseResource main;
  main.name = "main";
  main.url = db.url();
  project_cfg_.resources.databases.emplace("main", main);
  auto fn = loadModule();
  std::string hostile = "x'); DROP TABLE patients; --";
  auto ins = run(fn, {{"op", "execute"},
                      {"db", "main"},
                      {"sql", "INSERT INTO patients VALUES ($1, $2), ($3, $4)"},
                      {"params", {"1", hostile, "2", nullptr}}});
  ASSERT_EQ(ins.kind, Kind::Output) << ins.data;
  EXPECT_EQ(json::parse(ins.data)["rowCount"], 2);
  auto rows = run(fn, {{"op", "query"},
                       {"db", "main"},
                       {"sql", "SELECT mrn, name FROM patients WHERE mrn = ANY($1::text[]) ORDER BY mrn"},
                       {"params", json::array({"{1,2}"})}});
  ASSERT_EQ(rows.kind, Kind::Output) << rows.data;
  EXPECT_EQ(json::parse(rows.data),
            json::parse(R"([{"mrn":"1","name":"x'); DROP TABLE patients; --"},{"mrn":"2","name":null}])"));
  // A mistake in the SQL is the code's: quarantined, not retried.
  auto bad = run(fn, {{"op", "query"}, {"db", "main"}, {"sql", "SELECT nope FROM patients"}});
  EXPECT_EQ(bad.kind, Kind::Quarantine) << bad.data;
  auto unknown = run(fn, {{"op", "query"}, {"db", "other"}, {"sql", "SELECT 1"}});
  EXPECT_EQ(unknown.kind, Kind::Quarantine) << unknown.data;
  EXPECT_NE(unknown.data.find("no such database in resources.yaml"), std::string::npos);
}

// db() on a kind: sqlserver database: the same calls, through FreeTDS's
// ODBC driver, against the TDS responder (tests/support/tds_responder.py),
// its certificate verified against a CA of the test's.
class SqlServerDbTest : public ServicesTest {
 protected:
  void SetUp() override {
    ServicesTest::SetUp();
    ca_.emplace(project_ / "ca");
    Issued leaf = ca_->issue("sqlserver", "/CN=localhost", {"localhost"}, {"127.0.0.1"});
    server_.emplace(leaf.cert, leaf.key);
    ASSERT_GT(server_->port(), 0);
    project_cfg_.resources.certificates["sql-ca"] = {.name = "sql-ca", .caFile = ca_->cert()};
    config::DatabaseResource emr;
    emr.name = "emr";
    emr.kind = config::DatabaseKind::SqlServer;
    // The password percent-encoded in the URL: S3;cr}e{t=!}
    emr.url = "sqlserver://sa:S3%3Bcr%7De%7Bt%3D!%7D@localhost:" + std::to_string(server_->port()) +
              "/EMR";
    emr.tls = {.enabled = true, .ca = "sql-ca"};
    emr.maxConnections = 1;
    project_cfg_.resources.databases.emplace("emr", emr);
  }

  static ServiceCall call(ServiceCall::Kind kind, const std::string& sql,
                          const json& params = json::array(),
                          const std::string& interfaceName = "") {
    ServiceCall c{};
    c.kind = kind;
    c.interfaceName = interfaceName;
    c.resource = "emr";
    c.sql = sql;
    c.paramsJson = params.dump();
    return c;
  }
  Result<std::string> query(const std::string& sql, const json& params = json::array()) {
    return ask(call(ServiceCall::Kind::DbQuery, sql, params));
  }
  size_t logins() const { return server_->recorded("login").size(); }

  std::optional<TestCa> ca_;
  std::optional<TdsResponder> server_;
};

TEST_F(SqlServerDbTest, AScriptQueriesAndExecutesWithBoundParametersOverVerifiedTls) {
  auto fn = loadModule();
  auto rows =
      run(fn, {{"op", "query"},
               {"db", "emr"},
               {"sql", "select echo_params from patients where mrn = $1 and site = $2 and n > $3"},
               {"params", {"x'); DROP TABLE patients; --", nullptr, 2.5}}});
  ASSERT_EQ(rows.kind, Kind::Output) << rows.data;
  EXPECT_EQ(json::parse(rows.data),
            json::parse(R"([{"P1":"x'); DROP TABLE patients; --","P2":null,"P3":2.5}])"));
  auto n = run(fn, {{"op", "execute"}, {"db", "emr"}, {"sql", "UPDATE patients SET seen = 1"}});
  ASSERT_EQ(n.kind, Kind::Output) << n.data;
  EXPECT_EQ(json::parse(n.data), json::parse(R"({"rowCount":3})"));
  // The server's refusal is the code's mistake; a server gone is waited out.
  auto bad = run(fn, {{"op", "query"}, {"db", "emr"}, {"sql", "select raise_error"}});
  EXPECT_EQ(bad.kind, Kind::Quarantine) << bad.data;
  EXPECT_NE(bad.data.find("db(\"emr\")"), std::string::npos) << bad.data;
  EXPECT_NE(bad.data.find("error 50000"), std::string::npos) << bad.data;
  auto logins = server_->recorded("login");
  ASSERT_GE(logins.size(), 1u);
  EXPECT_EQ(logins[0]["encrypted"], true);
  EXPECT_EQ(logins[0]["database"], "EMR");
  server_.reset();
  auto down = run(fn, {{"op", "query"}, {"db", "emr"}, {"sql", "select 1"}});
  EXPECT_EQ(down.kind, Kind::Transient) << down.data;
}

TEST_F(SqlServerDbTest, AConnectionIsKeptOnlyAfterSuccessAndClosedWhenIdle) {
  ProjectServices::Options o;
  o.dbIdleClose = std::chrono::milliseconds(300);
  services(o);
  ASSERT_TRUE(query("select 1"));
  ASSERT_TRUE(query("select 1"));
  EXPECT_EQ(logins(), 1u) << "the second call did not reuse the connection";
  auto refused = query("select raise_error");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message.find("[ductus:transient]"), std::string::npos)
      << refused.error().message;
  ASSERT_TRUE(query("select 1"));
  EXPECT_EQ(logins(), 2u) << "a connection whose call failed was used again";
  // Unused past dbIdleClose: closed, and the next call logs in anew.
  runUntil([] { return false; }, std::chrono::milliseconds(800));
  ASSERT_TRUE(query("select 1"));
  EXPECT_EQ(logins(), 3u);
}

TEST_F(SqlServerDbTest, ACallPastItsTimeoutIsTransientAndTheStatementIsCancelled) {
  config::InterfaceConfig lab;
  lab.name = "lab";
  lab.timeout = std::chrono::seconds(1);
  project_cfg_.interfaces.push_back(lab);
  auto start = std::chrono::steady_clock::now();
  auto slow =
      ask(call(ServiceCall::Kind::DbQuery, "waitfor delay '00:00:30'", json::array(), "lab"));
  ASSERT_FALSE(slow);
  EXPECT_NE(slow.error().message.find("[ductus:transient]"), std::string::npos)
      << slow.error().message;
  EXPECT_NE(slow.error().message.find("timed out"), std::string::npos) << slow.error().message;
  // The driver cancels it (an ATTENTION), so the one connection is free soon.
  auto next = query("select 1");
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(8));
}

TEST_F(SqlServerDbTest, AnInterfacesDedicatedPoolIsItsOwnWhileOthersHoldTheSharedConnection) {
  startWithOwnPool("emr");
  std::optional<Result<std::string>> busy, queued, mine;
  services().call(
      call(ServiceCall::Kind::DbQuery, "waitfor delay '00:00:30'", json::array(), "other"),
      [&](Result<std::string> r) { busy = std::move(r); });
  services().call(call(ServiceCall::Kind::DbQuery, "select 2", json::array(), "other"),
                  [&](Result<std::string> r) { queued = std::move(r); });
  auto sent = [&](const std::string& text) {
    for (const char* kind : {"batch", "rpc"})
      for (auto& r : server_->recorded(kind))
        if (r.value("sql", "").find(text) != std::string::npos) return true;
    return false;
  };
  ASSERT_TRUE(runUntil([&] { return sent("waitfor"); }, std::chrono::seconds(5)));
  services().call(call(ServiceCall::Kind::DbQuery, "select 3", json::array(), "own"),
                  [&](Result<std::string> r) { mine = std::move(r); });
  ASSERT_TRUE(runUntil([&] { return mine.has_value(); }, std::chrono::seconds(5)));
  ASSERT_TRUE(*mine) << mine->error().message;
  EXPECT_EQ(json::parse(**mine), json::parse(R"([{"one":1}])"));
  EXPECT_FALSE(busy.has_value() || queued.has_value()) << "the shared connection was not held";
  auto logins = server_->recorded("login");
  ASSERT_EQ(logins.size(), 2u);
  std::set<std::string> apps;
  for (auto& l : logins) apps.insert(l.value("app", ""));
  EXPECT_EQ(apps, (std::set<std::string>{"ductus db(emr)", "ductus db(emr) for own"}));
}

// db() through a pool per database: never more than max_connections, the
// rest wait their turn (pg_stat_activity counts the connections, by the
// application_name the pool gives them).
TEST_F(ServicesTest, DbCallsBeyondMaxConnectionsWaitAndNeverOpenMoreConnections) {
  TestDatabase db;
  ASSERT_FALSE(db.url().empty());
  config::DatabaseResource main;
  main.name = "main";
  main.url = db.url();
  main.maxConnections = 2;
  project_cfg_.resources.databases.emplace("main", main);
  auto fn = loadModule();
  constexpr int kCalls = 8;
  std::vector<std::optional<Outcome>> outs(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    json q = {{"op", "query"},
              {"db", "main"},
              {"sql", "SELECT $1::int AS n FROM pg_sleep(0.25)"},
              {"params", {i}}};
    pool_->invoke(fn, q.dump(), {}, [&outs, i](Outcome o) { outs[i] = std::move(o); });
  }
  auto connections = [&] {
    return std::stoi(db.value(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'ductus db(main)' "
        "AND datname = current_database()"));  // other tests on the cluster name theirs main too
  };
  int most = 0;
  bool all = runUntil(
      [&] {
        most = std::max(most, connections());
        for (auto& o : outs)
          if (!o) return false;
        return true;
      },
      std::chrono::seconds(20));
  ASSERT_TRUE(all) << "not every call was answered";
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_EQ(outs[i]->kind, Kind::Output) << i << ": " << outs[i]->data;
    EXPECT_EQ(json::parse(outs[i]->data), json::parse("[{\"n\":" + std::to_string(i) + "}]"));
  }
  EXPECT_EQ(most, 2) << "max_connections is 2";
  EXPECT_LE(connections(), 2);
}

// A db() call has its interface's timeout for waiting and running; past it
// the script hears a transient error, and the server stops the statement,
// so the connection (the only one here) serves the next call.
TEST_F(ServicesTest, ADbCallPastItsInterfacesTimeoutIsTransientAndFreesItsConnection) {
  TestDatabase db;
  ASSERT_FALSE(db.url().empty());
  config::DatabaseResource main;
  main.name = "main";
  main.url = db.url();
  main.maxConnections = 1;
  project_cfg_.resources.databases.emplace("main", main);
  config::InterfaceConfig svc;
  svc.name = "svc";
  svc.timeout = std::chrono::milliseconds(500);  // the worker's own stays 5 s
  project_cfg_.interfaces.push_back(svc);
  auto fn = loadModule();
  auto started = std::chrono::steady_clock::now();
  auto slow = run(fn, {{"op", "query"}, {"db", "main"}, {"sql", "SELECT pg_sleep(30)"}});
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(slow.kind, Kind::Transient) << slow.data;
  EXPECT_NE(slow.data.find("db(\"main\"): timed out: no answer within 500 ms"), std::string::npos)
      << slow.data;
  // Well before the statement's 30 s: the timeout ended it (15 s leaves
  // the 500 ms thirty times over for a busy machine).
  EXPECT_LT(took, std::chrono::seconds(15));
  auto next = run(fn, {{"op", "query"}, {"db", "main"}, {"sql", "SELECT 1 AS one"}});
  ASSERT_EQ(next.kind, Kind::Output) << next.data;
  EXPECT_EQ(json::parse(next.data), json::parse(R"([{"one":1}])"));
  // This test's database only: another test's sleep may run on the cluster.
  EXPECT_EQ(db.value("SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(30)%' "
                     "AND state = 'active' AND pid <> pg_backend_pid() "
                     "AND datname = current_database()"),
            "0");
}

// A call asked late in its script has only what is left of the script's
// timeout (the worker says how much): the worker settles the call at its
// deadline, and a statement running past it would only hold a connection.
TEST_F(ServicesTest, ADbCallHasNoLongerThanWhatIsLeftOfItsScriptsTimeout) {
  TestDatabase db;
  ASSERT_FALSE(db.url().empty());
  config::DatabaseResource main;
  main.name = "main";
  main.url = db.url();
  main.maxConnections = 1;
  project_cfg_.resources.databases.emplace("main", main);
  config::InterfaceConfig svc;
  svc.name = "svc";
  svc.timeout = std::chrono::seconds(20);
  project_cfg_.interfaces.push_back(svc);
  services(ProjectServices::Options{});
  ServiceCall call{};
  call.kind = ServiceCall::Kind::DbQuery;
  call.interfaceName = "svc";
  call.resource = "main";
  call.sql = "SELECT 1 AS s FROM pg_sleep(30)";
  call.timeLeft = std::chrono::milliseconds(300);
  std::optional<Result<std::string>> answer;
  services().call(call, [&](Result<std::string> r) { answer = std::move(r); });
  ASSERT_TRUE(runUntil([&] { return answer.has_value(); }, std::chrono::seconds(15)));
  ASSERT_FALSE(*answer) << **answer;
  EXPECT_NE(answer->error().message.find("timed out: no answer within 300 ms"), std::string::npos)
      << answer->error().message;
}

// The timeout counts the wait for a connection too: a call that never gets
// one in time is answered transient while the busy connection carries on.
TEST_F(ServicesTest, ADbCallWaitingForABusyConnectionPastItsTimeoutIsTransient) {
  TestDatabase db;
  ASSERT_FALSE(db.url().empty());
  config::DatabaseResource main;
  main.name = "main";
  main.url = db.url();
  main.maxConnections = 1;
  project_cfg_.resources.databases.emplace("main", main);
  config::InterfaceConfig quick;
  quick.name = "quick";
  quick.timeout = std::chrono::milliseconds(300);
  project_cfg_.interfaces.push_back(quick);
  ProjectServices::Options o;
  o.dbTimeout = std::chrono::seconds(20);  // calls from no interface of the project
  services(o);
  // Busy for ten times the waiting call's timeout: that one's answer must
  // come first, however slow the machine.
  ServiceCall busy{};
  busy.kind = ServiceCall::Kind::DbQuery;
  busy.resource = "main";
  busy.sql = "SELECT 1 AS s FROM pg_sleep(3)";
  std::optional<Result<std::string>> first, late;
  services().call(busy, [&](Result<std::string> r) { first = std::move(r); });
  ServiceCall waiting = busy;
  waiting.interfaceName = "quick";
  waiting.sql = "SELECT 3 AS three";
  services().call(waiting, [&](Result<std::string> r) { late = std::move(r); });
  ASSERT_TRUE(runUntil([&] { return late.has_value(); }, std::chrono::seconds(15)));
  ASSERT_FALSE(*late) << **late;
  EXPECT_NE(late->error().message.find("db(\"main\"): timed out: no answer within 300 ms (it "
                                       "waited for one of the database's 1 connections"),
            std::string::npos)
      << late->error().message;
  EXPECT_NE(late->error().message.find("[ductus:transient]"), std::string::npos);
  // Answered while the busy call still ran: it did not wait its turn.
  EXPECT_FALSE(first.has_value()) << "the busy call was answered (or cut short) first";
  ASSERT_TRUE(runUntil([&] { return first.has_value(); }, std::chrono::seconds(15)));
  ASSERT_TRUE(*first) << first->error().message;
  EXPECT_EQ(json::parse(**first), json::parse(R"([{"s":1}])"));
}

// dedicated_pools: an interface's own connections to a database, so the
// other interfaces' slow queries holding (and queueing for) the shared pool
// don't starve it.
class DedicatedPoolTest : public ServicesTest {
 protected:
  void SetUp() override {
    ServicesTest::SetUp();
    ASSERT_FALSE(db_.url().empty());
    config::DatabaseResource main;
    main.name = "main";
    main.url = db_.url();
    main.maxConnections = 1;
    project_cfg_.resources.databases.emplace("main", main);
    startWithOwnPool("main");
  }

  static ServiceCall query(const std::string& interfaceName, const std::string& sql) {
    ServiceCall c{};
    c.kind = ServiceCall::Kind::DbQuery;
    c.interfaceName = interfaceName;
    c.resource = "main";
    c.sql = sql;
    return c;
  }

  int connectionsNamed(const std::string& name) {
    return std::stoi(db_.value(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
        "application_name = $1",
        {name}));
  }

  // Waits until exactly n statements containing `text` run at once.
  bool running(int n, const std::string& text) {
    return runUntil(
        [&] {
          return db_.value("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND "
                           "datname = current_database() AND pid <> pg_backend_pid() AND "
                           "strpos(query, $1) > 0",
                           {text}) == std::to_string(n);
        },
        std::chrono::seconds(5));
  }

  TestDatabase db_;
};

TEST_F(DedicatedPoolTest, AnInterfaceWithADedicatedPoolGetsAConnectionWhileOthersHoldTheSharedOne) {
  // Another interface holds the shared pool's one connection and queues
  // behind it, each for longer than `own`'s whole timeout.
  std::optional<Result<std::string>> busy, queued, mine;
  services().call(query("other", "SELECT 1 AS s FROM pg_sleep(4)"),
                  [&](Result<std::string> r) { busy = std::move(r); });
  services().call(query("other", "SELECT 2 AS s FROM pg_sleep(4)"),
                  [&](Result<std::string> r) { queued = std::move(r); });
  ASSERT_TRUE(running(1, "pg_sleep(4)"));
  services().call(query("own", "SELECT 3 AS three"),
                  [&](Result<std::string> r) { mine = std::move(r); });
  ASSERT_TRUE(runUntil([&] { return mine.has_value(); }, std::chrono::seconds(15)));
  ASSERT_TRUE(*mine) << mine->error().message;
  EXPECT_EQ(json::parse(**mine), json::parse(R"([{"three":3}])"));
  EXPECT_FALSE(busy.has_value()) << "answered only after the other interface's queries";
  // On a connection of its own, named for it in pg_stat_activity.
  EXPECT_EQ(connectionsNamed("ductus db(main) for own"), 1);
  EXPECT_EQ(connectionsNamed("ductus db(main)"), 1);
  ASSERT_TRUE(runUntil([&] { return busy && queued; }, std::chrono::seconds(20)));
  EXPECT_TRUE(*busy && *queued);
}

TEST_F(DedicatedPoolTest, WhenItsOwnConnectionsAreBusyItBorrowsAFreeSharedOneElseWaitsForItsOwn) {
  std::optional<Result<std::string>> first, second, third;
  // Its own connection busy: the second call takes the free shared one.
  services().call(query("own", "SELECT 1 AS s FROM pg_sleep(1)"),
                  [&](Result<std::string> r) { first = std::move(r); });
  services().call(query("own", "SELECT 2 AS s FROM pg_sleep(1)"),
                  [&](Result<std::string> r) { second = std::move(r); });
  ASSERT_TRUE(running(2, "pg_sleep(1)")) << "the two calls did not run side by side";
  EXPECT_EQ(connectionsNamed("ductus db(main) for own"), 1);
  EXPECT_EQ(connectionsNamed("ductus db(main)"), 1);
  // Both busy: the third waits for its own and is answered (well within
  // its 2 s), not refused or timed out.
  services().call(query("own", "SELECT 3 AS s"),
                  [&](Result<std::string> r) { third = std::move(r); });
  ASSERT_TRUE(runUntil([&] { return first && second && third; }, std::chrono::seconds(15)));
  ASSERT_TRUE(*third) << third->error().message;
  EXPECT_EQ(json::parse(**third), json::parse(R"([{"s":3}])"));
  EXPECT_TRUE(*first && *second);
}

TEST_F(ServicesTest, AQueryResultOverTheRowOrByteCapIsRefusedNamingTheCapAndNotRetried) {
  TestDatabase db;
  ASSERT_FALSE(db.url().empty());
  config::DatabaseResource main;
  main.name = "main";
  main.url = db.url();
  project_cfg_.resources.databases.emplace("main", main);
  auto fn = loadModule();
  auto most = run(fn, {{"op", "query"},
                       {"db", "main"},
                       {"sql", "SELECT g FROM generate_series(1, 10000) g ORDER BY g"}});
  ASSERT_EQ(most.kind, Kind::Output) << most.data.substr(0, 300);
  auto rows = json::parse(most.data);
  ASSERT_EQ(rows.size(), 10000u);
  EXPECT_EQ(rows[9999]["g"], 10000);
  auto tooMany = run(
      fn, {{"op", "query"}, {"db", "main"}, {"sql", "SELECT g FROM generate_series(1, 20000) g"}});
  EXPECT_EQ(tooMany.kind, Kind::Quarantine) << tooMany.data.substr(0, 300);
  EXPECT_NE(tooMany.data.find("db(\"main\"): the result has more than 10000 rows"),
            std::string::npos)
      << tooMany.data.substr(0, 300);
  // 20 rows of 1 MB: 20 MB of JSON, past the 16 MB cap; never sent.
  auto tooBig = run(fn, {{"op", "query"},
                         {"db", "main"},
                         {"sql", "SELECT repeat('x', 1000000) AS s FROM generate_series(1, 20)"}});
  EXPECT_EQ(tooBig.kind, Kind::Quarantine) << tooBig.data.substr(0, 300);
  EXPECT_NE(tooBig.data.find("db(\"main\"): the result is larger than 16777216 bytes of JSON"),
            std::string::npos)
      << tooBig.data.substr(0, 300);
}

TEST_F(ServicesTest, StoppingTheServicesWithDbCallsRunningAndWaitingAbandonsThemWithoutAnAnswer) {
  TestDatabase db;
  ASSERT_FALSE(db.url().empty());
  config::DatabaseResource main;
  main.name = "main";
  main.url = db.url();
  main.maxConnections = 1;
  project_cfg_.resources.databases.emplace("main", main);
  ServiceCall c{};
  c.kind = ServiceCall::Kind::DbQuery;
  c.resource = "main";
  c.sql = "SELECT 1 AS s FROM pg_sleep(5)";
  int answers = 0;
  services().call(c, [&](Result<std::string>) { ++answers; });  // runs
  services().call(c, [&](Result<std::string>) { ++answers; });  // waits
  // The statement itself, not the session settings sent before it: those
  // are "active" too for a moment, and the wait could end on one of them.
  ASSERT_TRUE(runUntil(
      [&] {
        return db.value(
                   "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND "
                   "application_name = 'ductus db(main)' AND query LIKE '%pg_sleep(5)%'") == "1";
      },
      std::chrono::seconds(5)));
  real_.reset();
  runUntil([] { return false; }, std::chrono::milliseconds(50));
  EXPECT_EQ(answers, 0);
}

// fetch(): at most 16 requests in flight for the whole engine; the rest
// wait their turn and are all answered.
TEST_F(ServicesTest, NeverMoreThanSixteenFetchesAreInFlightAndTheRestWaitTheirTurn) {
  constexpr int kCalls = 40;
  std::vector<std::optional<Result<std::string>>> got(kCalls);
  for (int i = 0; i < kCalls; ++i)
    services().call(fetchCall(http_.url("/slow/300?n=" + std::to_string(i))),
                    [&got, i](Result<std::string> r) { got[i] = std::move(r); });
  bool all = runUntil(
      [&] {
        for (auto& g : got)
          if (!g) return false;
        return true;
      },
      std::chrono::seconds(30));
  ASSERT_TRUE(all);
  for (int i = 0; i < kCalls; ++i) ASSERT_TRUE(*got[i]) << i << ": " << got[i]->error().message;
  EXPECT_EQ(http_.requests().size(), static_cast<size_t>(kCalls));
  EXPECT_LE(http_.peakConcurrent(), 16);
  EXPECT_GE(http_.peakConcurrent(), 8) << "the calls were meant to overlap";
}

TEST_F(ServicesTest, AFetchThatWaitsPastItsTimeoutOrFindsTheQueueFullIsTransient) {
  ProjectServices::Options o;
  o.maxConcurrentFetches = 1;
  o.maxQueuedFetches = 2;
  services(o);
  std::optional<Result<std::string>> running, expires, waits, refused;
  services().call(fetchCall(http_.url("/slow/800")),
                  [&](Result<std::string> r) { running = std::move(r); });
  services().call(fetchCall(http_.url("/slow/1"), R"({"timeout": 300})"),
                  [&](Result<std::string> r) { expires = std::move(r); });
  services().call(fetchCall(http_.url("/slow/1")),
                  [&](Result<std::string> r) { waits = std::move(r); });
  services().call(fetchCall(http_.url("/slow/1")),
                  [&](Result<std::string> r) { refused = std::move(r); });
  EXPECT_FALSE(refused.has_value()) << "answered inside call()";
  runUntil([&] { return running && expires && waits && refused; }, std::chrono::seconds(10));
  ASSERT_TRUE(running && expires && waits && refused);
  EXPECT_TRUE(*running) << running->error().message;
  EXPECT_TRUE(*waits) << waits->error().message;
  ASSERT_FALSE(*expires);
  EXPECT_NE(expires->error().message.find("no response within 300 ms (it waited"),
            std::string::npos)
      << expires->error().message;
  EXPECT_NE(expires->error().message.find("[ductus:transient]"), std::string::npos);
  ASSERT_FALSE(*refused);
  EXPECT_NE(refused->error().message.find("refused, 2 calls already wait"), std::string::npos)
      << refused->error().message;
  EXPECT_NE(refused->error().message.find("[ductus:transient]"), std::string::npos);
  EXPECT_EQ(http_.requests().size(), 2u);
  EXPECT_EQ(http_.peakConcurrent(), 1);
}

TEST_F(ServicesTest, AnApiWithCaAndCertificateVerifiesItsServerAndPresentsTheClientCertificate) {
  // An HTTPS server we did not write (Python's ssl) that requires a client
  // certificate of our test CA and answers "ok <its CN>".
  TestCa ca(project_ / "ca");
  Issued server = ca.issue("server", "/CN=lab", {"localhost"}, {"127.0.0.1"});
  Issued engine = ca.issue("engine", "/CN=ductus-engine", {"ductus.example"}, {});
  ScriptServer https({"python3", supportScript("https_receiver.py"), "--cert", server.cert.string(),
                      "--key", server.key.string(), "--client-ca", ca.cert().string(), "--record",
                      (project_ / "received").string()});
  ASSERT_NE(https.port(), 0);
  auto certs = tls::Certificates::load(
      {{.name = "lab-ca", .caFile = ca.cert(), .at = "resources.yaml:2"},
       {.name = "engine", .certFile = engine.cert, .keyFile = engine.key, .at = "resources.yaml:3"}});
  ASSERT_TRUE(certs) << certs.error().message;
  config::ApiResource secure;
  secure.name = "secure";
  secure.url = "https://localhost:" + std::to_string(https.port()) + "/base";
  secure.timeout = std::chrono::seconds(5);
  secure.tls = {.enabled = true, .ca = "lab-ca", .certificate = "engine"};
  project_cfg_.resources.apis.emplace("secure", secure);
  // The same server (another origin), no client certificate.
  config::ApiResource anonymous = secure;
  anonymous.name = "anonymous";
  anonymous.url = "https://127.0.0.1:" + std::to_string(https.port()) + "/base";
  anonymous.tls.certificate.clear();
  project_cfg_.resources.apis.emplace("anonymous", anonymous);
  ProjectServices::Options o;
  o.certificates = *certs;
  services(o);

  ServiceCall c = fetchCall("/orders");
  c.api = "secure";
  auto ok = ask(c);
  ASSERT_TRUE(ok) << ok.error().message;
  auto answer = json::parse(*ok);
  EXPECT_EQ(answer["status"], 200) << *ok;
  EXPECT_EQ(answer["body"], "ok ductus-engine") << *ok;
  // fetch() to the api's origin goes the same way.
  auto fetched = ask(fetchCall(secure.url + "/x"));
  ASSERT_TRUE(fetched) << fetched.error().message;

  c.api = "anonymous";
  auto refused = ask(c);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("[ductus:transient]"), std::string::npos)
      << refused.error().message;
}

TEST_F(ServicesTest, AnApiNamingACaWithoutTheEnginesCertificatesIsRefusedSayingSo) {
  config::ApiResource secure;
  secure.name = "secure";
  secure.url = "https://localhost:1/base";
  secure.tls = {.enabled = true, .ca = "lab-ca"};
  project_cfg_.resources.apis.emplace("secure", secure);
  ServiceCall c = fetchCall("/orders");
  c.api = "secure";
  auto refused = ask(c);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message,
            "api(\"secure\"): TLS settings without the engine's certificates");
}

// A throwaway PostgreSQL with ssl=on and a server certificate of our test
// CA, reached over TCP as "localhost" (verify-full checks that name).
class DbTlsTest : public ServicesTest {
 protected:
  void SetUp() override {
    ServicesTest::SetUp();
    ca_.emplace(project_ / "ca");
    other_.emplace(project_ / "other", "Another CA");
    port_ = freePort();
    ASSERT_TRUE(cluster_.start(port_));
    Issued server = ca_->issue("pg", "/CN=localhost", {"localhost"}, {"127.0.0.1"});
    ASSERT_TRUE(cluster_.serveTls(server.chain, server.key, port_));
    tcpUrl_ = "host=localhost port=" + std::to_string(port_) + " user=postgres dbname=postgres";
  }

  void addDatabase(const std::string& name, const std::string& ca) {
    config::DatabaseResource d;
    d.name = name;
    d.url = tcpUrl_;
    d.tls = {.enabled = true, .ca = ca};
    project_cfg_.resources.databases.emplace(name, d);
  }

  Result<std::string> query(const std::string& database, const std::string& sql) {
    ServiceCall c{};
    c.kind = ServiceCall::Kind::DbQuery;
    c.resource = database;
    c.sql = sql;
    return ask(c);
  }

  std::optional<TestCa> ca_, other_;
  uint16_t port_ = 0;
  PgCluster cluster_;
  std::string tcpUrl_;
};

TEST_F(DbTlsTest, ADatabaseWithCaConnectsVerifyFullAndAnotherCaIsRefusedNamingTheDatabase) {
  std::ifstream caText(ca_->cert());
  std::stringstream pem;
  pem << caText.rdbuf();
  project_cfg_.resources.certificates["pg-ca"] = {.name = "pg-ca", .caFile = ca_->cert()};
  // The same CA as PEM text (usually a secret): a temporary file for libpq.
  project_cfg_.resources.certificates["pg-ca-text"] = {.name = "pg-ca-text", .caPem = pem.str()};
  project_cfg_.resources.certificates["other-ca"] = {.name = "other-ca", .caFile = other_->cert()};
  std::vector<tls::CertificateSource> sources;
  for (auto& [n, s] : project_cfg_.resources.certificates) sources.push_back(s);
  auto certs = tls::Certificates::load(sources);
  ASSERT_TRUE(certs) << certs.error().message;
  addDatabase("lab", "pg-ca");
  addDatabase("lab-text", "pg-ca-text");
  addDatabase("wrong", "other-ca");
  ProjectServices::Options o;
  o.certificates = *certs;
  services(o);

  const std::string sql = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()";
  for (const char* db : {"lab", "lab-text"}) {
    auto ok = query(db, sql);
    ASSERT_TRUE(ok) << db << ": " << ok.error().message;
    EXPECT_EQ(json::parse(*ok), json::parse(R"([{"ssl":true}])")) << db;
  }
  auto refused = query("wrong", sql);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message.rfind("db(\"wrong\"): ", 0), 0u) << refused.error().message;
  EXPECT_NE(refused.error().message.find("certificate verify failed"), std::string::npos)
      << refused.error().message;
}

}  // namespace
}  // namespace ductus::test
