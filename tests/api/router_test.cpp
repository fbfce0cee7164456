// The router over real HTTP: matching, 404 / 405 / 400, who may call
// (401 / 403), the X-Ductus rule for browser sessions, and the checks that
// refuse a route table with an operation nobody decided the callers of.
#include "api/router.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/api/api_harness.h"

namespace ductus::api::test {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

// A route that answers 200 with what it was given: the caller, the
// parameters and the query.
Route echo(std::string method, std::string path, std::string id, Requirement need,
           std::map<std::string, std::string> query = {}) {
  Route r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.operationId = std::move(id);
  r.summary = "echo";
  r.tag = "test";
  r.requirement = need;
  r.queryParams = std::move(query);
  std::string tag = r.operationId;
  r.handler = [tag](const ApiRequest& req, ApiRespond respond) {
    json j = {{"op", tag}, {"params", req.params}, {"query", req.query}};
    if (req.caller) j["caller"] = req.caller->name;
    respond(jsonResponse(200, j.dump()));
  };
  return r;
}

std::vector<Route> table() {
  std::vector<Route> t;
  t.push_back(echo("GET", "/api/v1/open", "getOpen", Requirement::anyone()));
  t.push_back(echo("GET", "/api/v1/things", "listThings", Requirement::toRead(Role::Viewer),
                   {{"limit", "how many"}, {"q", "search text"}}));
  t.push_back(echo("POST", "/api/v1/things", "addThing", Requirement::toChange(Role::Operator)));
  t.push_back(echo("GET", "/api/v1/things/{name}", "getThing", Requirement::toRead(Role::Viewer)));
  t.push_back(
      echo("GET", "/api/v1/things/special", "getSpecial", Requirement::toRead(Role::Viewer)));
  t.push_back(echo("DELETE", "/api/v1/things/{name}", "deleteThing",
                   Requirement::toChange(Role::Admin)));
  t.push_back(echo("GET", "/api/v1/things/{name}/payload", "getPayload",
                   Requirement::toRead(Role::Viewer, kPayloads)));
  Route boom = echo("GET", "/api/v1/boom", "getBoom", Requirement::anyone());
  boom.handler = [](const ApiRequest&, ApiRespond) { throw std::runtime_error("boom"); };
  t.push_back(std::move(boom));
  return t;
}

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = api_.start(table());
    ASSERT_TRUE(s) << s.error().message;
  }
  ApiHarness api_;
};

// Paths outside /api are the console's (ui_assets_test.cpp).
TEST_F(RouterTest, AnUnknownPathIsAJson404) {
  for (std::string path : {"/api/v1/nothing", "/api/v1/things/a/b/c", "/api/v1/things/",
                           "/api/", "/api"}) {
    auto r = api_.get(path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(errorOf(r)["error"], "not_found") << path << ": " << r.body;
    EXPECT_EQ(r.header("content-type"), "application/json") << path;
  }
}

TEST_F(RouterTest, AKnownPathWithAnotherMethodIs405AndSaysWhichAreAllowed) {
  auto r = api_.call("PUT", "/api/v1/things", bearer("admin"));
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(errorOf(r)["error"], "method_not_allowed") << r.body;
  EXPECT_EQ(r.header("allow"), "GET, HEAD, POST");
  EXPECT_EQ(api_.call("POST", "/api/v1/open").status, 405);
}

TEST_F(RouterTest, AnonymousRoutesNeverAskTheAuthenticator) {
  auto r = api_.get("/api/v1/open");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(json::parse(r.body).contains("caller"));
  int calls = -1;
  api_.loop().run([&] { calls = api_.auth().calls; });
  EXPECT_EQ(calls, 0);
}

TEST_F(RouterTest, NoCredentialsIs401WithWwwAuthenticate) {
  auto r = api_.get("/api/v1/things");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(errorOf(r)["error"], "unauthenticated") << r.body;
  EXPECT_EQ(r.header("www-authenticate"), "Bearer");
}

TEST_F(RouterTest, WrongCredentialsAre401AndUncheckableOnes503) {
  auto wrong = api_.get("/api/v1/things", bearer("wrong"));
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(errorOf(wrong)["error"], "unauthenticated") << wrong.body;
  EXPECT_EQ(wrong.header("www-authenticate"), "Bearer");
  auto down = api_.get("/api/v1/things", bearer("down"));
  EXPECT_EQ(down.status, 503);
  EXPECT_EQ(errorOf(down)["error"], "unavailable") << down.body;
}

TEST_F(RouterTest, ARoleTooLowIs403AndEnoughIsServed) {
  auto viewer = api_.call("POST", "/api/v1/things", bearer("viewer"));
  EXPECT_EQ(viewer.status, 403);
  EXPECT_EQ(errorOf(viewer)["error"], "forbidden") << viewer.body;
  EXPECT_THAT(errorOf(viewer)["message"].get<std::string>(), HasSubstr("operator"));

  auto op = api_.call("POST", "/api/v1/things", bearer("operator"));
  EXPECT_EQ(op.status, 200) << op.body;
  EXPECT_EQ(json::parse(op.body)["caller"], "operator");
  EXPECT_EQ(api_.call("POST", "/api/v1/things", bearer("admin")).status, 200);

  EXPECT_EQ(api_.call("DELETE", "/api/v1/things/x", bearer("operator")).status, 403);
  EXPECT_EQ(api_.call("DELETE", "/api/v1/things/x", bearer("admin")).status, 200);
}

TEST_F(RouterTest, AMissingPermissionIs403WhateverTheRole) {
  auto admin = api_.get("/api/v1/things/x/payload", bearer("admin"));
  EXPECT_EQ(admin.status, 403);
  EXPECT_THAT(errorOf(admin)["message"].get<std::string>(), HasSubstr("payloads"));
  EXPECT_EQ(api_.get("/api/v1/things/x/payload", bearer("viewer+payloads")).status, 200);
}

TEST_F(RouterTest, ASessionChangesNothingWithoutXDuctus) {
  std::map<std::string, std::string> session = {{"Cookie", "ductus_session=admin"}};
  auto without = api_.call("POST", "/api/v1/things", session);
  EXPECT_EQ(without.status, 403);
  EXPECT_EQ(errorOf(without)["error"], "x_ductus_required") << without.body;
  auto wrongValue = session;
  wrongValue["X-Ductus"] = "yes";
  EXPECT_EQ(api_.call("POST", "/api/v1/things", wrongValue).status, 403);
  EXPECT_EQ(api_.call("DELETE", "/api/v1/things/x", session).status, 403);

  auto with = session;
  with["X-Ductus"] = "1";
  EXPECT_EQ(api_.call("POST", "/api/v1/things", with).status, 200);
  // Reading needs no header; a token (not sent by a browser on its own) neither.
  EXPECT_EQ(api_.get("/api/v1/things", session).status, 200);
  EXPECT_EQ(api_.call("POST", "/api/v1/things", bearer("admin")).status, 200);
}

TEST_F(RouterTest, PathParametersAreDecodedAndALiteralSegmentWins) {
  auto r = api_.get("/api/v1/things/a%20b%2Fc", bearer("viewer"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["op"], "getThing");
  EXPECT_EQ(json::parse(r.body)["params"]["name"], "a b/c");
  auto special = api_.get("/api/v1/things/special", bearer("viewer"));
  EXPECT_EQ(json::parse(special.body)["op"], "getSpecial");
}

TEST_F(RouterTest, AMalformedOrOversizedParameterIs400) {
  for (std::string path : std::vector<std::string>{
           "/api/v1/things/%zz", "/api/v1/things/%4", "/api/v1/things/a%00b",
           "/api/v1/things/" + std::string(kMaxParamBytes + 1, 'x')}) {
    auto r = api_.get(path, bearer("viewer"));
    EXPECT_EQ(r.status, 400) << path;
    EXPECT_EQ(errorOf(r)["error"], "bad_request") << r.body;
  }
}

TEST_F(RouterTest, TheQueryIsDecodedAndAnUndeclaredParameterIs400) {
  auto r = api_.get("/api/v1/things?limit=5&q=a+b%21&limit=7", bearer("viewer"));
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = json::parse(r.body);
  EXPECT_EQ(j["query"]["limit"], "7") << "the last of a repeated name";
  EXPECT_EQ(j["query"]["q"], "a b!");

  auto unknown = api_.get("/api/v1/things?limit=5&offset=3", bearer("viewer"));
  EXPECT_EQ(unknown.status, 400);
  EXPECT_THAT(errorOf(unknown)["message"].get<std::string>(), HasSubstr("offset"));
  EXPECT_EQ(api_.get("/api/v1/things?q=%G1", bearer("viewer")).status, 400);
  std::string many = "/api/v1/things?";
  for (size_t i = 0; i <= kMaxQueryParams; ++i) many += "q=1&";
  EXPECT_EQ(api_.get(many, bearer("viewer")).status, 400);
}

TEST_F(RouterTest, AnAuthenticatorAnsweringLaterStillGetsTheRequestThrough) {
  auto r = api_.get("/api/v1/things/x?limit=1", bearer("later-viewer"));
  // limit is not a parameter of getThing.
  EXPECT_EQ(r.status, 400);
  auto ok = api_.get("/api/v1/things?limit=1", bearer("later-viewer"));
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(json::parse(ok.body)["caller"], "viewer");
  EXPECT_EQ(json::parse(ok.body)["query"]["limit"], "1");
  EXPECT_EQ(api_.call("POST", "/api/v1/things", bearer("later-viewer")).status, 403);
}

TEST_F(RouterTest, AHandlerThatThrowsIsA500AndTheServerGoesOn) {
  auto r = api_.get("/api/v1/boom");
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(errorOf(r)["error"], "internal") << r.body;
  EXPECT_EQ(api_.get("/api/v1/open").status, 200);
}

TEST_F(RouterTest, OneKeepAliveConnectionServesManyRequests) {
  auto c = ductus::test::HttpClient::connect(api_.port());
  ASSERT_TRUE(c) << c.error().message;
  for (int i = 0; i < 5; ++i) {
    auto r = c->request("GET", i % 2 ? "/api/v1/nothing" : "/api/v1/things", {}, bearer("viewer"));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->status, i % 2 ? 404 : 200);
    EXPECT_FALSE(c->closing());
  }
}

// ---- the table's own checks ----

Route stated() { return echo("GET", "/api/v1/x", "getX", Requirement::toRead(Role::Viewer)); }

TEST(RouteChecks, ARouteWhoseCallersNobodyStatedIsRefused) {
  Route byDefault = stated();
  byDefault.requirement = Requirement{};
  auto s = checkRoutes({byDefault});
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error().message, HasSubstr("GET /api/v1/x"));
  EXPECT_THAT(s.error().message, HasSubstr("requirement"));

  Route fieldByField = stated();
  fieldByField.requirement = Requirement{.anonymous = false, .role = Role::Admin};
  EXPECT_FALSE(checkRoutes({fieldByField}));
  EXPECT_FALSE(Router::make({byDefault}, nullptr)) << "the router refuses it too";
  EXPECT_TRUE(checkRoutes({stated()}));
}

TEST(RouteChecks, OperationIdsAndMethodAndPathAreUnique) {
  Route again = echo("GET", "/api/v1/y", "getX", Requirement::toRead(Role::Viewer));
  auto s = checkRoutes({stated(), again});
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error().message, HasSubstr("operationId getX"));

  Route a = echo("GET", "/api/v1/t/{a}", "getA", Requirement::toRead(Role::Viewer));
  Route b = echo("GET", "/api/v1/t/{b}", "getB", Requirement::toRead(Role::Viewer));
  EXPECT_FALSE(checkRoutes({a, b})) << "the same shape with other parameter names is ambiguous";
  Route c = echo("DELETE", "/api/v1/t/{b}", "deleteB", Requirement::toChange(Role::Admin));
  EXPECT_TRUE(checkRoutes({a, c}));
}

TEST(RouteChecks, ChangesGoWithTheMethod) {
  EXPECT_FALSE(checkRoutes({echo("POST", "/api/v1/x", "postX", Requirement::toRead(Role::Admin))}))
      << "a POST that claims to change nothing would escape the X-Ductus rule";
  EXPECT_FALSE(checkRoutes({echo("GET", "/api/v1/x", "getX", Requirement::toChange(Role::Admin))}));
  EXPECT_TRUE(checkRoutes({echo("POST", "/api/v1/signin", "signIn", Requirement::anyone(true))}));
}

TEST(RouteChecks, MalformedRoutesAreRefused) {
  auto with = [](auto change) {
    Route r = stated();
    change(r);
    return static_cast<bool>(checkRoutes({r}));
  };
  EXPECT_FALSE(with([](Route& r) { r.method = "get"; }));
  EXPECT_FALSE(with([](Route& r) { r.path = "/v1/x"; }));
  EXPECT_FALSE(with([](Route& r) { r.path = "/api/v1/x/"; }));
  EXPECT_FALSE(with([](Route& r) { r.path = "/api/v1/a b"; }));
  EXPECT_FALSE(with([](Route& r) { r.path = "/api/v1/{a}/{a}"; }));
  EXPECT_FALSE(with([](Route& r) { r.operationId = "Get-x"; }));
  EXPECT_FALSE(with([](Route& r) { r.summary.clear(); }));
  EXPECT_FALSE(with([](Route& r) { r.handler = nullptr; }));
  EXPECT_FALSE(with([](Route& r) { r.responseSchema = "{not json"; }));
  EXPECT_FALSE(with([](Route& r) { r.queryParams["a b"] = "x"; }));
  EXPECT_FALSE(with([](Route& r) { r.requirement = Requirement::anyone(); r.requirement.permissions = kAudit; }));
  EXPECT_TRUE(with([](Route&) {}));
}

TEST(RouteChecks, ARouteNeedingACallerNeedsAnAuthenticator) {
  EXPECT_FALSE(Router::make({stated()}, nullptr));
  EXPECT_TRUE(Router::make({echo("GET", "/api/v1/x", "getX", Requirement::anyone())}, nullptr));
}

TEST(PercentDecode, DecodesAndRefusesWhatIsMalformed) {
  EXPECT_EQ(percentDecode("a%2Fb%41", false), "a/bA");
  EXPECT_EQ(percentDecode("a+b", false), "a+b");
  EXPECT_EQ(percentDecode("a+b", true), "a b");
  EXPECT_EQ(percentDecode("%", false), std::nullopt);
  EXPECT_EQ(percentDecode("%1", false), std::nullopt);
  EXPECT_EQ(percentDecode("%x1", false), std::nullopt);
  EXPECT_EQ(percentDecode("%00", false), std::nullopt);
}

TEST(RefuseEveryone, NoCredentialsAreEverGood) {
  // The engine's authenticator until sign-in exists.
  RefuseEveryone refuse;
  ductus::test::LoopThread loop;
  std::unique_ptr<ApiServer> server;
  loop.run([&] {
    ApiServerOptions o;
    o.port = 0;
    auto s = ApiServer::start(loop.loop(), o, table(), &refuse);
    ASSERT_TRUE(s) << s.error().message;
    server = std::move(*s);
  });
  auto c = ductus::test::HttpClient::connect(server->port());
  ASSERT_TRUE(c);
  for (auto headers : std::vector<std::map<std::string, std::string>>{
           {}, bearer("admin"), {{"Cookie", "ductus_session=admin"}}}) {
    auto r = c->request("GET", "/api/v1/things", {}, headers);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);
  }
  auto open = c->request("GET", "/api/v1/open");
  ASSERT_TRUE(open);
  EXPECT_EQ(open->status, 200);
  loop.run([&] { server->close([] {}); });
  loop.run([&] { server.reset(); });
}

}  // namespace
}  // namespace ductus::api::test
