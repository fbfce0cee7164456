// The engine's events (common/event_log.h) written by the EventRecorder
// (supervisor/monitor/event_recorder.h) into the bounded events table
// (migration 0017, schema/event_store.h), against a real cluster: a storm
// of events costs a statement per batch, not one each; a full queue drops
// and counts, says so in the log and in an events_dropped row; events
// recorded before the database was there are written once it is; the
// table is kept within its row cap and its age; reads are newest first
// and filtered.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "schema/event_store.h"
#include "supervisor/monitor/event_recorder.h"
#include "tests/schema/store_fixture.h"
#include "tests/support/log_capture.h"

namespace ductus::store::test {
namespace {

using ductus::test::LogCapture;
using supervisor::EventRecorder;

class Events : public StoreTest {
 protected:
  PgPool& pool() { return store_->sharedConnections(); }
  // Runs the loop until `done` says so (or 10 s).
  void runUntil(const std::function<bool()>& done) {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < until) {
      if (!uv_run(&loop_, UV_RUN_NOWAIT)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  void flush(EventRecorder& r) {
    bool flushed = false;
    r.flushNow([&] { flushed = true; });
    runUntil([&] { return flushed; });
    ASSERT_TRUE(flushed);
  }
  void countStatements() {
    ASSERT_TRUE((*sql_)("CREATE TABLE stmt_count (n int NOT NULL)").ok());
    ASSERT_TRUE((*sql_)("CREATE FUNCTION count_stmt() RETURNS trigger LANGUAGE plpgsql AS "
                        "$$BEGIN INSERT INTO stmt_count VALUES (1); RETURN NULL; END$$")
                    .ok());
    ASSERT_TRUE((*sql_)("CREATE TRIGGER count_stmt AFTER INSERT ON events "
                        "FOR EACH STATEMENT EXECUTE FUNCTION count_stmt()")
                    .ok());
  }
  static events::Event refusal(int n) {
    return {events::Kind::ArRefused, "adt", "", 0, "from 127.0.0.1:" + std::to_string(n)};
  }
};

TEST_F(Events, AStormIsWrittenABatchAStatementNotOneEach) {
  countStatements();
  EventRecorder::Options o;
  o.batch = 1'000;
  o.every = std::chrono::milliseconds(50);
  EventRecorder r(&loop_, o);
  r.start(pool());
  for (int i = 0; i < 2'500; ++i) r.record(refusal(i));
  EXPECT_EQ(r.queued(), 2'500u) << "record() only queues";
  runUntil([&] { return r.queued() == 0 && r.statements() == 3; });
  EXPECT_EQ(r.statements(), 3u);
  EXPECT_EQ(scalar("SELECT count(*) FROM stmt_count"), 3);
  EXPECT_EQ(scalar("SELECT count(*) FROM events WHERE kind = 'ar_refused' AND interface = 'adt'"),
            2'500);
  EXPECT_EQ(r.dropped(), 0u);
}

TEST_F(Events, AFullQueueDropsCountsAndSaysHowMany) {
  LogCapture log(spdlog::level::warn);
  EventRecorder::Options o;
  o.maxQueued = 100;
  o.every = std::chrono::milliseconds(50);
  EventRecorder r(&loop_, o);
  // Before the database is there (the workers start beside it): they wait.
  for (int i = 0; i < 130; ++i) r.record(refusal(i));
  EXPECT_EQ(r.queued(), 100u);
  EXPECT_EQ(r.dropped(), 30u);
  r.start(pool());
  flush(r);
  EXPECT_EQ(scalar("SELECT count(*) FROM events WHERE kind = 'ar_refused'"), 100);
  EXPECT_EQ(text("SELECT detail FROM events WHERE kind = 'events_dropped'"),
            "30 event(s) dropped: 100 were already waiting to be written");
  EXPECT_EQ(log.count("events: 30 event(s) dropped since the last write"), 1u) << log.all();
  // The newest is the note: it comes after the rows it explains.
  auto page = run<std::vector<EventRow>>([&](auto cb) { readEvents(pool(), {}, cb); });
  ASSERT_TRUE(page.ok());
  ASSERT_FALSE(page->empty());
  EXPECT_EQ(page->front().kind, "events_dropped");
}

TEST_F(Events, AFailedWriteKeepsItsRowsForTheNextTry) {
  LogCapture log(spdlog::level::warn);
  EventRecorder::Options o;
  o.every = std::chrono::milliseconds(20);
  EventRecorder r(&loop_, o);
  r.start(pool());
  ASSERT_TRUE((*sql_)("ALTER TABLE events RENAME TO events_away").ok());
  r.record(refusal(1));
  runUntil([&] { return log.count("events: writing 1 event(s) failed") == 1; });
  ASSERT_EQ(log.count("events: writing 1 event(s) failed"), 1u) << log.all();
  EXPECT_EQ(r.queued(), 1u) << "the failed row waits for the next try";
  ASSERT_TRUE((*sql_)("ALTER TABLE events_away RENAME TO events").ok());
  // Tried again 5 s later.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (r.statements() == 0 && std::chrono::steady_clock::now() < until)
    uv_run(&loop_, UV_RUN_ONCE);
  EXPECT_EQ(r.statements(), 1u);
  EXPECT_EQ(scalar("SELECT count(*) FROM events"), 1);
  EXPECT_EQ(r.dropped(), 0u);
}

TEST_F(Events, TheTableIsKeptWithinItsRowCapAndItsAge) {
  EventRecorder::Options o;
  o.maxRows = 1'000;
  o.purgeBatch = 300;
  o.every = std::chrono::milliseconds(10);
  EventRecorder r(&loop_, o);
  r.start(pool());
  // Older than 30 days: gone whatever the count.
  ASSERT_TRUE((*sql_)("INSERT INTO events (at, kind, detail) SELECT now() - interval '31 days', "
                      "'runaway', 'old' FROM generate_series(1, 50)")
                  .ok());
  for (int i = 0; i < 1'050; ++i) r.record(refusal(i));
  flush(r);
  // A tenth of the cap written since the last purge purges at once; the
  // test asks again to be sure of the end state.
  auto n = await<int64_t>(&loop_, [&](auto cb) { r.purgeNow(cb); });
  ASSERT_TRUE(n.ok()) << n.error().message;
  runUntil([&] { return scalar("SELECT count(*) FROM events") == 1'000; });
  EXPECT_EQ(scalar("SELECT count(*) FROM events"), 1'000);
  EXPECT_EQ(scalar("SELECT count(*) FROM events WHERE detail = 'old'"), 0);
  // The newest were kept.
  EXPECT_EQ(text("SELECT detail FROM events ORDER BY id DESC LIMIT 1"), "from 127.0.0.1:1049");
  EXPECT_EQ(text("SELECT detail FROM events ORDER BY id LIMIT 1"), "from 127.0.0.1:50");
}

TEST_F(Events, ReadsAreNewestFirstFilteredAndPaged) {
  std::vector<events::Event> rows{
      {events::Kind::ArRefused, "adt", "", 0, "one"},
      {events::Kind::Runaway, "lab", "ehr", 42, "two"},
      {events::Kind::WorkerRestarted, "", "", 0, std::string(3'000, 'x')},
      {events::Kind::ArRefused, "lab", "", 0, "four"},
  };
  auto added = await<bool>(&loop_, [&](auto cb) {
    addEvents(pool(), rows, [cb](Status s) { s ? cb(true) : cb(s.error()); });
  });
  ASSERT_TRUE(added.ok()) << added.error().message;
  auto read = [&](EventQuery q) {
    auto r = run<std::vector<EventRow>>([&](auto cb) { readEvents(pool(), q, cb); });
    EXPECT_TRUE(r.ok()) << (r ? "" : r.error().message);
    return r ? *r : std::vector<EventRow>{};
  };
  auto all = read({});
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].detail, "four");
  EXPECT_EQ(all[1].detail.size(), events::kMaxDetail) << "the detail is cut to its bound";
  EXPECT_FALSE(all[1].interface.has_value());
  EXPECT_EQ(all[2].messageId, 42);
  EXPECT_EQ(all[2].destination, "ehr");
  auto query = [](auto set) {
    EventQuery q;
    set(q);
    return q;
  };
  EXPECT_EQ(read(query([](auto& q) { q.kind = "ar_refused"; })).size(), 2u);
  EXPECT_EQ(read(query([](auto& q) { q.interface = "lab"; })).size(), 2u);
  EXPECT_EQ(read(query([](auto& q) { q.kind = "ar_refused", q.interface = "lab"; })).size(), 1u);
  auto older = read(query([&](auto& q) { q.beforeId = all[1].id, q.limit = 1; }));
  ASSERT_EQ(older.size(), 1u);
  EXPECT_EQ(older[0].detail, "two");
  EXPECT_TRUE(read(query([](auto& q) { q.since = "2999-01-01T00:00:00Z"; })).empty());
}

}  // namespace
}  // namespace ductus::store::test
