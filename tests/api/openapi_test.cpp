// The OpenAPI document: valid OpenAPI 3.1 by an npm validator, the same
// from `ductus api-spec` and GET /api/v1/openapi.json, and listing exactly
// the operations the server answers: no more, no fewer, each with who may
// call it.
#include "api/openapi.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "api/router.h"
#include "api/routes.h"
#include "tests/api/api_harness.h"
#include "tests/support/exit_status.h"
#include "tests/support/test_env.h"

namespace ductus::api::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::set<std::string> kMethods = {"get", "post", "put", "patch", "delete"};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "/api/v1/things/{name}" with each parameter filled in.
std::string concrete(const std::string& path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '{') {
      out += path[i];
      continue;
    }
    i = path.find('}', i);
    out += "x";
  }
  return out;
}

// Every operation of the document: "GET /api/v1/health" -> its object.
std::map<std::string, json> operationsOf(const json& doc) {
  std::map<std::string, json> ops;
  for (auto& [path, item] : doc["paths"].items())
    for (auto& [method, op] : item.items())
      if (kMethods.count(method)) {
        std::string m = method;
        for (char& c : m) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        ops[m + " " + path] = op;
      }
  return ops;
}

TEST(OpenApi, EveryRouteStatesWhoMayCallItAndTheTableIsWellFormed) {
  auto routes = allRoutes({});
  auto s = checkRoutes(routes);
  ASSERT_TRUE(s) << s.error().message;
  for (auto& r : routes) EXPECT_TRUE(r.requirement.stated) << r.method << " " << r.path;
}

TEST(OpenApi, OperationIdsAreUnique) {
  auto doc = json::parse(openApiDocument(allRoutes({})));
  std::set<std::string> ids;
  for (auto& [key, op] : operationsOf(doc)) {
    ASSERT_TRUE(op.contains("operationId")) << key;
    EXPECT_TRUE(ids.insert(op["operationId"].get<std::string>()).second)
        << op["operationId"] << " appears twice";
  }
  EXPECT_EQ(ids.size(), allRoutes({}).size());
}

TEST(OpenApi, TheDocumentListsExactlyTheRouteTableWithEachRequirement) {
  auto routes = allRoutes({});
  auto ops = operationsOf(json::parse(openApiDocument(routes)));
  std::set<std::string> inTable;
  for (auto& r : routes) {
    std::string key = r.method + " " + r.path;
    inTable.insert(key);
    ASSERT_TRUE(ops.count(key)) << key << " is served but not in the document";
    const json& op = ops[key];
    EXPECT_EQ(op["operationId"], r.operationId);
    auto need = op["x-ductus-requirement"];
    EXPECT_EQ(need["anonymous"], r.requirement.anonymous) << key;
    EXPECT_EQ(need["changes"], r.requirement.changes) << key;
    if (r.requirement.anonymous) {
      EXPECT_EQ(op["security"], json::array()) << key;
    } else {
      EXPECT_EQ(need["role"], std::string(roleName(r.requirement.role))) << key;
      EXPECT_EQ(op["security"].size(), 2u) << key << ": bearer or session";
      EXPECT_TRUE(op["responses"].contains("401")) << key;
      EXPECT_TRUE(op["responses"].contains("403")) << key;
    }
  }
  for (auto& [key, op] : ops) EXPECT_TRUE(inTable.count(key)) << key << " is documented only";
}

// The server, started on the same function's list, answers every documented
// operation (never 404 / 405) and nothing else under those paths.
TEST(OpenApi, TheServerAnswersEveryDocumentedOperationAndNoOther) {
  ApiHarness api;
  auto s = api.start(allRoutes({}));
  ASSERT_TRUE(s) << s.error().message;
  auto served = api.get("/api/v1/openapi.json");
  ASSERT_EQ(served.status, 200);
  auto doc = json::parse(served.body);
  size_t checked = 0;
  for (auto& [path, item] : doc["paths"].items()) {
    for (std::string m : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
      auto r = api.call(m, concrete(path), bearer("admin+payloads+audit"));
      if (item.contains(lower(m))) {
        EXPECT_NE(r.status, 404) << m << " " << path << ": " << r.body;
        EXPECT_NE(r.status, 405) << m << " " << path << ": " << r.body;
        ++checked;
      } else {
        EXPECT_EQ(r.status, 405) << m << " " << path << " is not documented: " << r.body;
      }
    }
  }
  EXPECT_EQ(checked, allRoutes({}).size());
}

TEST(OpenApi, ApiSpecPrintsWhatTheServerServes) {
  auto spec = ductus::test::runChild({ductus::test::ductusBinary(), "api-spec"});
  ASSERT_TRUE(::ductus::test::exitedWith(spec.exitStatus, 0)) << spec.out;
  ApiHarness api;
  ASSERT_TRUE(api.start(allRoutes({})));
  auto served = api.get("/api/v1/openapi.json");
  ASSERT_EQ(served.status, 200);
  EXPECT_EQ(served.header("content-type"), "application/json");
  EXPECT_EQ(json::parse(spec.out), json::parse(served.body));
  EXPECT_EQ(spec.out, openApiDocument(allRoutes({})) + "\n");
}

// Debian's Node.js runs the validator scripts/install-deps.sh installed
// (npm ci in tests/api/node).
TEST(OpenApi, TheDocumentIsValidOpenApi31) {
  fs::path node = fs::path(DUCTUS_SOURCE_DIR) / "tests/api/node";
  ASSERT_TRUE(fs::exists(node / "node_modules/@seriousme/openapi-schema-validator"))
      << "the validator is not installed: run scripts/install-deps.sh (npm ci in " << node << ")";
  char tmpl[] = "/tmp/ductus-openapi.XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(tmpl) << openApiDocument(allRoutes({}));
  auto good = ductus::test::runChild(
      {"/bin/sh", "-c", "exec node \"$0\" \"$1\" 2>&1", (node / "validate.mjs").string(), tmpl});
  EXPECT_TRUE(::ductus::test::exitedWith(good.exitStatus, 0)) << good.out;
  EXPECT_EQ(good.out, "valid\n");

  // The validator can fail: a document without its info is not OpenAPI.
  auto broken = json::parse(openApiDocument(allRoutes({})));
  broken.erase("info");
  std::ofstream(tmpl, std::ios::trunc) << broken.dump();
  auto bad = ductus::test::runChild(
      {"/bin/sh", "-c", "exec node \"$0\" \"$1\" 2>&1", (node / "validate.mjs").string(), tmpl});
  EXPECT_TRUE(::ductus::test::exitedWith(bad.exitStatus, 1)) << bad.out;
  fs::remove(tmpl);
}

}  // namespace
}  // namespace ductus::api::test
