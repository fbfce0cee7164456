// The interface's settler against a real store: one settle at a time, what
// arrives meanwhile settled by the next (once, however many loops handed it
// over), a failure tried again with what arrived since, and the stop's last
// settle.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "supervisor/delivery/settler.h"
#include "tests/schema/store_fixture.h"
#include "tests/support/run_until.h"

namespace ductus::delivery {
namespace {

using namespace std::chrono_literals;
using store::DeliveryOutcome;
using store::MessageRef;
using store::MessageStatus;

class SettlerTest : public store::test::StoreTest {
 protected:
  // Both of its deliveries sent and flushed: ready to settle.
  MessageRef finished(const std::string& payload) {
    auto m = insert(message(payload, {destA_, destB_}));
    EXPECT_TRUE(m.ok()) << m.error().message;
    for (int64_t dest : {destA_, destB_}) {
      DeliveryOutcome o;
      o.message = m->ref;
      o.status = MessageStatus::Sent;
      auto r = run<std::vector<int64_t>>([&](auto cb) { store_->flushStatuses(dest, {o}, cb); });
      EXPECT_TRUE(r.ok()) << r.error().message;
    }
    return m->ref;
  }
  int64_t statusOf(const MessageRef& m) {
    return scalar("SELECT status FROM messages WHERE id = $1", {std::to_string(m.id)});
  }
  int64_t waitingOnLocks() {
    return scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock'");
  }
  // `holder` takes the message's row in a transaction it keeps open; then
  // `settler` is handed `refs` (the held one among them) and runs until its
  // settle waits on that row: a settle still running.
  void settleWaitingOn(store::test::Sql& holder, const MessageRef& held, Settler& settler,
                       const std::vector<MessageRef>& refs) {
    ASSERT_TRUE(holder("BEGIN").ok());
    ASSERT_TRUE(
        holder("SELECT 1 FROM messages WHERE id = $1 FOR UPDATE", {std::to_string(held.id)}).ok());
    settler.add(refs);
    ASSERT_TRUE(test::runUntil(
        &loop_, [&] { return waitingOnLocks() > 0; }, 10s))
        << "the settle never waited on the held row";
  }
  // Ends the connection of the settle waiting on a lock: the settle fails.
  void cutTheWaitingSettle(store::test::Sql& sql) {
    ASSERT_TRUE(sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND wait_event_type = 'Lock'")
                    .ok());
  }
  // settleWaitingOn, then that settle fails (its connection cut) and the
  // row is free again: a retry waits for its back-off.
  void failedOnce(store::test::Sql& holder, const MessageRef& held, Settler& settler) {
    settleWaitingOn(holder, held, settler, {held});
    if (HasFatalFailure()) return;
    cutTheWaitingSettle(holder);
    if (HasFatalFailure()) return;
    ASSERT_TRUE(test::runUntil(&loop_, [&] { return settler.failures() == 1; }));
    ASSERT_TRUE(holder("COMMIT").ok());
  }
};

TEST_F(SettlerTest, OneSettleRunsAtATimeAndWhatArrivesMeanwhileGoesTogetherInTheNext) {
  Settler settler(&loop_, *store_, "adt", Backoff{20ms, 200ms});
  auto first = finished("first");
  auto second = finished("second");
  auto third = finished("third");
  // Another transaction holds the first message's row: the settle that
  // takes it waits there, still running.
  store::test::Sql holder(db_->conninfo());
  settleWaitingOn(holder, first, settler, {first});
  if (HasFatalFailure()) return;
  // Three loops hand over what they finished meanwhile, twice the same.
  settler.add({second});
  settler.add({third, second});
  settler.add({second});
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_EQ(settler.settles(), 1) << "a second settle started beside the first";
  EXPECT_EQ(settler.queued(), 2u) << "each message once";
  EXPECT_EQ(statusOf(second), 0);
  ASSERT_TRUE(holder("COMMIT").ok());
  ASSERT_TRUE(test::runUntil(&loop_, [&] {
    return statusOf(first) == 1 && statusOf(second) == 1 && statusOf(third) == 1;
  }));
  EXPECT_EQ(settler.settles(), 2) << "what arrived meanwhile went in one settle";
  EXPECT_EQ(settler.queued(), 0u);
  EXPECT_EQ(settler.failures(), 0);
}

TEST_F(SettlerTest, AMessageWhoseLastDeliveryIsFlushedWhileASettleRunsIsSettledByTheNext) {
  Settler settler(&loop_, *store_, "adt", Backoff{20ms, 200ms});
  auto blocker = finished("blocker");
  auto m = insert(message("late", {destA_, destB_}));
  ASSERT_TRUE(m.ok());
  DeliveryOutcome a;
  a.message = m->ref;
  a.status = MessageStatus::Sent;
  ASSERT_TRUE(run<std::vector<int64_t>>([&](auto cb) { store_->flushStatuses(destA_, {a}, cb); }));
  // B's flush is not committed yet when the settle of A's reads: it finds
  // B pending and leaves the message.
  store::test::Sql flushB(db_->conninfo());
  ASSERT_TRUE(flushB("BEGIN").ok());
  ASSERT_TRUE(
      flushB("UPDATE deliveries SET status = 1 WHERE message_id = $1 AND destination_id = $2",
             {std::to_string(m->ref.id), std::to_string(destB_)})
          .ok());
  // It also takes a row another transaction holds, so it is still running
  // when B's flush commits and hands the message over.
  store::test::Sql holder(db_->conninfo());
  settleWaitingOn(holder, blocker, settler, {m->ref, blocker});
  if (HasFatalFailure()) return;
  ASSERT_TRUE(flushB("COMMIT").ok());
  settler.add({m->ref});
  ASSERT_TRUE(holder("COMMIT").ok());
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return statusOf(m->ref) == 1; }))
      << "the message stayed pending with both deliveries sent";
  EXPECT_EQ(settler.settles(), 2);
  EXPECT_EQ(statusOf(blocker), 1);
}

TEST_F(SettlerTest, AFailedSettleIsTriedAgainAfterTheBackOff) {
  Settler settler(&loop_, *store_, "adt", Backoff{300ms, 1000ms});
  auto first = finished("first");
  store::test::Sql holder(db_->conninfo());
  failedOnce(holder, first, settler);
  if (HasFatalFailure()) return;
  auto failedAt = uv_now(&loop_);
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return statusOf(first) == 1; }));
  EXPECT_GE(uv_now(&loop_) - failedAt, 250u) << "tried again before its back-off";
  EXPECT_EQ(settler.settles(), 2);
  EXPECT_EQ(settler.queued(), 0u);
}

TEST_F(SettlerTest, WhatALoopHandsOverDuringTheBackOffGoesAtOnceWithTheFailedOnes) {
  // A back-off far longer than the test: only the hand-over can start it.
  Settler settler(&loop_, *store_, "adt", Backoff{60s, 60s});
  auto first = finished("first");
  auto second = finished("second");
  store::test::Sql holder(db_->conninfo());
  failedOnce(holder, first, settler);
  if (HasFatalFailure()) return;
  EXPECT_EQ(settler.queued(), 1u) << "the failed message is kept";
  // A loop's flush committed: the database answers again.
  settler.add({second});
  EXPECT_EQ(settler.settles(), 2) << "the hand-over waited for the back-off";
  ASSERT_TRUE(test::runUntil(
      &loop_, [&] { return statusOf(first) == 1 && statusOf(second) == 1; }, 10s));
  EXPECT_EQ(settler.settles(), 2) << "both went in one settle";
}

TEST_F(SettlerTest, FinishSettlesWhatWasHandedOverOnceAndThenAnswers) {
  Settler settler(&loop_, *store_, "adt", Backoff{20ms, 200ms});
  auto first = finished("first");
  auto second = finished("second");
  store::test::Sql holder(db_->conninfo());
  settleWaitingOn(holder, first, settler, {first});
  if (HasFatalFailure()) return;
  settler.add({second});  // the last flush of a stopping loop
  bool done = false;
  settler.finish([&] { done = true; });
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_FALSE(done) << "answered before the running settle";
  ASSERT_TRUE(holder("COMMIT").ok());
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return done; }));
  EXPECT_EQ(statusOf(first), 1);
  EXPECT_EQ(statusOf(second), 1);
  EXPECT_EQ(settler.settles(), 2);

  // Nothing handed over: it answers at once.
  Settler idle(&loop_, *store_, "adt");
  bool idleDone = false;
  idle.finish([&] { idleDone = true; });
  EXPECT_TRUE(idleDone);
  EXPECT_EQ(idle.settles(), 0);
}

TEST_F(SettlerTest, AFailureAtStopIsNotTriedAgainAndARetryWaitingGoesAtOnce) {
  store::test::Sql holder(db_->conninfo());
  // A failure at stop: logged, left for the next start.
  Settler failing(&loop_, *store_, "adt", Backoff{20ms, 200ms});
  auto third = finished("third");
  settleWaitingOn(holder, third, failing, {third});
  if (HasFatalFailure()) return;
  bool failedDone = false;
  failing.finish([&] { failedDone = true; });
  cutTheWaitingSettle(holder);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return failedDone; }));
  EXPECT_EQ(failing.failures(), 1);
  EXPECT_EQ(failing.settles(), 1) << "tried again after the stop";
  ASSERT_TRUE(holder("ROLLBACK").ok());
  EXPECT_EQ(statusOf(third), 0);

  // A retry waiting for a minute's back-off when the stop comes: tried now.
  Settler waiting(&loop_, *store_, "adt", Backoff{60s, 60s});
  auto fourth = finished("fourth");
  failedOnce(holder, fourth, waiting);
  if (HasFatalFailure()) return;
  bool done = false;
  waiting.finish([&] { done = true; });
  ASSERT_TRUE(test::runUntil(
      &loop_, [&] { return done; }, 10s))
      << "the stop waited for the back-off";
  EXPECT_EQ(statusOf(fourth), 1);
}

TEST_F(SettlerTest, TheStopWaitsForItsSettleOnlySoLong) {
  Settler settler(&loop_, *store_, "adt", Backoff{20ms, 200ms}, 300ms);
  auto first = finished("first");
  store::test::Sql holder(db_->conninfo());
  settleWaitingOn(holder, first, settler, {first});
  if (HasFatalFailure()) return;
  bool done = false;
  auto from = uv_now(&loop_);
  settler.finish([&] { done = true; });
  // The row stays held: the settle waits on it past the bound.
  ASSERT_TRUE(test::runUntil(
      &loop_, [&] { return done; }, 5s))
      << "the stop waited on the lock";
  EXPECT_GE(uv_now(&loop_) - from, 250u);
  EXPECT_EQ(statusOf(first), 0);
  // Once the row is free the settle still ends (and answers no one twice).
  ASSERT_TRUE(holder("COMMIT").ok());
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return statusOf(first) == 1; }));
}

}  // namespace
}  // namespace ductus::delivery
