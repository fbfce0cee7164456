// The engine's routes over real HTTP, on a fake EngineView: /health for
// anyone (503 while draining or stopping), /engine and /interfaces for a
// viewer, their bodies as the document says.
#include "api/engine_routes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/hotspot_routes.h"
#include "api/metrics.h"
#include "api/routes.h"
#include "common/version.h"
#include "tests/api/api_harness.h"

namespace ductus::api::test {
namespace {

using nlohmann::json;

class FakeEngine : public EngineView {
 public:
  EngineState state() const override { return state_; }
  EngineInfo engine() const override {
    EngineInfo e;
    e.startedAt = startedAt;
    e.state = state_;
    e.workers.push_back({"shared", 0, 4242, "running", 2, 3});
    e.workers.push_back({"lab", 0, 0, "down", 5, 0});
    return e;
  }
  void interfaces(std::function<void(Result<std::vector<InterfaceInfo>>)> done) override {
    if (fail) return done(Error{"the store is unreachable"});
    InterfaceInfo adt;
    adt.name = "adt";
    adt.source = "mllp";
    adt.state = "running";
    adt.gateOpen = true;
    adt.received = 10;
    adt.duplicates = 1;
    DestinationInfo out;
    out.name = "default";
    out.sent = 7;
    out.filtered = 1;
    out.quarantined = 1;
    out.retries = 4;
    // 10 sends: 4 within 1 ms, 6 within 1 to 2.5 ms.
    out.send.bounds = {0.001, 0.0025, 0.005};
    out.send.buckets = {4, 6, 0, 0};
    out.send.count = 10;
    out.send.sumSeconds = 0.015;
    adt.destinations.push_back(out);
    InterfaceInfo lookup;
    lookup.name = "lookup";
    lookup.source = "http";
    lookup.state = "stopped";
    done(std::vector<InterfaceInfo>{adt, lookup});
  }

  void interfacesWithPending(
      std::function<void(Result<std::vector<InterfaceInfo>>)> done) override {
    interfaces([this, done](Result<std::vector<InterfaceInfo>> r) {
      if (r) {
        (*r)[0].destinations[0].pending = 12;
        (*r)[0].destinations[0].quarantinedNow = 3;
        if (withHealth) {
          DestinationHealthInfo h;
          h.state = "behind";
          h.reason = "40 waiting, the oldest for 12 minutes";
          h.waiting = 40;
          h.oldestSeconds = 720;
          h.quarantined = 3;
          h.lastSent = "2024-05-01T12:00:00Z";
          h.catchingUp = false;
          h.causes = {"slow receiver"};
          (*r)[0].destinations[0].health = h;
          (*r)[0].health = InterfaceHealthInfo{"behind", "default: 40 waiting", "", "2024-05-01T11:00:00Z"};
        }
      }
      done(std::move(r));
    });
  }

  void hotspots(std::function<void(Result<std::vector<HotspotInfo>>)> done) override {
    if (fail) return done(Error{"the store is unreachable"});
    HotspotInfo h;
    h.interface = "adt";
    h.destination = "default";
    h.waiting = 41;
    h.lanes.push_back({7, 40, 1234, "MRN-1", 9, "connection refused", "2024-05-01T12:00:00Z",
                       "2024-05-01T12:00:12Z"});
    h.lanes.push_back({2, 1, 1300, "", 0, "", "2024-05-01T12:01:00Z", std::nullopt});
    h.findings.push_back({"blocked-lane", "lane 7 waits behind message 1234 (9 attempts)"});
    done(std::vector<HotspotInfo>{h});
  }

  EngineState state_ = EngineState::Serving;  // set on the loop thread
  bool fail = false;
  bool withHealth = false;  // as an engine that judges health
  std::chrono::system_clock::time_point startedAt =
      std::chrono::system_clock::time_point(std::chrono::milliseconds(1714564800123));
};

class EngineRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = api_.start(allRoutes({.engine = &engine_}));
    ASSERT_TRUE(s) << s.error().message;
  }
  void setState(EngineState s) {
    api_.loop().run([&] { engine_.state_ = s; });
  }
  FakeEngine engine_;
  ApiHarness api_;
};

TEST_F(EngineRoutesTest, HealthNeedsNoTokenAndIs200WhileServing) {
  auto r = api_.get("/api/v1/health");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body), (json{{"status", "serving"}}));
}

TEST_F(EngineRoutesTest, HealthIs503WhileDrainingOrStopping) {
  for (auto [state, name] : {std::pair{EngineState::Draining, "draining"},
                             std::pair{EngineState::Stopping, "stopping"}}) {
    setState(state);
    auto r = api_.get("/api/v1/health");
    EXPECT_EQ(r.status, 503) << name;
    auto j = json::parse(r.body);
    EXPECT_EQ(j["status"], name);
    EXPECT_EQ(errorOf(r)["error"], name) << "an error body as every other";
    EXPECT_FALSE(r.header("retry-after").empty());
  }
  setState(EngineState::Serving);
  EXPECT_EQ(api_.get("/api/v1/health").status, 200);
}

TEST_F(EngineRoutesTest, EngineNeedsAViewerAndSaysVersionStartAndWorkers) {
  EXPECT_EQ(api_.get("/api/v1/engine").status, 401);
  auto r = api_.get("/api/v1/engine", bearer("viewer"));
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = json::parse(r.body);
  EXPECT_EQ(j["version"], kVersion);
  EXPECT_EQ(j["commit"], kGitCommit);
  EXPECT_EQ(j["startedAt"], "2024-05-01T12:00:00.123Z");
  EXPECT_GT(j["uptimeSeconds"].get<int64_t>(), 0);
  EXPECT_EQ(j["state"], "serving");
  ASSERT_EQ(j["workers"].size(), 2u);
  EXPECT_EQ(j["workers"][0],
            (json{{"group", "shared"}, {"slot", 0}, {"pid", 4242}, {"state", "running"},
                  {"restarts", 2}, {"callsInFlight", 3}}));
  EXPECT_TRUE(j["workers"][1]["pid"].is_null()) << "a worker not running has no pid";
}

TEST_F(EngineRoutesTest, InterfacesNeedAViewerAndGiveStateGateAndCountsSinceStart) {
  auto refused = api_.get("/api/v1/interfaces");
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(errorOf(refused)["error"], "unauthenticated");
  auto r = api_.get("/api/v1/interfaces", bearer("viewer"));
  ASSERT_EQ(r.status, 200) << r.body;
  auto list = json::parse(r.body)["interfaces"];
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["name"], "adt");
  EXPECT_EQ(list[0]["source"], "mllp");
  EXPECT_EQ(list[0]["state"], "running");
  EXPECT_EQ(list[0]["gate"], "open");
  EXPECT_EQ(list[0]["sinceStart"], (json{{"received", 10}, {"duplicates", 1}}));
  EXPECT_EQ(list[0]["destinations"][0]["name"], "default");
  EXPECT_EQ(list[0]["destinations"][0]["sinceStart"],
            (json{{"sent", 7}, {"filtered", 1}, {"quarantined", 1}, {"routed", 0}, {"retries", 4}}));
  EXPECT_EQ(list[1]["state"], "stopped");
  EXPECT_TRUE(list[1]["gate"].is_null()) << "respond mode has no queue";
  // Now, from the store's partial indexes; the timings from the histograms.
  auto& dest = list[0]["destinations"][0];
  EXPECT_EQ(dest["pending"], 12);
  EXPECT_EQ(dest["quarantined"], 3);
  EXPECT_EQ(dest["timings"]["send"]["count"], 10);
  EXPECT_DOUBLE_EQ(dest["timings"]["send"]["meanMs"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(dest["timings"]["send"]["p50Ms"].get<double>(), 1.25);  // 1 + 1.5 * 1/6
  EXPECT_DOUBLE_EQ(dest["timings"]["send"]["p95Ms"].get<double>(), 2.375);  // 1 + 1.5 * 5.5/6
  EXPECT_TRUE(dest["timings"]["latency"]["p50Ms"].is_null()) << "no observation yet";
}

TEST_F(EngineRoutesTest, InterfacesCarryTheMonitorsHealthWhenItJudgesAndNoneBefore) {
  auto before = json::parse(api_.get("/api/v1/interfaces", bearer("viewer")).body)["interfaces"];
  EXPECT_FALSE(before[0].contains("health")) << "no judgement yet: no health, not a made-up ok";
  EXPECT_FALSE(before[0]["destinations"][0].contains("health"));
  api_.loop().run([&] { engine_.withHealth = true; });
  auto r = api_.get("/api/v1/interfaces", bearer("viewer"));
  ASSERT_EQ(r.status, 200) << r.body;
  auto list = json::parse(r.body)["interfaces"];
  EXPECT_EQ(list[0]["health"], (json{{"state", "behind"},
                                     {"reason", "default: 40 waiting"},
                                     {"lastReceived", ""},
                                     {"watchedSince", "2024-05-01T11:00:00Z"}}));
  EXPECT_EQ(list[0]["destinations"][0]["health"],
            (json{{"state", "behind"},
                  {"reason", "40 waiting, the oldest for 12 minutes"},
                  {"waiting", 40},
                  {"oldestSeconds", 720.0},
                  {"quarantined", 3},
                  {"lastSent", "2024-05-01T12:00:00Z"},
                  {"lastError", ""},
                  {"lastErrorText", ""},
                  {"catchingUp", false},
                  {"causes", {"slow receiver"}}}))
      << "etaSeconds is left out when there is none";
  EXPECT_FALSE(list[1].contains("health"));
}

TEST_F(EngineRoutesTest, HotspotsNeedAViewerAndShowLanesAndFindings) {
  EXPECT_EQ(api_.get("/api/v1/hotspots").status, 401);
  auto r = api_.get("/api/v1/hotspots", bearer("viewer"));
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = json::parse(r.body);
  ASSERT_EQ(j["destinations"].size(), 1u);
  auto& d = j["destinations"][0];
  EXPECT_EQ(d["interface"], "adt");
  EXPECT_EQ(d["destination"], "default");
  EXPECT_EQ(d["waiting"], 41);
  ASSERT_EQ(d["lanes"].size(), 2u);
  EXPECT_EQ(d["lanes"][0], (json{{"lane", 7},
                                 {"waiting", 40},
                                 {"firstMessageId", 1234},
                                 {"firstKey", "MRN-1"},
                                 {"firstAttempts", 9},
                                 {"firstLastError", "connection refused"},
                                 {"firstReceivedAt", "2024-05-01T12:00:00Z"},
                                 {"nextRetryAt", "2024-05-01T12:00:12Z"}}));
  EXPECT_TRUE(d["lanes"][1]["nextRetryAt"].is_null()) << "its loop is not waiting to retry";
  EXPECT_EQ(d["findings"], (json::array({{{"kind", "blocked-lane"},
                                          {"text", "lane 7 waits behind message 1234 (9 attempts)"}}})));
  api_.loop().run([&] { engine_.fail = true; });
  EXPECT_EQ(api_.get("/api/v1/hotspots", bearer("viewer")).status, 503);
}

TEST(HistogramQuantile, IsLinearWithinItsBucketAndTheLastBoundPastThem) {
  HistogramInfo h;
  h.bounds = {1, 2, 4};
  EXPECT_FALSE(histogramQuantile(h, 0.5)) << "empty";
  h.buckets = {2, 0, 2, 0};
  h.count = 4;
  EXPECT_DOUBLE_EQ(*histogramQuantile(h, 0.25), 0.5);  // the first bucket starts at 0
  EXPECT_DOUBLE_EQ(*histogramQuantile(h, 0.5), 1.0);
  EXPECT_DOUBLE_EQ(*histogramQuantile(h, 0.75), 3.0);  // the empty (1, 2] is skipped
  h.buckets = {0, 0, 0, 5};
  h.count = 5;
  EXPECT_DOUBLE_EQ(*histogramQuantile(h, 0.5), 4.0) << "+Inf: the last bound";
}

// The case: waits of about 440 s fall in the 300-3600 s bucket,
// where interpolation alone read a p50 of 1,950 s.
TEST(HistogramQuantile, NeverSaysMoreThanTheLargestValueObserved) {
  Histogram waits;
  for (int s : {430, 440, 445}) waits.observe(std::chrono::seconds(s));
  HistogramInfo h = histogramInfo(waits);
  ASSERT_TRUE(h.maxSeconds);
  EXPECT_DOUBLE_EQ(*h.maxSeconds, 445.0);
  EXPECT_DOUBLE_EQ(*histogramQuantile(h, 0.5), 445.0);
  EXPECT_DOUBLE_EQ(*histogramQuantile(h, 0.95), 445.0);
  h.maxSeconds.reset();
  EXPECT_GT(*histogramQuantile(h, 0.5), 1500.0) << "uncapped, the bucket's middle";

  Histogram past;  // past the last bound (1 h): the largest seen, not 1 h
  past.observe(std::chrono::hours(3));
  EXPECT_DOUBLE_EQ(*histogramQuantile(histogramInfo(past), 0.5), 3 * 3600.0);
}

TEST_F(EngineRoutesTest, InterfacesTheEngineCantReadAre503) {
  api_.loop().run([&] { engine_.fail = true; });
  auto r = api_.get("/api/v1/interfaces", bearer("viewer"));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(errorOf(r)["error"], "unavailable") << r.body;
}

TEST(EngineRoutesWithoutAnEngine, AnswerUnavailable) {
  ApiHarness api;
  auto s = api.start(engineRoutes(nullptr));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(api.get("/api/v1/health").status, 503);
  EXPECT_EQ(api.get("/api/v1/interfaces", bearer("viewer")).status, 503);
  ApiHarness hot;
  ASSERT_TRUE(hot.start(hotspotRoutes(nullptr)));
  EXPECT_EQ(hot.get("/api/v1/hotspots", bearer("viewer")).status, 503);
}

}  // namespace
}  // namespace ductus::api::test
