// Durations, sizes, addresses and the nearest-key suggestion.
#include <gtest/gtest.h>

#include "common/config/address.h"
#include "common/config/duration.h"
#include "common/config/suggest.h"

namespace ductus::config {
namespace {

using namespace std::chrono_literals;

TEST(Values, DurationsCarryTheirUnit) {
  EXPECT_EQ(parseDuration("250ms"), Duration(250));
  EXPECT_EQ(parseDuration("5s"), Duration(5s));
  EXPECT_EQ(parseDuration("10m"), Duration(10min));
  EXPECT_EQ(parseDuration("1h"), Duration(1h));
  EXPECT_EQ(parseDuration("2d"), Duration(48h));
  for (const char* bad : {"5", "", "s", "5 s", "-5s", "1.5s", "5S", "99999999999999s"})
    EXPECT_FALSE(parseDuration(bad)) << bad;
  EXPECT_EQ(formatDuration(Duration(300000)), "5m");
  EXPECT_EQ(formatDuration(Duration(1500)), "1500ms");
}

TEST(Values, SizesAreBinaryMultiples) {
  EXPECT_EQ(parseSize("64MB"), 64ull << 20);
  EXPECT_EQ(parseSize("512KB"), 512ull << 10);
  EXPECT_EQ(parseSize("1GB"), 1ull << 30);
  EXPECT_EQ(parseSize("100B"), 100u);
  for (const char* bad : {"64", "64mb", "64 MB", "MB", "1TB"}) EXPECT_FALSE(parseSize(bad)) << bad;
}

TEST(Values, HostPortsAreCheckedAndIpv6IsBracketed) {
  auto a = parseHostPort("127.0.0.1:2575");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 2575);
  auto b = parseHostPort("[::1]:8080");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->toString(), "[::1]:8080");
  EXPECT_TRUE(parseHostPort("lab.example:443"));
  for (const char* bad : {"127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", ":80", "a b:80", "[::1:80", "::1:80",
                          "host:-1", "-host:80"})
    EXPECT_FALSE(parseHostPort(bad)) << bad;
}

TEST(Values, UrlsAreHttpOrHttpsWithAHost) {
  EXPECT_TRUE(isValidHttpUrl("https://lab.example/in?x=1"));
  EXPECT_TRUE(isValidHttpUrl("http://127.0.0.1:8090"));
  EXPECT_TRUE(isValidHttpUrl("http://[::1]:8090/a"));
  EXPECT_TRUE(isValidHttpUrl("https://user:pw@lab.example/"));
  for (const char* bad : {"ftp://x", "https://", "lab.example/in", "http://a b/", "http://x:99999/"})
    EXPECT_FALSE(isValidHttpUrl(bad)) << bad;
}

TEST(Values, WildcardListenersCollideWithEveryAddressOnTheirPort) {
  EXPECT_TRUE(sameListenAddress({"0.0.0.0", 80}, {"127.0.0.1", 80}));
  EXPECT_TRUE(sameListenAddress({"127.0.0.1", 80}, {"127.0.0.1", 80}));
  EXPECT_FALSE(sameListenAddress({"127.0.0.1", 80}, {"127.0.0.2", 80}));
  EXPECT_FALSE(sameListenAddress({"0.0.0.0", 80}, {"0.0.0.0", 81}));
}

TEST(Values, TheNearestKeyIsSuggestedOnlyWhenItIsClose) {
  EXPECT_EQ(nearestKey("destinaton", {"source", "destination", "destinations"}), "destination");
  EXPECT_EQ(nearestKey("tmeout", {"timeout", "format"}), "timeout");
  EXPECT_EQ(nearestKey("colour", {"timeout", "format"}), "");
  EXPECT_EQ(editDistance("kitten", "sitting"), 3u);
}

}  // namespace
}  // namespace ductus::config
