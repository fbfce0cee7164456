// The REST API of an engine a test started, called as an operator's
// script would: a token made with `ductus token create` (the engine has
// migrated the database), one HTTP connection per call.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/exit_status.h"
#include "tests/support/http_client.h"
#include "tests/support/test_env.h"

namespace ductus::test {

// A new API token named `name` with `role`, from the command line.
inline std::string tokenFor(const std::string& url, const std::string& name,
                            const std::string& role) {
  auto r = runChild({ductusBinary(), "token", "create", name, "--role", role, "--database", url});
  EXPECT_TRUE(exitedWith(r.exitStatus, 0)) << r.out;
  return r.out.substr(0, r.out.find('\n'));
}

struct EngineApi {
  using json = nlohmann::json;
  uint16_t port = 0;
  std::string token;

  // An empty reply (status 0) when the engine could not be reached.
  HttpReply call(const std::string& method, const std::string& path, const json& body = nullptr,
                 bool withToken = true) const {
    auto c = HttpClient::connect(port);
    if (!c) return {};
    std::map<std::string, std::string> h;
    if (withToken) h["Authorization"] = "Bearer " + token;
    std::string text;
    if (!body.is_null()) {
      text = body.dump();
      h["Content-Type"] = "application/json";
    }
    auto r = c->request(method, path, text, h);
    return r ? *r : HttpReply{};
  }
  // The answer's JSON, or null when it wasn't JSON.
  json get(const std::string& path) const {
    auto j = json::parse(call("GET", path).body, nullptr, false);
    return j.is_discarded() ? json() : j;
  }
  int health() const { return call("GET", "/api/v1/health", nullptr, false).status; }
};

}  // namespace ductus::test
