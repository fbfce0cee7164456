// The console's files on the API's port (api/ui/ui_assets.h), over real
// HTTP: a table of the test's own for the rules (the index for unknown
// paths but not under /assets/, a year's caching only for hashed assets,
// gzip as the client accepts it, ETag revalidation, GET and HEAD only, the
// CSP on every answer), then the table this binary was built with.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "api/ui/ui_assets.h"
#include "tests/api/api_harness.h"

namespace ductus::api::test {
namespace {

constexpr std::string_view kIndexBody = "<!doctype html><script src=\"/assets/app-1a2b.js\"></script>";

const UiFile kFiles[] = {
    {"/assets/app-1a2b.js", "text/javascript; charset=utf-8", "\"aaaa\"", "console.log('app')",
     "GZIPPED-APP"},
    {"/favicon.svg", "image/svg+xml", "\"bbbb\"", "<svg/>", {}},
    {"/index.html", "text/html; charset=utf-8", "\"cccc\"", kIndexBody, "GZIPPED-INDEX"},
};
const UiTable kTable{kFiles, 3, true};

class UiAssetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = api_.start({}, nullptr, &kTable);
    ASSERT_TRUE(s) << s.error().message;
  }
  ApiHarness api_;
};

void expectGuarded(const ductus::test::HttpReply& r, const std::string& what) {
  EXPECT_EQ(r.header("content-security-policy"), std::string(kUiContentSecurityPolicy)) << what;
  EXPECT_EQ(r.header("x-content-type-options"), "nosniff") << what;
  EXPECT_EQ(r.header("x-frame-options"), "DENY") << what;
}

TEST_F(UiAssetsTest, TheRootAndEveryUnknownPathOutsideApiAreTheIndexRevalidatedEachTime) {
  for (std::string path : {"/", "/index.html", "/interfaces/adt/messages", "/messages/12",
                           "/quarantine?status=x"}) {
    auto r = api_.get(path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.body, kIndexBody) << path;
    EXPECT_EQ(r.header("content-type"), "text/html; charset=utf-8") << path;
    EXPECT_EQ(r.header("cache-control"), "no-cache") << path;
    EXPECT_EQ(r.header("etag"), "\"cccc\"") << path;
    expectGuarded(r, path);
  }
  // The API's own paths stay the API's.
  auto api = api_.get("/api/v1/nothing");
  EXPECT_EQ(api.status, 404);
  EXPECT_EQ(errorOf(api)["error"], "not_found") << api.body;
}

TEST_F(UiAssetsTest, HashedAssetsAreCachedAYearAndAMissingOneIsA404NotTheIndex) {
  auto r = api_.get("/assets/app-1a2b.js");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "console.log('app')");
  EXPECT_EQ(r.header("content-type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(r.header("cache-control"), "public, max-age=31536000, immutable");
  expectGuarded(r, "asset");
  // A chunk of an older build: index.html would be run as its script.
  auto gone = api_.get("/assets/app-0000.js");
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(gone.header("content-type"), "text/plain; charset=utf-8");
  EXPECT_NE(gone.body.find("/assets/app-0000.js"), std::string::npos) << gone.body;
  expectGuarded(gone, "missing asset");
  // Outside /assets/ a file of the table is revalidated each time.
  auto icon = api_.get("/favicon.svg");
  EXPECT_EQ(icon.status, 200);
  EXPECT_EQ(icon.header("cache-control"), "no-cache");
}

TEST_F(UiAssetsTest, GzipGoesOnlyToAClientThatAcceptsItAndOnlyWhereThereIsACopy) {
  auto gz = api_.call("GET", "/assets/app-1a2b.js", {{"Accept-Encoding", "br, gzip;q=0.8"}});
  EXPECT_EQ(gz.body, "GZIPPED-APP");
  EXPECT_EQ(gz.header("content-encoding"), "gzip");
  EXPECT_EQ(gz.header("vary"), "Accept-Encoding");
  EXPECT_EQ(gz.header("etag"), "\"aaaa-gz\"");  // a representation of its own
  for (std::string refusal : {"gzip;q=0", "GZIP; q=0.000", "br", "identity", ""}) {
    auto plain = api_.call("GET", "/assets/app-1a2b.js", {{"Accept-Encoding", refusal}});
    EXPECT_EQ(plain.body, "console.log('app')") << refusal;
    EXPECT_EQ(plain.header("content-encoding"), "") << refusal;
    EXPECT_EQ(plain.header("etag"), "\"aaaa\"") << refusal;
  }
  auto star = api_.call("GET", "/", {{"Accept-Encoding", "*"}});
  EXPECT_EQ(star.body, "GZIPPED-INDEX");
  auto noCopy = api_.call("GET", "/favicon.svg", {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(noCopy.body, "<svg/>");
  EXPECT_EQ(noCopy.header("content-encoding"), "");
  EXPECT_EQ(noCopy.header("vary"), "");
}

TEST_F(UiAssetsTest, AKnownETagIsA304WithoutABody) {
  auto r = api_.call("GET", "/", {{"If-None-Match", "\"zzzz\", W/\"cccc\""}});
  EXPECT_EQ(r.status, 304);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(r.header("etag"), "\"cccc\"");
  expectGuarded(r, "304");
  // The identity tag does not revalidate the gzip copy.
  auto other = api_.call("GET", "/", {{"If-None-Match", "\"cccc\""}, {"Accept-Encoding", "gzip"}});
  EXPECT_EQ(other.status, 200);
  EXPECT_EQ(other.body, "GZIPPED-INDEX");
}

TEST_F(UiAssetsTest, OnlyGetAndHeadReadTheFiles) {
  auto head = api_.call("HEAD", "/assets/app-1a2b.js");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("content-length"), "18");
  EXPECT_EQ(head.body, "");
  for (std::string method : {"POST", "PUT", "DELETE"}) {
    auto r = api_.call(method, "/index.html", {{"Content-Type", "text/plain"}}, "x");
    EXPECT_EQ(r.status, 405) << method;
    EXPECT_EQ(r.header("allow"), "GET, HEAD") << method;
    expectGuarded(r, method);
  }
}

// The table this binary carries: the console when ui/dist was built (CI
// sets DUCTUS_REQUIRE_UI=1, so there it must be), else the page that says
// how to build it. Either way sorted, and each gzip copy is a gzip stream
// of the file's own length.
TEST(EmbeddedUi, TheBuiltTableIsSortedAndItsGzipCopiesAreOfTheirFiles) {
  const UiTable& t = embeddedUi();
  ASSERT_GT(t.count, 0u);
  const char* required = std::getenv("DUCTUS_REQUIRE_UI");
  if (required && std::string(required) == "1") {
    EXPECT_TRUE(t.built);
  }
  bool index = false;
  for (size_t i = 0; i < t.count; ++i) {
    const UiFile& f = t.files[i];
    if (i > 0) {
      EXPECT_LT(t.files[i - 1].path, f.path);
    }
    index = index || f.path == "/index.html";
    EXPECT_FALSE(f.body.empty()) << f.path;
    EXPECT_EQ(f.etag.size(), 18u) << f.path;
    if (f.gzip.empty()) continue;
    ASSERT_GT(f.gzip.size(), 18u) << f.path;
    EXPECT_EQ(static_cast<unsigned char>(f.gzip[0]), 0x1f) << f.path;
    EXPECT_EQ(static_cast<unsigned char>(f.gzip[1]), 0x8b) << f.path;
    EXPECT_LE(f.gzip.size() * 10, f.body.size() * 9) << f.path;
    // ISIZE, the stream's last four bytes: the uncompressed length.
    auto b = [&](size_t k) { return uint32_t(uint8_t(f.gzip[f.gzip.size() - 4 + k])); };
    EXPECT_EQ(b(0) | b(1) << 8 | b(2) << 16 | b(3) << 24, f.body.size()) << f.path;
  }
  EXPECT_TRUE(index);
}

}  // namespace
}  // namespace ductus::api::test
