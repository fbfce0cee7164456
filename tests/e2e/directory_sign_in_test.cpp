// Directory sign-in through a real engine (issue #34's "done when"): a
// `ductus run` whose ductus.yaml has auth: { ldap: } pointing at Debian's
// slapd started by the test (base dc=hospital,dc=test). The member of
// ductus-operators signs in as operator with her directory password, a
// wrong one is 401, the user in no group is refused; removed from the
// group, her session ends at the engine's own next refresh round.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/support/engine_process.h"
#include "tests/support/exit_status.h"
#include "tests/support/http_client.h"
#include "tests/support/ports.h"
#include "tests/support/slapd_server.h"
#include "tests/support/test_database.h"

namespace ductus::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

HttpReply call(uint16_t port, const std::string& method, const std::string& path,
               const std::map<std::string, std::string>& headers = {},
               const std::string& body = {}) {
  auto c = HttpClient::connect(port);
  if (!c) return {};
  auto h = headers;
  if (!body.empty()) h["Content-Type"] = "application/json";
  auto r = c->request(method, path, body, h);
  return r ? *r : HttpReply{};
}

std::string sessionOf(const HttpReply& r) {
  std::string c = r.header("set-cookie");
  auto eq = c.find('='), semi = c.find(';');
  return eq == std::string::npos || semi == std::string::npos ? ""
                                                              : c.substr(eq + 1, semi - eq - 1);
}

TEST(DirectorySignIn, TheEnginesRoundEndsTheSessionOfSomeoneRemovedFromHerGroup) {
  SlapdServer slapd;
  auto started = slapd.start(SlapdServer::person("ann", "ann-Directory-Pw1") +
                             SlapdServer::person("ben", "ben-Directory-Pw1") +
                             SlapdServer::person("cid", "cid-Directory-Pw1") +
                             // groupOfNames keeps one member at least: cid stays.
                             SlapdServer::group("ductus-operators", {"ann", "cid"}));
  ASSERT_TRUE(started.ok()) << started.error().message;
  TestDatabase db;
  uint16_t mllp = freePort(), api = freePort();
  std::string base = SlapdServer::kBase;
  TempProject project(std::map<std::string, std::string>{
      {"ductus.yaml", "api: { listen: 127.0.0.1:" + std::to_string(api) +
                          " }\n"
                          "isolates: { workers: 1 }\n"
                          "auth:\n"
                          "  ldap:\n"
                          "    url: " +
                          slapd.url() +
                          "\n"
                          "    bind: { dn: \"" +
                          SlapdServer::kServiceDn +
                          "\", password: " + SlapdServer::kServicePassword +
                          " }\n"
                          "    users: { base: \"ou=people," +
                          base +
                          "\", filter: \"(uid={name})\" }\n"
                          "    groups: { base: \"ou=groups," +
                          base +
                          "\", roles: { ductus-operators: operator } }\n"
                          "    refresh: 1s\n"},
      {"interfaces/adt/interface.yaml",
       "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(mllp) +
           " }\ndestination:\n  file: { path: out/ }\n"},
      {"interfaces/adt/transform.js", "export function transform(msg) { return msg; }\n"}});
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start()) << engine.log();

  auto signIn = [&](const std::string& name, const std::string& password) {
    return call(api, "POST", "/api/v1/sessions", {},
                json{{"name", name}, {"password", password}}.dump());
  };
  auto ann = signIn("ann", "ann-Directory-Pw1");
  ASSERT_EQ(ann.status, 201) << ann.body << engine.log();
  EXPECT_EQ(json::parse(ann.body)["user"]["role"], "operator");
  EXPECT_EQ(signIn("ann", "not-her-Password1").status, 401);
  EXPECT_EQ(signIn("ben", "ben-Directory-Pw1").status, 403);
  std::map<std::string, std::string> cookie{{"Cookie", "ductus_session=" + sessionOf(ann)}};
  EXPECT_EQ(call(api, "GET", "/api/v1/me", cookie).status, 200);

  auto removed = slapd.modify(
      "dn: cn=ductus-operators,ou=groups," + base +
      "\nchangetype: modify\ndelete: member\nmember: " + SlapdServer::personDn("ann") + "\n");
  ASSERT_TRUE(removed.ok()) << removed.error().message;
  // The engine's round runs every second here (refresh: 1s): bounded
  // wait, no timing asserted.
  int status = 0;
  for (auto until = std::chrono::steady_clock::now() + 30s;
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(200ms))
    if ((status = call(api, "GET", "/api/v1/me", cookie).status) == 401) break;
  EXPECT_EQ(status, 401) << engine.log();
  EXPECT_NE(engine.log().find("ann is in no group that has a role here"), std::string::npos)
      << engine.log();
  EXPECT_TRUE(exitedWith(engine.terminate(), 0)) << engine.log();
}

}  // namespace
}  // namespace ductus::test
