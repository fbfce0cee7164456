// The script services as the engine answers them (issue #5): ProjectServices
// behind real worker processes, against a real HTTP server on 127.0.0.1
// (tests/senders/receivers.*), a real PostgreSQL and a real secrets file.
// A few cases call ProjectServices directly where no script is needed to
// show the behaviour (a server that is down, a response over the limit).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "common/config/secrets.h"
#include "supervisor/services/project_services.h"
#include "tests/support/receivers.h"
#include "tests/support/test_database.h"
#include "tests/supervisor/workers/pool_fixture.h"

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
  uint16_t other = senders::test::freePort();
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
  down.url = "http://127.0.0.1:" + std::to_string(senders::test::freePort());
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

}  // namespace
}  // namespace ductus::test
