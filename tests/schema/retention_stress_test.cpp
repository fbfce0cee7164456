// Retention's move to the held area while a destination's queue drains
// (schema/retention.h; the statements that also match tier 0,
// schema/store_sql.h). 3,000 pending messages of an expired 1w day, every
// one to destA_ in lanes 0..7 and every third also to destB_ (never
// drained: those stay unfinished and are held). Two delivery loops of
// destA_ (lanes 0..3 and 4..7) read, send, flush with the keys they read
// (tier 1w) and settle, while retention runs one dropExpired after another
// moving 50 messages a batch, and another session keeps locking a few of
// destB_'s rows for 10 ms at a time (the move skips them until a later
// run). A loop waits between its read and its flush for the move to take
// a row it read (a slow receiver), so some flushes carry 1w keys of rows
// that are in the held area by then.
//
// Nothing may be lost, sent twice or out of order in a lane, and no
// message may be split from its deliveries: every flush changes every row
// it carries, each message is sent and answered exactly once, each lane is
// sent in id order, every message and delivery is either still there or
// was counted in a dropped period (and was finished), and the 1w day goes
// once the loops are done. Without the held tier in the flush
// (`d.tier IN (u.tier, 0)`), a flush with keys read before the move matches
// nothing and the loop reads and sends those messages again after newer
// ones of their lanes.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/uv_handle.h"
#include "schema/pg_error.h"
#include "tests/schema/retention_fixture.h"

namespace ductus::store::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kMessages = 3000;
constexpr int kLanes = 8;
constexpr int kEveryB = 3;  // every third message also goes to destB_

std::string idArray(const std::vector<int64_t>& ids) {
  std::string out = "{";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "}";
}

// A one-shot timer on a loop. Closed with its owner; a callback left
// scheduled then never runs.
class Later {
 public:
  explicit Later(uv_loop_t* loop) : timer_(makeTimer(loop, this)) {}
  Later(const Later&) = delete;
  Later& operator=(const Later&) = delete;
  void after(std::chrono::milliseconds delay, std::function<void()> fn) {
    fn_ = std::move(fn);
    uv_timer_start(
        timer_.get(),
        [](uv_timer_t* t) {
          auto* self = static_cast<Later*>(t->data);
          if (!self) return;
          auto fn = std::move(self->fn_);
          self->fn_ = nullptr;
          if (fn) fn();
        },
        static_cast<uint64_t>(delay.count()), 0);
  }

 private:
  UvHandle<uv_timer_t> timer_;
  std::function<void()> fn_;
};

// What the delivery loops did, for the checks at the end.
struct Tally {
  std::map<int64_t, int> sent;                    // times each message was read and sent
  std::map<int64_t, int> answered;                // times a flush answered it as changed
  std::map<int32_t, std::vector<int64_t>> lanes;  // ids sent per lane, in order
  int64_t notChanged = 0;                         // rows a flush carried and did not change
  int64_t stale = 0;  // rows flushed with 1w keys that were held by then
  int reads = 0, flushes = 0, settles = 0;
  std::vector<std::string> errors;
};

// A delivery loop of one destination as the engine runs one
// (supervisor/delivery/delivery_loop.cpp): reads the first 50 pending
// deliveries of its lanes, sends them, flushes them as sent with the keys
// it read, settles them without waiting and reads again; done when a read
// finds nothing and its settles have answered. Between a read and its
// flush it waits (a slow receiver) for the move to take one of the rows it
// read with 1w keys, so it keeps pace with the move and flushes at its
// front: up to 5 s until that has happened once (so it surely does), then
// at most 1 s a read (a row the move skipped waits for the next run).
class Drainer {
 public:
  Drainer(uv_loop_t* loop, Store& store, Sql& sql, int64_t destination, std::vector<int32_t> lanes,
          Tally& tally)
      : store_(store),
        sql_(sql),
        destination_(destination),
        lanes_(std::move(lanes)),
        tally_(tally),
        later_(loop) {}
  void start() { read(); }
  bool done() const { return finished_ && settling_ == 0; }

 private:
  using Rows = std::shared_ptr<std::vector<QueuedDelivery>>;

  void fail(const std::string& what, const Error& e) {
    tally_.errors.push_back(what + ": " + e.message + " (" + e.sqlstate + ")");
    finished_ = true;
  }

  void read() {
    store_.readQueue(destination_, lanes_, 0, [this](Result<QueueRead> r) {
      if (!r) return fail("read", r.error());
      ++tally_.reads;
      if (r->rows.empty()) {
        finished_ = true;
        return;
      }
      auto rows = std::make_shared<std::vector<QueuedDelivery>>(std::move(r->rows));
      for (auto& q : *rows) {
        ++tally_.sent[q.message.id];
        tally_.lanes[q.partitionKey].push_back(q.message.id);
      }
      awaitMove(rows, Clock::now() + (tally_.stale == 0 ? 5000ms : 1000ms), false);
    });
  }

  // Polls every 2 ms until a row read with 1w keys is held (or `until`),
  // then lingers 0..11 ms more (a fixed sequence) so that some flushes run
  // into the move's next batch; then flushes.
  void awaitMove(Rows rows, Clock::time_point until, bool lingered) {
    std::vector<int64_t> old;  // read with 1w keys
    for (auto& q : *rows)
      if (q.message.tier == Tier::Week1) old.push_back(q.message.id);
    int64_t held = 0;
    if (!old.empty()) {
      auto r = sql_(
          "SELECT count(*) FROM deliveries WHERE destination_id = $1 AND tier = 0 "
          "AND message_id = ANY ($2::int8[])",
          {std::to_string(destination_), idArray(old)});
      if (!r) return fail("counting held rows", r.error());
      held = r->integer(0, 0);
      if (held == 0 && Clock::now() < until)
        return later_.after(2ms, [this, rows, until] { awaitMove(rows, until, false); });
      if (held > 0 && !lingered)
        return later_.after(std::chrono::milliseconds(rng_() % 12),
                            [this, rows, until] { awaitMove(rows, until, true); });
    }
    // Held rows never go back: the flush below must find these in tier 0.
    tally_.stale += held;
    flush(rows);
  }

  void flush(Rows rows) {
    std::vector<DeliveryOutcome> outcomes;
    for (auto& q : *rows) outcomes.push_back({q.message, MessageStatus::Sent, {}, {}});
    store_.flushStatuses(
        destination_, std::move(outcomes),
        [this, rows](Result<std::vector<int64_t>> r) {
          if (!r) return fail("flush", r.error());
          ++tally_.flushes;
          for (int64_t id : *r) ++tally_.answered[id];
          tally_.notChanged += static_cast<int64_t>(rows->size() - r->size());
          // With the keys read, as the loop has them.
          std::vector<MessageRef> refs;
          for (auto& q : *rows) refs.push_back(q.message);
          ++settling_;
          store_.settle(std::move(refs), [this](Result<int64_t> s) {
            --settling_;
            ++tally_.settles;
            if (!s) tally_.errors.push_back("settle: " + s.error().message);
          });
          read();
        },
        Store::Settle::Separately);
  }

  Store& store_;
  Sql& sql_;
  int64_t destination_;
  std::vector<int32_t> lanes_;
  Tally& tally_;
  Later later_;
  std::minstd_rand rng_{static_cast<std::minstd_rand::result_type>(lanes_.front() + 1)};
  bool finished_ = false;
  int settling_ = 0;
};

class RetentionStressTest : public RetentionTest {
 protected:
  void SetUp() override {
    poolSize_ = 6;  // two loops' reads, flushes and settles at once
    RetentionTest::SetUp();
    if (HasFatalFailure()) return;
    RetentionOptions o;
    o.conninfo = db_->conninfo();
    // Waits generous enough for a loaded machine: a failed DDL is a
    // failure here.
    o.lockTimeout = 2000ms;
    o.attempts = 5;
    o.retryDelay = 50ms;
    o.moveBatch = 50;  // 60 batches and more under the loops
    retention_ = std::make_unique<Retention>(&loop_, o);
  }
};

TEST_F(RetentionStressTest, MovingToTheHeldAreaWhileAQueueDrainsLosesNothingAndKeepsLaneOrder) {
  const auto began = Clock::now();
  partitionsFrom(10, 0);
  const std::string d10 = compact(day(-10));
  // The held month made beforehand: made under the loops and the other
  // session, its CREATE would wait for their locks on the parents.
  for (const char* t : {"messages", "deliveries"})
    ASSERT_EQ(text("SELECT ductus_ensure_held_partition($1, $2::date, 2000)", {t, day(-10)}), "t");
  auto seeded = (*sql_)(
      "WITH m AS (INSERT INTO messages (tier, received_at, interface_id, partition_key, payload) "
      "SELECT 7, now() - interval '10 days', $1::int8, g % $3::int, convert_to('m' || g, 'UTF8') "
      "FROM generate_series(1, $2::int) g ORDER BY g "
      "RETURNING id, tier, received_at, partition_key) "
      "INSERT INTO deliveries (message_id, destination_id, tier, received_at, partition_key) "
      "SELECT id, $4::int8, tier, received_at, partition_key FROM m "
      "UNION ALL "
      "SELECT id, $5::int8, tier, received_at, partition_key FROM m WHERE id % $6::int = 0",
      {std::to_string(iface_), std::to_string(kMessages), std::to_string(kLanes),
       std::to_string(destA_), std::to_string(destB_), std::to_string(kEveryB)});
  ASSERT_TRUE(seeded.ok()) << seeded.error().message;
  const int64_t toB =
      scalar("SELECT count(*) FROM deliveries WHERE destination_id = $1", {std::to_string(destB_)});
  ASSERT_EQ(toB, kMessages / kEveryB);
  ASSERT_EQ(scalar("SELECT count(*) FROM messages_t7_" + d10), kMessages);
  std::vector<int64_t> bIds;
  {
    auto r = (*sql_)("SELECT message_id FROM deliveries WHERE destination_id = $1 ORDER BY 1",
                     {std::to_string(destB_)});
    ASSERT_TRUE(r.ok()) << r.error().message;
    for (int i = 0; i < r->rows(); ++i) bIds.push_back(r->integer(i, 0));
  }

  Tally tally;
  Drainer low(&loop_, *store_, *sql_, destA_, {0, 1, 2, 3}, tally);
  Drainer high(&loop_, *store_, *sql_, destA_, {4, 5, 6, 7}, tally);
  auto drained = [&] { return low.done() && high.done(); };

  // Retention: one run after another, 5 ms apart, until the loops are done.
  std::vector<DropReport> reports;
  std::vector<std::string> retentionErrors;
  bool retentionIdle = false;
  int runs = 0;
  Later pause(&loop_);
  std::function<void()> runRetention = [&] {
    ++runs;
    retention_->dropExpired([&](Result<DropReport> r) {
      if (!r) {
        retentionErrors.push_back(r.error().message);
      } else {
        for (auto& f : r->failed) retentionErrors.push_back(f);
        reports.push_back(std::move(*r));
      }
      if (drained()) {
        retentionIdle = true;
        return;
      }
      pause.after(5ms, runRetention);
    });
  };

  // Another session holds two messages and two deliveries of destB_ for
  // 10 ms at a time, chosen by a fixed seed (rows the loops of destA_
  // never wait on: destB_ keeps them unfinished, so settle leaves them).
  Sql holder(db_->conninfo());
  std::mt19937 rng(80501);
  std::uniform_int_distribution<size_t> pick(0, bIds.size() - 1);
  bool holding = false, stopHolding = false;
  int holds = 0, lostHolds = 0;
  Later tick(&loop_);
  std::function<void()> hold = [&] {
    if (holding) {
      auto c = holder("COMMIT");
      if (!c) retentionErrors.push_back("holder: " + c.error().message);
      holding = false;
    }
    if (stopHolding) return;
    std::vector<int64_t> messages{bIds[pick(rng)], bIds[pick(rng)]};
    std::vector<int64_t> deliveries{bIds[pick(rng)], bIds[pick(rng)]};
    Result<PgResult> r = holder("BEGIN");
    if (r)
      r = holder("SELECT id FROM messages WHERE id = ANY ($1::int8[]) FOR UPDATE SKIP LOCKED",
                 {idArray(messages)});
    if (r)
      r = holder(
          "SELECT message_id FROM deliveries WHERE destination_id = $1 "
          "AND message_id = ANY ($2::int8[]) FOR UPDATE SKIP LOCKED",
          {std::to_string(destB_), idArray(deliveries)});
    // SKIP LOCKED skips a row the move holds, but not one whose move
    // committed while this statement ran: PostgreSQL then raises 40001
    // ("tuple to be locked was already moved to another partition"), as
    // it does to the loops' flushes. A hold missed, not a failure.
    if (!r && pg::serializationFailure(r.error()))
      ++lostHolds;
    else if (!r)
      retentionErrors.push_back("holder: " + r.error().message);
    holding = true;  // COMMIT ends it, or rolls back an aborted one
    ++holds;
    tick.after(10ms, hold);
  };

  const auto raceBegan = Clock::now();
  runRetention();
  hold();
  low.start();
  high.start();
  bool finished = ductus::test::runUntil(
      &loop_, [&] { return drained() && retentionIdle; }, 60s);
  stopHolding = true;
  if (holding) {
    EXPECT_TRUE(holder("COMMIT").ok());
    holding = false;
  }
  const auto raceMs =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - raceBegan).count();
  ASSERT_TRUE(finished) << "the loops or retention did not finish within 60 s (reads "
                        << tally.reads << ", flushes " << tally.flushes << ", runs " << runs << ")";
  EXPECT_TRUE(tally.errors.empty()) << tally.errors.front();
  EXPECT_TRUE(retentionErrors.empty()) << retentionErrors.size() << " errors:\n"
                                      << [&] {
                                           std::string all;
                                           for (auto& e : retentionErrors) all += e + "\n";
                                           return all;
                                         }();

  // Nothing of destA_ is left waiting.
  EXPECT_EQ(scalar("SELECT count(*) FROM deliveries WHERE destination_id = $1 AND status = 0",
                   {std::to_string(destA_)}),
            0);
  // The race happened: flushes carried 1w keys of rows already held.
  EXPECT_GT(tally.stale, 0) << "no flush carried keys of a row that had moved";

  int64_t movedInRace = 0;
  for (auto& r : reports) movedInRace += r.moved;
  const size_t reportsInRace = reports.size();

  // Retention once more with nobody in the way: the rest moves and the 1w
  // day goes.
  for (int i = 0; i < 5 && exists("messages_t7_" + d10); ++i) {
    auto r = drop();
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->failed.empty()) << r->failed.front();
    reports.push_back(std::move(*r));
  }
  EXPECT_FALSE(exists("messages_t7_" + d10));
  EXPECT_FALSE(exists("deliveries_t7_" + d10));

  // Every message sent and answered exactly once; every flush changed every
  // row it carried.
  EXPECT_EQ(tally.notChanged, 0) << "flushes left rows they carried unchanged";
  EXPECT_EQ(static_cast<int>(tally.sent.size()), kMessages);
  EXPECT_EQ(static_cast<int>(tally.answered.size()), kMessages);
  std::vector<std::string> twice;
  for (auto& [id, n] : tally.sent)
    if (n != 1) twice.push_back(std::to_string(id) + " sent " + std::to_string(n) + "x");
  for (auto& [id, n] : tally.answered)
    if (n != 1) twice.push_back(std::to_string(id) + " answered " + std::to_string(n) + "x");
  EXPECT_TRUE(twice.empty()) << twice.size() << " wrong, first: " << twice.front();
  // Each lane in id order.
  EXPECT_EQ(static_cast<int>(tally.lanes.size()), kLanes);
  for (auto& [lane, ids] : tally.lanes) {
    auto at =
        std::adjacent_find(ids.begin(), ids.end(), [](int64_t a, int64_t b) { return a >= b; });
    EXPECT_TRUE(at == ids.end()) << "lane " << lane << " sent " << *at << " before " << *(at + 1);
  }

  // Nothing lost: every message and delivery is still there or was counted
  // in a dropped period, and what went was finished. What stays is held.
  int64_t droppedMessages = 0, droppedDeliveries = 0, moved = 0;
  for (auto& r : reports) {
    moved += r.moved;
    for (auto& p : r.dropped) {
      EXPECT_NE(p.tier, Tier::Held) << "a held month went: " << p.from;
      droppedMessages += p.messages;
      droppedDeliveries += p.deliveries;
    }
  }
  EXPECT_EQ(droppedMessages + scalar("SELECT count(*) FROM messages"), kMessages);
  EXPECT_EQ(droppedDeliveries + scalar("SELECT count(*) FROM deliveries"), kMessages + toB);
  EXPECT_EQ(scalar("SELECT count(*) FROM messages WHERE tier <> 0"), 0);
  EXPECT_EQ(scalar("SELECT count(*) FROM messages WHERE tier = 0"), moved) << "moved once each";
  EXPECT_EQ(split(), 0);
  // Every message of destB_ held and waiting, with both deliveries.
  EXPECT_EQ(scalar("SELECT count(*) FROM messages WHERE status = 0 AND id = ANY ($1::int8[])",
                   {idArray(bIds)}),
            toB);
  EXPECT_EQ(scalar("SELECT count(*) FROM deliveries WHERE destination_id = $1 AND status = 0",
                   {std::to_string(destB_)}),
            toB);
  EXPECT_EQ(scalar("SELECT count(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM deliveries d "
                   "WHERE d.message_id = m.id AND d.destination_id = $1)",
                   {std::to_string(destA_)}),
            0);
  // Every delivery of destA_ sent; every message only to destA_ that is
  // still there (moved before its flush or its settle) settled as sent.
  EXPECT_EQ(scalar("SELECT count(*) FROM deliveries WHERE destination_id = $1 AND status <> 1",
                   {std::to_string(destA_)}),
            0);
  EXPECT_EQ(
      scalar("SELECT count(*) FROM messages WHERE status <> 1 AND NOT (id = ANY ($1::int8[]))",
             {idArray(bIds)}),
      0);

  std::printf(
      "[ stress   ] %d messages: %d reads, %d flushes, %lld rows flushed with 1w keys after "
      "their move, %lld serialization retries; %lld moved in %d runs under the loops (%d "
      "holds, %d lost to a move), %lld in %zu after; %lld dropped with the day; race %lld ms, "
      "test %lld ms\n",
      kMessages, tally.reads, tally.flushes, static_cast<long long>(tally.stale),
      static_cast<long long>(store_->stats().serializationRetries),
      static_cast<long long>(movedInRace), runs, holds, lostHolds,
      static_cast<long long>(moved - movedInRace),
      reports.size() - reportsInRace, static_cast<long long>(droppedMessages),
      static_cast<long long>(raceMs),
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began).count()));
}

}  // namespace
}  // namespace ductus::store::test
