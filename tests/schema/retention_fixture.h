// RetentionTest: a StoreTest with a Retention on the store's loop (short
// lock waits, dedupe keys in batches of 3) and the helpers the retention
// tests share: partitions from some days back, old messages stored
// straight in their partitions, the check that no message is split from
// its deliveries. Used by retention_test.cpp and retention_stress_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "schema/retention.h"
#include "tests/schema/store_fixture.h"
#include "tests/support/run_until.h"

namespace ductus::store::test {

class RetentionTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (HasFatalFailure()) return;
    RetentionOptions o;
    o.conninfo = db_->conninfo();
    o.lockTimeout = std::chrono::milliseconds(200);
    o.attempts = 2;
    o.retryDelay = std::chrono::milliseconds(100);
    o.dedupeBatch = 3;  // several batches in the tests
    retention_ = std::make_unique<Retention>(&loop_, o);
  }
  void TearDown() override {
    retention_.reset();
    StoreTest::TearDown();
  }
  std::string day(int days) {
    return text("SELECT ((now() AT TIME ZONE 'UTC')::date + $1::int)::text",
                {std::to_string(days)});
  }
  static std::string compact(const std::string& d) {
    return d.substr(0, 4) + d.substr(5, 2) + d.substr(8, 2);
  }
  bool exists(const std::string& table) {
    return text("SELECT to_regclass($1) IS NOT NULL", {table}) == "t";
  }
  // The engine's own partition function, from `daysBack` days ago on.
  void partitionsFrom(int daysBack, int daysAhead) {
    PartitionOptions o;
    o.firstDay = day(-daysBack);
    o.daysAhead = daysAhead;
    auto r = run<PartitionReport>([&](auto cb) { store_->ensurePartitions(o, cb); });
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_TRUE(r->errors.empty());
  }
  // n finished (or pending) messages of tier `tier`, received `daysBack`
  // days ago, each with a delivery to destA_ in the same status.
  void storeOld(int tier, int daysBack, int n, int status) {
    storeOldFor(iface_, destA_, tier, daysBack, n, status);
  }
  void storeOldFor(int64_t iface, int64_t dest, int tier, int daysBack, int n, int status) {
    auto r = (*sql_)(
        "WITH m AS (INSERT INTO messages (tier, received_at, interface_id, payload, status) "
        "SELECT $1::int2, now() - $2::int * interval '1 day', $3, 'old', $5::int2 "
        "FROM generate_series(1, $4::int) RETURNING id, tier, received_at) "
        "INSERT INTO deliveries (message_id, destination_id, tier, received_at, status) "
        "SELECT id, $6, tier, received_at, $5::int2 FROM m",
        {std::to_string(tier), std::to_string(daysBack), std::to_string(iface), std::to_string(n),
         std::to_string(status), std::to_string(dest)});
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  // A message is never in one tier and a delivery of it in another.
  int64_t split() {
    return scalar(
        "SELECT count(*) FROM messages m JOIN deliveries d ON d.message_id = m.id "
        "WHERE d.tier <> m.tier OR d.received_at <> m.received_at");
  }
  HeldCounts held() {
    auto h = run<HeldCounts>([&](auto cb) { retention_->countHeld(cb); });
    EXPECT_TRUE(h.ok()) << h.error().message;
    return h ? *h : HeldCounts{};
  }
  Result<DropReport> drop() {
    return run<DropReport>([&](auto cb) { retention_->dropExpired(cb); });
  }
  bool runUntil(std::function<bool()> done, int timeoutMs) {
    return ductus::test::runUntil(&loop_, done, std::chrono::milliseconds(timeoutMs));
  }

  std::unique_ptr<Retention> retention_;
};

}  // namespace ductus::store::test
