// Respond mode's translation: a request into the JSON a script receives, a
// script's answer into a response, and a bad answer into a 500.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "intake/http_respond.h"

namespace ductus::intake {
namespace {

TEST(HttpRespond, AnAnswerObjectBecomesStatusHeadersAndBody) {
  auto r = respondResponseOf(R"({"status":201,"headers":{"X-A":"1","X-N":2},"body":{"k":true}})");
  EXPECT_EQ(r.status, 201);
  ASSERT_EQ(r.headers.size(), 2u);
  EXPECT_EQ(r.headers[0], (std::pair<std::string, std::string>{"X-A", "1"}));
  EXPECT_EQ(r.headers[1], (std::pair<std::string, std::string>{"X-N", "2"}));
  EXPECT_EQ(r.body, R"({"k":true})");
}

TEST(HttpRespond, TextThatIsNotAnObjectIsA200Body) {
  EXPECT_EQ(respondResponseOf("plain words").body, "plain words");
  EXPECT_EQ(respondResponseOf("plain words").status, 200);
  EXPECT_EQ(respondResponseOf("[1,2]").body, "[1,2]");
}

TEST(HttpRespond, AStatusThatIsNotAnIntegerFrom100To599IsA500) {
  for (const char* bad : {R"({"status":"404"})", R"({"status":99})", R"({"status":600})",
                          R"({"status":200.5})", R"({"status":true})", R"({"status":null})",
                          R"({"status":{"a":1}})", R"({"status":-1})"}) {
    auto r = respondResponseOf(bad);
    EXPECT_EQ(r.status, 500) << bad;
  }
  EXPECT_EQ(respondResponseOf(R"({"status":599})").status, 599);
  EXPECT_EQ(respondResponseOf(R"({"status":100})").status, 100);
}

TEST(HttpRespond, HeadersThatCouldSplitTheResponseOrReframeItAreRefused) {
  for (const char* bad :
       {R"({"headers":{"Location":"/a\r\nX-Injected: 1"}})", R"({"headers":{"X\nY":"1"}})",
        R"({"headers":{"Content-Length":"3"}})", R"({"headers":{"transfer-encoding":"chunked"}})",
        R"({"headers":{"Connection":"close"}})", R"({"headers":{"":"1"}})",
        R"({"headers":{"A":"nul\u0000"}})", R"({"headers":["X-A"]})"}) {
    auto r = respondResponseOf(bad);
    EXPECT_EQ(r.status, 500) << bad;
    for (auto& [k, v] : r.headers) EXPECT_EQ(k, "Content-Type") << bad;
  }
}

TEST(HttpRespond, AnOutcomeWithoutOutputMapsToItsStatus) {
  EXPECT_EQ(respondWithoutOutput("filtered").status, 204);
  EXPECT_EQ(respondWithoutOutput("quarantine").status, 500);
  EXPECT_EQ(respondWithoutOutput("transient").status, 503);
  EXPECT_EQ(respondWithoutOutput("runaway-timeout").status, 503);
}

TEST(HttpRespond, TheRequestReachesTheScriptAsJsonWithItsBytesAsText) {
  net::HttpRequest req;
  req.method = "POST";
  req.path = "/x";
  req.query = "a=1";
  req.headers = {{"content-type", "text/plain"}};
  req.body = "caf\xe9";  // ISO-8859-1
  auto j = nlohmann::json::parse(respondRequestJson(req));
  EXPECT_EQ(j["method"], "POST");
  EXPECT_EQ(j["path"], "/x");
  EXPECT_EQ(j["query"], "a=1");
  EXPECT_EQ(j["headers"]["content-type"], "text/plain");
  EXPECT_EQ(j["body"], "caf\xc3\xa9");
}

}  // namespace
}  // namespace ductus::intake
