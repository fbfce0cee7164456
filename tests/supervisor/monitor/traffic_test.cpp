// Traffic per minute for the charts (migration 0016, schema/traffic_store.h,
// supervisor/monitor/traffic_rollup.h), against a real cluster: any number
// of rows added in one statement, a minute written twice adding up, steps of
// an hour summed, the purge of rows past 30 days; and the rollup turning
// in-memory counts into a minute's row, at its turn and at the stop.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "api/auth/handler_support.h"
#include "schema/traffic_store.h"
#include "supervisor/delivery/activity.h"
#include "supervisor/monitor/traffic_rollup.h"
#include "tests/schema/store_fixture.h"

namespace ductus::store::test {
namespace {

// 2026-01-01T00:00:00Z, and minutes after it.
constexpr int64_t kNewYear = 1767225600;
int64_t minute(int64_t n) { return kNewYear + 60 * n; }

class Traffic : public StoreTest {
 protected:
  PgPool& pool() { return store_->sharedConnections(); }
  Status add(const std::vector<TrafficRow>& rows) {
    auto r = run<bool>([&](auto cb) {
      addTraffic(pool(), rows, [cb](Status s) {
        if (!s) return cb(s.error());
        cb(true);
      });
    });
    if (!r) return r.error();
    return {};
  }
  TrafficSeries read(int64_t from, int64_t to, int64_t step) {
    std::string name = text("SELECT name FROM interfaces WHERE id = $1", {std::to_string(iface_)});
    auto r = run<TrafficSeries>([&](auto cb) { readTraffic(pool(), name, from, to, step, cb); });
    EXPECT_TRUE(r.ok()) << (r ? "" : r.error().message);
    return r ? *r : TrafficSeries{};
  }
};

TEST_F(Traffic, RowsAreAddedInOneStatementAndAMinuteWrittenTwiceAddsUp) {
  ASSERT_TRUE((*sql_)("CREATE TABLE stmt_count (n int NOT NULL)").ok());
  ASSERT_TRUE((*sql_)("CREATE FUNCTION count_stmt() RETURNS trigger LANGUAGE plpgsql AS "
                      "$$BEGIN INSERT INTO stmt_count VALUES (1); RETURN NULL; END$$")
                  .ok());
  ASSERT_TRUE((*sql_)("CREATE TRIGGER count_stmt AFTER INSERT ON traffic_minutes "
                      "FOR EACH STATEMENT EXECUTE FUNCTION count_stmt()")
                  .ok());
  std::vector<TrafficRow> rows;
  for (int m = 0; m < 500; ++m) rows.push_back({iface_, 0, minute(m), 3, 0, 0, 0});
  rows.push_back({iface_, destA_, minute(0), 0, 2, 1, 0});
  ASSERT_TRUE(add(rows).ok());
  EXPECT_EQ(scalar("SELECT count(*) FROM stmt_count"), 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM traffic_minutes"), 501);
  // Another engine, or the stop's flush and the next start, in one minute.
  ASSERT_TRUE(add({{iface_, destA_, minute(0), 0, 5, 0, 1}}).ok());
  EXPECT_EQ(text("SELECT sent || ' ' || filtered || ' ' || quarantined FROM traffic_minutes "
                 "WHERE destination_id = $1",
                 {std::to_string(destA_)}),
            "7 1 1");
  // An interface the database doesn't have is left out, not a failed write.
  ASSERT_TRUE(add({{999999, 0, minute(1), 1, 0, 0, 0}, {iface_, 0, minute(1), 1, 0, 0, 0}}).ok());
  EXPECT_EQ(scalar("SELECT received FROM traffic_minutes WHERE destination_id = 0 AND minute = "
                   "to_timestamp($1)",
                   {std::to_string(minute(1))}),
            4);
}

TEST_F(Traffic, StepsOfAnHourSumTheirMinutesAndEveryDestinationIsNamed) {
  ASSERT_TRUE(add({{iface_, 0, minute(0), 10, 0, 0, 0},
                   {iface_, 0, minute(59), 5, 0, 0, 0},
                   {iface_, 0, minute(60), 7, 0, 0, 0},
                   {iface_, destA_, minute(30), 0, 4, 2, 1}})
                  .ok());
  auto hours = read(kNewYear, kNewYear + 3 * 3600, 3600);
  ASSERT_TRUE(hours.interfaceFound);
  EXPECT_GE(hours.destinations.size(), 2u);  // B and C too, though quiet
  ASSERT_EQ(hours.points.size(), 3u);
  EXPECT_EQ(hours.points[0].at, kNewYear);
  EXPECT_EQ(hours.points[0].destination, "");
  EXPECT_EQ(hours.points[0].received, 15);
  EXPECT_EQ(hours.points[1].sent, 4);
  EXPECT_EQ(hours.points[1].quarantined, 1);
  EXPECT_EQ(hours.points[2].at, kNewYear + 3600);
  EXPECT_EQ(hours.points[2].received, 7);
  // [from, to): the minute at `to` is not in it.
  auto minutes = read(minute(0), minute(59), 60);
  ASSERT_EQ(minutes.points.size(), 2u);
  auto none = run<TrafficSeries>([&](auto cb) { readTraffic(pool(), "nobody", 0, 60, 60, cb); });
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->interfaceFound);
}

TEST_F(Traffic, ThePurgeDeletesRowsPastTheirKeepABatchAtATime) {
  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  int64_t old = (now - 31 * 86400) / 60 * 60, fresh = now / 60 * 60;
  std::vector<TrafficRow> rows;
  for (int m = 0; m < 5; ++m) rows.push_back({iface_, 0, old + 60 * m, 1, 0, 0, 0});
  rows.push_back({iface_, 0, fresh, 1, 0, 0, 0});
  ASSERT_TRUE(add(rows).ok());
  auto n = run<int64_t>([&](auto cb) { purgeTraffic(pool(), kTrafficKeep, 3, cb); });
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 3);
  n = run<int64_t>([&](auto cb) { purgeTraffic(pool(), kTrafficKeep, 3, cb); });
  EXPECT_EQ(*n, 2);
  EXPECT_EQ(scalar("SELECT count(*) FROM traffic_minutes"), 1);
}

// The rollup on a one-second turn: what was counted between two turns is
// one row of the second that just ended; the stop writes the rest.
TEST_F(Traffic, TheRollupWritesEachTurnsCountsAndTheStopWritesTheRest) {
  delivery::InterfaceActivity activity("orders");
  auto& a = activity.addDestination("a", false, destA_);
  supervisor::TrafficRollup rollup(&loop_, pool(), {{iface_, &activity, {destA_}}},
                                   std::chrono::seconds(1));
  activity.received = 100;  // before the start: not this run's
  rollup.start();
  activity.received += 4;
  a.sent += 3;
  a.quarantined += 1;
  // Before the turn: the API shows them as the minute in progress.
  auto unsaved = rollup.unsaved(iface_);
  ASSERT_EQ(unsaved.size(), 2u);
  EXPECT_EQ(unsaved[0].received, 4);
  EXPECT_EQ(unsaved[1].destinationId, destA_);
  EXPECT_EQ(unsaved[1].sent, 3);
  EXPECT_TRUE(rollup.unsaved(iface_ + 1000).empty());
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (rollup.writes() == 0 && std::chrono::steady_clock::now() < until)
    uv_run(&loop_, UV_RUN_ONCE);
  ASSERT_EQ(rollup.writes(), 1u);
  EXPECT_EQ(scalar("SELECT sum(received) FROM traffic_minutes WHERE destination_id = 0"), 4);
  EXPECT_EQ(scalar("SELECT sum(sent) + 10 * sum(quarantined) FROM traffic_minutes WHERE "
                   "destination_id = $1",
                   {std::to_string(destA_)}),
            13);
  activity.received += 2;
  a.filtered += 5;
  bool flushed = false;
  rollup.flushNow([&] { flushed = true; });
  while (!flushed) uv_run(&loop_, UV_RUN_ONCE);
  EXPECT_EQ(scalar("SELECT sum(received) FROM traffic_minutes WHERE destination_id = 0"), 6);
  EXPECT_EQ(scalar("SELECT sum(filtered) FROM traffic_minutes"), 5);
}

TEST(Rfc3339Seconds, ReadsTheOffsetAndDropsTheFraction) {
  EXPECT_EQ(api::rfc3339Seconds("2026-01-01T00:00:00Z"), kNewYear);
  EXPECT_EQ(api::rfc3339Seconds("2026-01-01T01:30:00.999+01:30"), kNewYear);
  EXPECT_EQ(api::rfc3339Seconds("2025-12-31T19:00:00-05:00"), kNewYear);
  EXPECT_FALSE(api::rfc3339Seconds("yesterday"));
  EXPECT_FALSE(api::rfc3339Seconds("2026-02-30T00:00:00Z"));
  EXPECT_TRUE(api::isRfc3339("2026-01-01T00:00:00+23:59"));
  EXPECT_FALSE(api::isRfc3339("2026-01-01T00:00:00+24:00"));
}

}  // namespace
}  // namespace ductus::store::test
