// GET /api/v1/metrics: the text format itself (escaping, cumulative
// buckets, _sum and _count), and the route over real HTTP on a fake
// EngineView: a viewer's token needed, the queue gauges asked at each
// scrape, and an answer Debian's `promtool check metrics` accepts.
#include "api/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "api/routes.h"
#include "tests/api/api_harness.h"
#include "tests/support/exit_status.h"
#include "tests/support/test_env.h"

namespace ductus::api::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

HistogramInfo histogram(std::vector<double> bounds, std::vector<int64_t> buckets, double sum) {
  HistogramInfo h;
  h.bounds = std::move(bounds);
  h.buckets = std::move(buckets);
  h.sumSeconds = sum;
  for (auto b : h.buckets) h.count += b;
  return h;
}

// The engine's 17 bounds, in seconds.
std::vector<double> engineBounds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
          0.5,    1,     2.5,    5,     10,   60,    300,  3600};
}

TEST(MetricsText, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(escapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(escapeLabelValue("lab-feed ü"), "lab-feed ü");
  EXPECT_EQ(escapeHelp("a\\b\"c\nd"), "a\\\\b\"c\\nd");  // a quote stays in HELP
  MetricsText m;
  m.family("x_total", "counter", "what\nit counts");
  m.sample("x_total", {{"interface", "say \"hi\""}, {"destination", "c:\\out"}}, 3);
  EXPECT_EQ(m.text(),
            "# HELP x_total what\\nit counts\n"
            "# TYPE x_total counter\n"
            "x_total{interface=\"say \\\"hi\\\"\",destination=\"c:\\\\out\"} 3\n");
}

TEST(MetricsText, FormatsValuesShortestAndSpecialValuesByName) {
  EXPECT_EQ(formatValue(0), "0");
  EXPECT_EQ(formatValue(12345678), "12345678");
  EXPECT_EQ(formatValue(0.0005), "0.0005");
  EXPECT_EQ(formatValue(2.5), "2.5");
  EXPECT_EQ(formatValue(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(formatValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(formatValue(-1.0 / 0.0), "-Inf");
}

TEST(MetricsText, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  MetricsText m;
  m.histogram("t_seconds", {{"interface", "adt"}}, histogram({0.5, 1}, {1, 2, 3}, 4.25));
  EXPECT_EQ(m.text(),
            "t_seconds_bucket{interface=\"adt\",le=\"0.5\"} 1\n"
            "t_seconds_bucket{interface=\"adt\",le=\"1\"} 3\n"
            "t_seconds_bucket{interface=\"adt\",le=\"+Inf\"} 6\n"
            "t_seconds_sum{interface=\"adt\"} 4.25\n"
            "t_seconds_count{interface=\"adt\"} 6\n");
}

class FakeEngine : public EngineView {
 public:
  EngineState state() const override { return state_; }
  EngineInfo engine() const override {
    EngineInfo e;
    e.state = state_;
    e.workers.push_back({"shared", 0, 4242, "running", 2, 0});
    e.workers.push_back({"shared", 1, 4243, "running", 1, 0});
    e.workers.push_back({"lab", 0, 0, "down", 5, 0});
    return e;
  }
  void interfaces(std::function<void(Result<std::vector<InterfaceInfo>>)> done) override {
    InterfaceInfo adt;
    adt.name = "adt \"main\"";
    adt.source = "mllp";
    adt.state = "running";
    adt.received = 10;
    adt.duplicates = 1;
    DestinationInfo out;
    out.name = "lab";
    out.sent = 7;
    out.filtered = 1;
    out.quarantined = 1;
    out.retries = 4;
    std::vector<int64_t> buckets(18, 0);
    buckets[3] = 5;
    buckets[17] = 2;
    out.latency = histogram(engineBounds(), buckets, 7200.012);
    out.send = histogram(engineBounds(), std::vector<int64_t>(18, 0), 0);
    out.transform = histogram(engineBounds(), std::vector<int64_t>(18, 1), 3999.6);
    adt.destinations.push_back(out);
    DestinationInfo copy;
    copy.name = "copy";
    copy.route = true;
    copy.routed = 3;
    adt.destinations.push_back(copy);
    InterfaceInfo lookup;
    lookup.name = "lookup";
    lookup.source = "http";
    lookup.state = "stopped";
    done(std::vector<InterfaceInfo>{adt, lookup});
  }
  // As a store would: the counts come on a later turn of the loop.
  void interfacesWithPending(
      std::function<void(Result<std::vector<InterfaceInfo>>)> done) override {
    ++scrapes;
    interfaces([this, done](Result<std::vector<InterfaceInfo>> r) {
      auto list = *r;
      list[0].destinations[0].pending = 40 + scrapes;
      DestinationHealthInfo h;
      h.state = "behind";
      h.oldestSeconds = 90.5;
      list[0].destinations[0].health = h;
      list[0].health = InterfaceHealthInfo{"behind", "lab: behind", "", ""};
      ductus::test::LoopThread::after(loop, 2, [done, list] { done(list); });
    });
  }

  uv_loop_t* loop = nullptr;
  EngineState state_ = EngineState::Serving;
  int scrapes = 0;  // on the loop thread
};

// Issue #30: a listener's handshakes, failures and allow: refusals, and
// each certificate's expiry as a Unix time (what an alert compares with
// time()).
TEST(Metrics, ListenersTlsCountsAndCertificateExpiries) {
  EngineInfo info;
  info.listeners.push_back({"lab", true, 12, 3, 0});
  info.listeners.push_back({"0.0.0.0:8080", false, 0, 0, 5});
  info.certificates.push_back(
      {"server", "CN=ductus", std::chrono::system_clock::from_time_t(1830297600)});
  std::string text = renderMetrics(info, {});
  EXPECT_THAT(text, HasSubstr("ductus_tls_handshakes_total{listener=\"lab\"} 12\n"));
  EXPECT_THAT(text, HasSubstr("ductus_tls_handshake_failures_total{listener=\"lab\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("ductus_connections_refused_total{listener=\"0.0.0.0:8080\"} 5\n"));
  // A plain listener has no handshakes to count.
  EXPECT_THAT(text, Not(HasSubstr("ductus_tls_handshakes_total{listener=\"0.0.0.0:8080\"}")));
  EXPECT_THAT(text,
              HasSubstr("ductus_certificate_expiry_timestamp_seconds{certificate=\"server\"} 1830297600\n"));
}

TEST(Metrics, RendersEveryFamilyWithItsLabels) {
  FakeEngine engine;
  std::vector<InterfaceInfo> list;
  engine.interfaces([&](Result<std::vector<InterfaceInfo>> r) { list = *r; });
  list[0].destinations[0].pending = 12;
  auto info = engine.engine();
  info.state = EngineState::Draining;
  std::string text = renderMetrics(info, list);
  for (auto* family : {"ductus_messages_received_total", "ductus_deliveries_total",
                       "ductus_delivery_retries_total", "ductus_queue_pending",
                       "ductus_interface_stopped", "ductus_draining", "ductus_worker_restarts_total",
                       "ductus_delivery_latency_seconds", "ductus_send_seconds",
                       "ductus_transform_seconds"}) {
    EXPECT_THAT(text, HasSubstr(std::string("# HELP ") + family + " ")) << family;
    EXPECT_THAT(text, HasSubstr(std::string("# TYPE ") + family + " ")) << family;
  }
  const std::string adt = "interface=\"adt \\\"main\\\"\"";
  EXPECT_THAT(text, HasSubstr("ductus_messages_received_total{" + adt + "} 10\n"));
  EXPECT_THAT(text, HasSubstr("ductus_messages_received_total{interface=\"lookup\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("ductus_deliveries_total{" + adt +
                              ",destination=\"lab\",outcome=\"sent\"} 7\n"));
  EXPECT_THAT(text, HasSubstr("ductus_deliveries_total{" + adt +
                              ",destination=\"lab\",outcome=\"quarantined\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("ductus_deliveries_total{" + adt +
                              ",destination=\"copy\",outcome=\"routed\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("ductus_delivery_retries_total{" + adt + ",destination=\"lab\"} 4\n"));
  // Only where the store counted: the route has no gauge.
  EXPECT_THAT(text, HasSubstr("ductus_queue_pending{" + adt + ",destination=\"lab\"} 12\n"));
  EXPECT_THAT(text, Not(HasSubstr("ductus_queue_pending{" + adt + ",destination=\"copy\"}")));
  EXPECT_THAT(text, HasSubstr("ductus_interface_stopped{" + adt + "} 0\n"));
  EXPECT_THAT(text, HasSubstr("ductus_interface_stopped{interface=\"lookup\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("ductus_draining 1\n"));
  EXPECT_THAT(text, HasSubstr("ductus_worker_restarts_total{group=\"shared\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("ductus_worker_restarts_total{group=\"lab\"} 5\n"));
  const std::string lab = adt + ",destination=\"lab\"";
  EXPECT_THAT(text, HasSubstr("ductus_delivery_latency_seconds_bucket{" + lab + ",le=\"0.0025\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("ductus_delivery_latency_seconds_bucket{" + lab + ",le=\"0.005\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("ductus_delivery_latency_seconds_bucket{" + lab + ",le=\"3600\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("ductus_delivery_latency_seconds_bucket{" + lab + ",le=\"+Inf\"} 7\n"));
  EXPECT_THAT(text, HasSubstr("ductus_delivery_latency_seconds_sum{" + lab + "} 7200.012\n"));
  EXPECT_THAT(text, HasSubstr("ductus_delivery_latency_seconds_count{" + lab + "} 7\n"));
  EXPECT_THAT(text, HasSubstr("ductus_transform_seconds_bucket{" + lab + ",le=\"60\"} 15\n"));
  // A destination without timings (a fake's route) has no histogram lines.
  EXPECT_THAT(text, Not(HasSubstr("ductus_send_seconds_bucket{" + adt + ",destination=\"copy\"")));
}

// The monitor's judgement: a one-hot gauge per state (Prometheus' enum
// idiom, every state listed), and the oldest wait, 0 when nothing waits.
// Nothing for what the engine has not judged.
TEST(Metrics, MonitorStatesAreOneHotGaugesAndTheOldestWaitIsAGauge) {
  FakeEngine engine;
  std::vector<InterfaceInfo> list;
  engine.interfaces([&](Result<std::vector<InterfaceInfo>> r) { list = *r; });
  DestinationHealthInfo stalled;
  stalled.state = "stalled";
  stalled.oldestSeconds = 1800;
  list[0].destinations[0].health = stalled;
  list[0].destinations[1].health = DestinationHealthInfo{};  // ok, nothing waits
  list[0].health = InterfaceHealthInfo{"stalled", "lab: stalled", "", ""};
  std::string text = renderMetrics(engine.engine(), list);
  const std::string lab = "interface=\"adt \\\"main\\\"\",destination=\"lab\"";
  EXPECT_THAT(text, HasSubstr("# TYPE ductus_destination_state gauge\n"));
  EXPECT_THAT(text, HasSubstr("ductus_destination_state{" + lab + ",state=\"stalled\"} 1\n"));
  for (auto* other : {"paused", "error", "behind", "ok"})
    EXPECT_THAT(text, HasSubstr("ductus_destination_state{" + lab + ",state=\"" + other + "\"} 0\n"))
        << other;
  EXPECT_THAT(text, Not(HasSubstr("ductus_destination_state{" + lab + ",state=\"quiet\"}")))
      << "quiet is an interface's alone";
  EXPECT_THAT(text, HasSubstr("ductus_destination_state{interface=\"adt \\\"main\\\"\","
                              "destination=\"copy\",state=\"ok\"} 1\n"));
  const std::string adt = "interface=\"adt \\\"main\\\"\"";
  EXPECT_THAT(text, HasSubstr("ductus_interface_state{" + adt + ",state=\"stalled\"} 1\n"));
  for (auto* other :
       {"stopped", "paused", "error", "behind", "intake_stopped", "late", "quiet", "ok"})
    EXPECT_THAT(text, HasSubstr("ductus_interface_state{" + adt + ",state=\"" + other + "\"} 0\n"))
        << other;
  EXPECT_THAT(text, HasSubstr("ductus_queue_oldest_seconds{" + lab + "} 1800\n"));
  EXPECT_THAT(text, HasSubstr("ductus_queue_oldest_seconds{" + adt + ",destination=\"copy\"} 0\n"));
  // lookup was not judged: no series rather than a made-up ok.
  EXPECT_THAT(text, Not(HasSubstr("ductus_interface_state{interface=\"lookup\"")));
}

class MetricsRouteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_.loop = api_.loop().loop();
    auto s = api_.start(allRoutes({.engine = &engine_}));
    ASSERT_TRUE(s) << s.error().message;
  }
  FakeEngine engine_;
  ApiHarness api_;
};

TEST_F(MetricsRouteTest, NeedsAToken) {
  auto r = api_.get("/api/v1/metrics");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(errorOf(r)["error"], "unauthenticated") << r.body;
  EXPECT_EQ(api_.get("/api/v1/metrics", bearer("wrong")).status, 401);
}

TEST_F(MetricsRouteTest, AViewerGetsTheTextFormatWithTheQueueCountedAtEachScrape) {
  auto r = api_.get("/api/v1/metrics", bearer("viewer"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_THAT(r.body, HasSubstr("ductus_queue_pending{interface=\"adt \\\"main\\\"\","
                                "destination=\"lab\"} 41\n"));
  EXPECT_THAT(r.body, HasSubstr("ductus_draining 0\n"));
  auto again = api_.get("/api/v1/metrics", bearer("operator"));
  ASSERT_EQ(again.status, 200);
  EXPECT_THAT(again.body, HasSubstr("destination=\"lab\"} 42\n"));
}

TEST(MetricsRequestTimes, EveryAnswerOfTheApiIsTimedOnceAndShown) {
  FakeEngine engine;
  ApiHarness api;
  Histogram times;
  engine.loop = api.loop().loop();
  ASSERT_TRUE(api.start(allRoutes({.engine = &engine, .requestTimes = &times}), &times));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(api.get("/api/v1/health").status, 200);
  EXPECT_EQ(api.get("/api/v1/nothing-here").status, 404);
  EXPECT_EQ(api.get("/api/v1/metrics").status, 401) << "refusals are answers too";
  auto r = api.get("/api/v1/metrics", bearer("viewer"));
  ASSERT_EQ(r.status, 200);
  // The scrape itself is timed after its text was written.
  EXPECT_THAT(r.body, HasSubstr("# TYPE ductus_http_request_seconds histogram\n"));
  EXPECT_THAT(r.body, HasSubstr("ductus_http_request_seconds_count 5\n"));
  EXPECT_THAT(r.body, HasSubstr("ductus_http_request_seconds_bucket{le=\"+Inf\"} 5\n"));
  EXPECT_EQ(times.snapshot().count, 6);

  // Without the histogram the family is left out, not shown empty.
  FakeEngine other;
  ApiHarness plain;
  other.loop = plain.loop().loop();
  ASSERT_TRUE(plain.start(allRoutes({.engine = &other})));
  auto p = plain.get("/api/v1/metrics", bearer("viewer"));
  EXPECT_THAT(p.body, Not(HasSubstr("ductus_http_request_seconds")));
}

// promtool check metrics: Debian's `prometheus` (scripts/install-deps.sh).
// Exit 0 and no lint; it can fail, as the broken copy shows.
ductus::test::ChildOutput promtool(const std::string& text) {
  char tmpl[] = "/tmp/ductus-metrics.XXXXXX";
  int fd = mkstemp(tmpl);
  close(fd);
  std::ofstream(tmpl) << text;
  auto out = ductus::test::runChild(
      {"/bin/sh", "-c", "exec promtool check metrics < \"$0\" 2>&1", tmpl});
  unlink(tmpl);
  return out;
}

TEST_F(MetricsRouteTest, PromtoolAcceptsTheAnswer) {
  ASSERT_EQ(ductus::test::runChild({"/bin/sh", "-c", "command -v promtool"}).exitStatus, 0)
      << "promtool is not installed: run scripts/install-deps.sh (Debian's prometheus)";
  auto r = api_.get("/api/v1/metrics", bearer("viewer"));
  ASSERT_EQ(r.status, 200) << r.body;
  auto good = promtool(r.body);
  EXPECT_TRUE(::ductus::test::exitedWith(good.exitStatus, 0)) << good.out;
  EXPECT_EQ(good.out, "") << r.body;

  // A counter named as no counter should be, and a sample of no family.
  auto bad = promtool(r.body + "# HELP ductus_oops counted\n# TYPE ductus_oops counter\n"
                               "ductus_oops 1\nductus_draining{x=\"\" 1\n");
  EXPECT_NE(::ductus::test::exitCode(bad.exitStatus), 0) << bad.out;
}

}  // namespace
}  // namespace ductus::api::test
