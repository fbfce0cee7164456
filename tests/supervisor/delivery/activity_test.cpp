// The activity counts and the summary the engine logs each minute from
// them: a line per interface where something happened, none where nothing
// did, and the reporter on a loop's timer saying only what changed.
#include "supervisor/delivery/activity.h"

#include <gtest/gtest.h>

#include <chrono>

#include "tests/support/log_capture.h"
#include "tests/support/run_until.h"

namespace ductus::delivery {
namespace {

using namespace std::chrono_literals;

TEST(Activity, ASnapshotCopiesEveryCountInTheOrderTheyWereAdded) {
  ActivityCounters counters;
  auto& adt = counters.addInterface("adt");
  auto& lab = adt.addDestination("lab");
  auto& copy = adt.addDestination("copy", true);
  auto& orders = counters.addInterface("orders");
  count(adt.received, 5);
  count(adt.duplicates);
  count(lab.sent, 3);
  count(lab.filtered);
  count(lab.retries, 2);
  count(copy.routed, 4);
  auto s = counters.snapshot();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "adt");
  EXPECT_EQ(s[0].received, 5);
  EXPECT_EQ(s[0].duplicates, 1);
  ASSERT_EQ(s[0].destinations.size(), 2u);
  EXPECT_EQ(s[0].destinations[0].sent, 3);
  EXPECT_EQ(s[0].destinations[0].filtered, 1);
  EXPECT_EQ(s[0].destinations[0].retries, 2);
  EXPECT_TRUE(s[0].destinations[1].route);
  EXPECT_EQ(s[0].destinations[1].routed, 4);
  EXPECT_EQ(s[1].name, "orders");
  EXPECT_TRUE(s[1].destinations.empty());
  (void)orders;
}

TEST(Activity, TheSummarySaysWhatChangedPerInterfaceAndNothingForTheQuietOnes) {
  ActivityCounters counters;
  auto& adt = counters.addInterface("adt");
  auto& out = adt.addDestination("out");
  auto& quiet = counters.addInterface("quiet");
  quiet.addDestination("nowhere");
  count(adt.received, 2);
  count(out.sent, 2);
  auto before = counters.snapshot();
  EXPECT_TRUE(summarize(before, before, "minute").empty());

  count(adt.received, 4);
  count(adt.duplicates);
  count(out.sent, 2);
  count(out.filtered);
  count(out.quarantined);
  auto lines = summarize(before, counters.snapshot(), "minute");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].text,
            "adt in the last minute: 4 received (1 duplicate), 2 sent, 1 filtered, 1 quarantined");
  EXPECT_EQ(lines[0].change.received, 4);
  EXPECT_EQ(lines[0].change.destinations[0].sent, 2);

  // From the start: everything counted so far.
  auto all = summarize({}, counters.snapshot(), "minute");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].change.received, 6);
}

TEST(Activity, SeveralDestinationsAreEachSaidAndARouteSaysRouted) {
  ActivityCounters counters;
  auto& adt = counters.addInterface("adt");
  auto& lab = adt.addDestination("lab");
  auto& copy = adt.addDestination("copy", true);
  count(adt.received, 3);
  count(lab.sent, 2);
  count(lab.retries, 5);
  count(copy.routed, 3);
  auto lines = summarize({}, counters.snapshot(), "5s");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].text,
            "adt in the last 5s: 3 received; lab: 2 sent, 0 filtered, 0 quarantined, 5 retried; "
            "copy: 3 routed, 0 filtered, 0 quarantined");
}

TEST(Activity, TheReporterLogsOnItsTimerOnlyWhenSomethingChanged) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    test::LogCapture logs(spdlog::level::info);
    ActivityCounters counters;
    auto& adt = counters.addInterface("adt");
    auto& out = adt.addDestination("out");
    count(adt.received, 7);  // before the reporter: not in its first line
    ActivityReporter reporter(&loop, counters, 5ms);
    count(adt.received);
    count(out.sent);
    ASSERT_TRUE(test::runUntil(&loop, [&] { return logs.count("adt in the last 5ms") == 1; }));
    EXPECT_EQ(logs.count("adt in the last 5ms: 1 received, 1 sent, 0 filtered, 0 quarantined"),
              1u)
        << logs.all();
    // Quiet: no line, however many ticks pass.
    test::runUntil(&loop, [] { return false; }, 60ms);
    EXPECT_EQ(logs.count("adt in the last"), 1u) << logs.all();
    count(out.filtered);
    ASSERT_TRUE(test::runUntil(&loop, [&] { return logs.count("adt in the last") == 2; }))
        << logs.all();
    EXPECT_EQ(logs.count("0 received, 0 sent, 1 filtered"), 1u) << logs.all();
  }
  uv_run(&loop, UV_RUN_NOWAIT);  // the reporter's timer closes
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

TEST(Activity, TheReporterSaysHowManyWaitAndAQueueThatDoesNotMoveIsSaidEveryTime) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    test::LogCapture logs(spdlog::level::info);
    ActivityCounters counters;
    auto& adt = counters.addInterface("adt");
    adt.addDestination("lab", false, 41);
    auto& quiet = counters.addInterface("quiet");
    quiet.addDestination("nowhere", false, 42);
    std::optional<std::map<int64_t, int64_t>> answer = std::map<int64_t, int64_t>{{41, 120}};
    int asked = 0;
    ActivityReporter reporter(&loop, counters, 5ms, [&](auto reply) {
      ++asked;
      reply(answer);
    });
    // Nothing sent, 120 waiting: said at every report.
    ASSERT_TRUE(test::runUntil(&loop, [&] { return logs.count("adt in the last 5ms") >= 2; }));
    EXPECT_GE(logs.count("adt in the last 5ms: 0 received, 0 sent, 0 filtered, 0 quarantined, "
                         "120 waiting"),
              2u)
        << logs.all();
    EXPECT_EQ(logs.count("quiet in the last"), 0u) << logs.all();  // nothing waits there
    // The store could not say: no count, and a quiet queue is quiet again.
    answer.reset();
    int before = asked;
    ASSERT_TRUE(test::runUntil(&loop, [&] { return asked >= before + 2; }));
    size_t lines = logs.count("adt in the last");
    test::runUntil(&loop, [] { return false; }, 30ms);
    EXPECT_EQ(logs.count("adt in the last"), lines) << logs.all();
    EXPECT_EQ(logs.count("waiting"), logs.count("120 waiting")) << logs.all();
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

TEST(Histogram, CountsEachObservationInTheFirstBucketItFitsAndSumsMicroseconds) {
  Histogram h;
  h.observe(0us);            // <= 0.5 ms
  h.observe(500us);          // on a bound: that bucket (le is "at most")
  h.observe(501us);          // <= 1 ms
  h.observe(3ms);            // <= 5 ms
  h.observe(30min);          // <= 1 h
  h.observe(3601s);          // +Inf
  h.observe(-5ms);           // a clock that stepped back: the first bucket, nothing summed
  auto c = h.snapshot();
  ASSERT_EQ(c.buckets.size(), kHistogramBoundsUs.size() + 1);
  EXPECT_EQ(c.buckets[0], 3);
  EXPECT_EQ(c.buckets[1], 1);
  EXPECT_EQ(c.buckets[3], 1);
  EXPECT_EQ(c.buckets[16], 1);
  EXPECT_EQ(c.buckets[17], 1);
  EXPECT_EQ(c.count, 7);
  EXPECT_EQ(c.sumUs, 500 + 501 + 3'000 + 1'800'000'000LL + 3'601'000'000LL);
}

TEST(Histogram, TheDestinationsTimingsStartEmpty) {
  ActivityCounters counters;
  auto& d = counters.addInterface("adt").addDestination("lab");
  d.latency.observe(2ms);
  EXPECT_EQ(d.latency.snapshot().count, 1);
  EXPECT_EQ(d.sendTime.snapshot().count, 0);
  EXPECT_EQ(d.transform.snapshot().sumUs, 0);
}

// Two engines, or a time loaded from the store after a newer mark, must
// not move a last-activity time back.
TEST(Moment, NeverMovesBack) {
  Moment m;
  EXPECT_EQ(m.ms(), 0);
  m.mark(2'000);
  m.mark(1'000);
  EXPECT_EQ(m.ms(), 2'000);
  m.mark(3'000);
  EXPECT_EQ(m.ms(), 3'000);
  DestinationActivity d("lab", false);
  d.markError(5'000, "refused");
  d.markError(4'000, "older");
  EXPECT_EQ(d.lastError.ms(), 5'000);
  EXPECT_EQ(d.lastErrorText(), "refused");
}

}  // namespace
}  // namespace ductus::delivery
