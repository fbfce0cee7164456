// Partition maintenance against a real cluster: what it creates, that it
// takes no lock with nothing to do, that it gives up rather than hold up
// inserts behind a long query, that it waits when tomorrow is missing, and
// that it never deadlocks with settling.
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/schema/store_fixture.h"
#include "tests/support/run_until.h"

namespace ductus::store::test {
namespace {

class Partitions : public StoreTest {
 protected:
  // today (UTC) + days, as YYYY-MM-DD.
  std::string day(int days) {
    return text("SELECT ((now() AT TIME ZONE 'UTC')::date + $1::int)::text",
                {std::to_string(days)});
  }
  int64_t leaves(const std::string& parent) {
    return scalar("SELECT count(*) FROM pg_inherits WHERE inhparent = $1::regclass", {parent});
  }
  bool runUntil(std::function<bool()> done, int timeoutMs) {
    return ductus::test::runUntil(&loop_, done, std::chrono::milliseconds(timeoutMs));
  }
  bool someoneWaitsOnALock() {
    return scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                  "AND wait_event_type = 'Lock'") > 0;
  }
};

TEST_F(Partitions, TodayAndThreeDaysAheadExistForEveryTierWithBoundsAtMidnightUtc) {
  for (std::string t : {"messages", "deliveries"}) {
    EXPECT_EQ(leaves(t + "_t7"), 4) << t;  // a day each: today .. today + 3
    EXPECT_GE(leaves(t + "_t21"), 1) << t;
    EXPECT_LE(leaves(t + "_t21"), 2) << t;  // a week each
    EXPECT_EQ(leaves(t + "_t49"), leaves(t + "_t21")) << t;
  }
  std::string today = day(0);
  std::string name = "messages_t7_" + today.substr(0, 4) + today.substr(5, 2) + today.substr(8, 2);
  EXPECT_EQ(text("SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname = $1", {name}),
            "FOR VALUES FROM ('" + today + " 00:00:00+00') TO ('" + day(1) + " 00:00:00+00')");
  // The weekly tiers start on a Monday.
  EXPECT_EQ(scalar("SELECT count(*) FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid "
                   "WHERE i.inhparent = 'messages_t21'::regclass AND extract(isodow FROM "
                   "to_date(right(c.relname, 8), 'YYYYMMDD')) <> 1"),
            0);
}

TEST_F(Partitions, WithNothingToCreateMaintenanceTakesNoLockAtAll) {
  // A "report" holds every lock a partition DDL would need.
  Sql report(db_->conninfo());
  ASSERT_TRUE(report("BEGIN").ok());
  ASSERT_TRUE(report("LOCK TABLE messages, deliveries IN ACCESS EXCLUSIVE MODE").ok());
  auto r = run<PartitionReport>([&](auto cb) { store_->ensurePartitions({}, cb); });
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->created, 0);
  EXPECT_EQ(r->blocked, 0);
  EXPECT_TRUE(r->errors.empty());
  ASSERT_TRUE(report("COMMIT").ok());
}

TEST_F(Partitions, PartitionMaintenanceNeverHoldsUpInsertsBehindALongQuery) {
  // A long query reads the 1w tier and keeps its transaction open.
  Sql report(db_->conninfo());
  ASSERT_TRUE(report("BEGIN").ok());
  ASSERT_TRUE(report("SELECT count(*) FROM messages WHERE tier = 7").ok());
  // Maintenance two days on: tomorrow (relative) exists, so it waits at
  // most its lock_timeout for messages_t7.
  PartitionOptions o;
  o.firstDay = day(2);
  o.waitMs = 1500;
  std::optional<Result<PartitionReport>> maintained;
  store_->ensurePartitions(o, [&](Result<PartitionReport> r) { maintained = std::move(r); });
  ASSERT_TRUE(runUntil([&] { return someoneWaitsOnALock(); }, 5000));
  // An insert now queues behind the DDL's lock request...
  std::optional<Result<StoredMessage>> stored;
  store_->insert(message("during the report", {destA_}),
                 [&](Result<StoredMessage> r) { stored = std::move(r); });
  // ...and goes through once maintenance gives up, while the report is
  // still running (without the lock_timeout it would wait for the report).
  ASSERT_TRUE(runUntil([&] { return stored.has_value(); }, 15000))
      << "the insert waited behind partition maintenance for the whole long query";
  ASSERT_TRUE(stored->ok()) << stored->error().message;
  ASSERT_TRUE(runUntil([&] { return maintained.has_value(); }, 15000));
  ASSERT_TRUE(maintained->ok());
  EXPECT_GE((*maintained)->blocked, 1);
  EXPECT_TRUE((*maintained)->errors.empty());
  ASSERT_TRUE(report("COMMIT").ok());
  // The next hourly run creates what was skipped.
  auto again = run<PartitionReport>([&](auto cb) { store_->ensurePartitions(o, cb); });
  ASSERT_TRUE(again.ok());
  EXPECT_GE(again->created, 1);
  EXPECT_EQ(again->blocked, 0);
}

TEST_F(Partitions, PartitionMaintenanceWaitsWhenTheDayIsClose) {
  Sql report(db_->conninfo());
  ASSERT_TRUE(report("BEGIN").ok());
  ASSERT_TRUE(report("SELECT count(*) FROM messages WHERE tier = 7").ok());
  // As if every try of the last days was blocked: "today" is the last day
  // that has a partition, tomorrow has none.
  PartitionOptions o;
  o.firstDay = day(3);
  o.waitMs = 300;
  std::optional<Result<PartitionReport>> maintained;
  store_->ensurePartitions(o, [&](Result<PartitionReport> r) { maintained = std::move(r); });
  // Well past its lock_timeout it is still waiting, not giving up.
  runUntil([] { return false; }, 1500);
  EXPECT_FALSE(maintained.has_value());
  ASSERT_TRUE(report("COMMIT").ok());
  ASSERT_TRUE(runUntil([&] { return maintained.has_value(); }, 15000));
  ASSERT_TRUE(maintained->ok());
  EXPECT_TRUE((*maintained)->waited);
  EXPECT_EQ((*maintained)->blocked, 0);
  EXPECT_GE((*maintained)->created, 1);
  EXPECT_EQ(leaves("messages_t7"), 7);  // today .. today + 6
}

TEST_F(Partitions, PartitionMaintenanceNeverDeadlocksWithSettling) {
  // Settling (locks messages, reads deliveries, updates messages) runs
  // continuously while maintenance creates new partitions of every table.
  std::vector<MessageRef> refs;
  for (int i = 0; i < 60; ++i) {
    auto m = insert(message("m", {destA_, destB_}));
    ASSERT_TRUE(m.ok());
    refs.push_back(m->ref);
  }
  int rounds = 0, settles = 0, failures = 0;
  bool maintaining = true;
  std::function<void(int)> maintain = [&](int from) {
    PartitionOptions o;
    o.firstDay = day(from);
    o.daysAhead = 2;
    store_->ensurePartitions(o, [&, from](Result<PartitionReport> r) {
      if (!r || !r->errors.empty() || r->blocked) ++failures;
      if (++rounds < 6) return maintain(from + 3);
      maintaining = false;
    });
  };
  std::function<void(size_t)> settleLoop = [&](size_t i) {
    if (!maintaining) return;
    std::vector<DeliveryOutcome> o;
    std::vector<MessageRef> chunk;
    for (size_t k = 0; k < 10; ++k) {
      const auto& ref = refs[(i + k) % refs.size()];
      chunk.push_back(ref);
      DeliveryOutcome d;
      d.message = ref;
      d.status = MessageStatus::Pending;  // an attempt: keeps them pending
      o.push_back(d);
    }
    int64_t dest = i % 2 ? destA_ : destB_;
    store_->flushStatuses(dest, o, [&, chunk, i](Result<std::vector<int64_t>> r) {
      if (!r) ++failures;
      store_->settle(chunk, [&, i](Result<int64_t> r) {
        if (!r) ++failures;
        ++settles;
        settleLoop(i + 7);
      });
    });
  };
  maintain(4);
  for (size_t s = 0; s < 4; ++s) settleLoop(s * 13);
  ASSERT_TRUE(runUntil([&] { return !maintaining; }, 60000));
  runUntil([] { return false; }, 200);  // let the settle chains stop
  EXPECT_EQ(failures, 0);
  EXPECT_GT(settles, 4);
  EXPECT_EQ(store_->stats().deadlockRetries, 0);
}

}  // namespace
}  // namespace ductus::store::test
