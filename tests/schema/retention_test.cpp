// Retention against a real cluster (schema/retention.h): periods older than
// their tier go, messages and deliveries together, newer ones stay; the
// unfinished messages of an expired period move to the held area first,
// each with all its deliveries, where the store's statements still find
// them and their lane still reads them first; the move never waits on a
// row someone holds; a held month goes once over and finished; a drop
// never holds up inserts behind a long query and an interrupted one is
// finished later; a shorter tier waits for a confirmation; dedupe keys past
// their window go, and a repeat after that is stored as new.
#include <gtest/gtest.h>

#include "schema/retention.h"
#include "tests/schema/retention_fixture.h"

namespace ductus::store::test {
namespace {

TEST_F(RetentionTest, PeriodsOlderThanTheirTierGoAndTheirUnfinishedMessagesMoveToTheHeldArea) {
  partitionsFrom(40, 3);  // 40 .. 37 days ago, every tier
  storeOld(7, 40, 50, 1);  // sent, 1w: past 7 days
  storeOld(7, 39, 5, 0);   // pending, 1w: moves to the held area
  storeOld(21, 40, 20, 2);  // filtered, 3w: the week 40 days back is past 21 days
  storeOld(49, 40, 30, 1);  // 7w: 40 days is within 49
  const std::string d40 = compact(day(-40)), d39 = compact(day(-39)), today = compact(day(0));
  int64_t t49Before = scalar("SELECT count(*) FROM messages WHERE tier = 49");

  // The plan says what the run will do before it does it.
  auto plan = run<RetentionPlan>([&](auto cb) { retention_->plan(cb); });
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  int expiredFree = 0, unfinished = 0, checked = 0;
  for (auto& p : plan->periods) {
    if (p.expired && p.unfinished == 0) ++expiredFree;
    if (p.expired && p.unfinished > 0) ++unfinished;
    // The 1w tier's days (tier 7; Week7 is the 7-week tier, whose weekly
    // periods start on a Monday and would match only some days).
    if (p.tier == Tier::Week1 && p.from == day(-40)) {
      ++checked;
      EXPECT_TRUE(p.expired);
      EXPECT_EQ(p.dropsOn, day(-39 + 7));
      EXPECT_GT(p.bytes, 0);
    }
    if (p.tier == Tier::Week1 && p.from == day(0)) {
      ++checked;
      EXPECT_FALSE(p.expired);
    }
    if (p.tier == Tier::Week1 && p.from == day(-39)) {
      ++checked;
      EXPECT_EQ(p.unfinished, 10);
    }
  }
  EXPECT_EQ(checked, 3) << "the plan lists the 1w days 40 and 39 back, and today";
  EXPECT_EQ(unfinished, 1);
  EXPECT_GE(expiredFree, 4);  // 1w: 40, 38, 37 days back; 3w: 40 days back's week
  const std::string pendingIds =
      text("SELECT string_agg(id::text, ',' ORDER BY id) FROM messages WHERE status = 0");

  auto r = drop();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->busy);
  EXPECT_TRUE(r->failed.empty()) << r->failed.front();
  // Every expired period went, the one with pending messages too, once
  // they had moved.
  EXPECT_EQ(static_cast<int>(r->dropped.size()), expiredFree + 1);
  EXPECT_TRUE(r->held.empty()) << r->held.front().from;
  EXPECT_EQ(r->moved, 5);
  int64_t messagesFreed = 0, deliveriesFreed = 0;
  for (auto& p : r->dropped) {
    messagesFreed += p.messages;
    deliveriesFreed += p.deliveries;
    EXPECT_GT(p.bytes, 0);
  }
  EXPECT_EQ(messagesFreed, 70);
  EXPECT_EQ(deliveriesFreed, 70);

  // Messages and deliveries went together; nothing else did.
  EXPECT_FALSE(exists("messages_t7_" + d40));
  EXPECT_FALSE(exists("deliveries_t7_" + d40));
  EXPECT_FALSE(exists("messages_t7_" + d39));
  EXPECT_FALSE(exists("deliveries_t7_" + d39));
  EXPECT_TRUE(exists("messages_t7_" + today));
  EXPECT_EQ(scalar("SELECT count(*) FROM messages WHERE tier = 21"), 0);
  EXPECT_EQ(scalar("SELECT count(*) FROM messages WHERE tier = 49"), t49Before);
  EXPECT_EQ(scalar("SELECT count(*) FROM messages WHERE tier = 7"), 0);
  // The pending ones are held: the same ids, received_at and status, in
  // the held month of their day.
  const std::string month = compact(day(-39)).substr(0, 6) + "01";
  EXPECT_EQ(text("SELECT string_agg(id::text, ',' ORDER BY id) FROM messages_t0_" + month +
                 " WHERE status = 0"),
            pendingIds);
  EXPECT_EQ(scalar("SELECT count(*) FROM deliveries_t0_" + month + " WHERE status = 0"), 5);
  EXPECT_EQ(
      scalar("SELECT count(*) FROM messages_t0 WHERE received_at::date <> $1::date", {day(-39)}),
      0);
  EXPECT_EQ(split(), 0);
  auto h = held();
  EXPECT_EQ(h.pending, 5);
  EXPECT_EQ(h.deliveries, 5);
  EXPECT_EQ(h.months, 1);
  EXPECT_GT(h.bytes, 0);
  // Today's inserts still land.
  ASSERT_TRUE(insert(message("today", {destA_})).ok());

  // Its month is over, but unfinished messages keep it.
  auto kept = drop();
  ASSERT_TRUE(kept.ok()) << kept.error().message;
  EXPECT_TRUE(kept->dropped.empty());
  EXPECT_TRUE(kept->held.empty());
  EXPECT_TRUE(exists("messages_t0_" + month));
  // Once they are delivered, the next run drops it.
  ASSERT_TRUE((*sql_)("UPDATE deliveries SET status = 1 WHERE tier = 0").ok());
  ASSERT_TRUE((*sql_)("UPDATE messages SET status = 1 WHERE tier = 0").ok());
  auto again = drop();
  ASSERT_TRUE(again.ok()) << again.error().message;
  ASSERT_EQ(again->dropped.size(), 1u);
  EXPECT_EQ(again->dropped[0].tier, Tier::Held);
  EXPECT_EQ(again->dropped[0].messages, 5);
  EXPECT_EQ(again->dropped[0].deliveries, 5);
  EXPECT_FALSE(exists("messages_t0_" + month));
  EXPECT_FALSE(exists("deliveries_t0_" + month));
  EXPECT_EQ(held().months, 0);
}

TEST_F(RetentionTest,
       AHeldMessageIsStillFirstInItsLaneAndStatementsWithKeysReadBeforeTheMoveFindIt) {
  partitionsFrom(10, 0);
  storeOld(7, 10, 3, 0);  // pending, 10 days old, in the 1w tier
  ASSERT_TRUE(insert(message("new", {destA_})).ok());
  auto before = queue(destA_);
  ASSERT_EQ(before.size(), 4u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(before[i].message.tier, Tier::Week1);

  auto r = drop();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->moved, 3);
  EXPECT_FALSE(exists("messages_t7_" + compact(day(-10))));

  // The queue still reads them first, from the held area.
  auto after = queue(destA_);
  ASSERT_EQ(after.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(after[i].message.id, before[i].message.id);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(after[i].message.tier, Tier::Held);
  EXPECT_EQ(after[3].payload, "new");

  // A loop that read them before the move flushes with the keys it read
  // (tier 1w): the rows are found where they are now.
  auto flushed = run<std::vector<int64_t>>([&](auto cb) {
    store_->flushStatuses(destA_, {DeliveryOutcome{before[0].message, MessageStatus::Sent, {}, {}}},
                          cb);
  });
  ASSERT_TRUE(flushed.ok()) << flushed.error().message;
  EXPECT_EQ(*flushed, std::vector<int64_t>{before[0].message.id});
  auto settled = run<int64_t>([&](auto cb) { store_->settle({before[0].message}, cb); });
  ASSERT_TRUE(settled.ok()) << settled.error().message;
  EXPECT_EQ(*settled, 1);
  // The single destination's flush settles in the same statement.
  auto one = run<std::vector<int64_t>>([&](auto cb) {
    store_->flushStatuses(destA_,
                          {DeliveryOutcome{before[1].message, MessageStatus::Filtered, {}, {}}}, cb,
                          Store::Settle::InTheFlush);
  });
  ASSERT_TRUE(one.ok()) << one.error().message;
  EXPECT_EQ(*one, std::vector<int64_t>{before[1].message.id});
  EXPECT_EQ(text("SELECT string_agg(status::text, ',' ORDER BY id) FROM messages WHERE tier = 0"),
            "1,2,0");
  // A resend with the old key finds it too.
  auto resent = run<bool>([&](auto cb) { store_->resend(before[0].message, destA_, cb); });
  ASSERT_TRUE(resent.ok()) << resent.error().message;
  EXPECT_TRUE(*resent);
  EXPECT_EQ(scalar("SELECT count(*) FROM deliveries WHERE tier = 0 AND status = 0"), 2);
  EXPECT_EQ(split(), 0);
}

TEST_F(RetentionTest, TheMoveNeverWaitsOnARowSomeoneHoldsAndNeverSplitsAMessageFromItsDeliveries) {
  partitionsFrom(10, 0);
  storeOld(7, 10, 4, 0);
  auto ids = queue(destA_);
  ASSERT_EQ(ids.size(), 4u);
  // The held month made beforehand: making it would wait for the other
  // session's lock on the parents, as making any partition does.
  for (const char* t : {"messages", "deliveries"})
    ASSERT_EQ(text("SELECT ductus_ensure_held_partition($1, $2::date, 2000)", {t, day(-10)}), "t");
  // Someone holds the first message, and a delivery of the second.
  Sql other(db_->conninfo());
  ASSERT_TRUE(other("BEGIN").ok());
  ASSERT_TRUE(
      other("SELECT 1 FROM messages WHERE id = $1 FOR UPDATE", {std::to_string(ids[0].message.id)})
          .ok());
  ASSERT_TRUE(other("SELECT 1 FROM deliveries WHERE message_id = $1 FOR UPDATE",
                    {std::to_string(ids[1].message.id)})
                  .ok());
  auto r = drop();
  ASSERT_TRUE(r.ok()) << r.error().message;
  // Waiting on either lock would have run into the lock_timeout and been
  // reported as failed.
  EXPECT_TRUE(r->failed.empty()) << r->failed.front();
  EXPECT_EQ(r->moved, 2);
  ASSERT_EQ(r->held.size(), 1u);  // kept for now
  EXPECT_EQ(r->held[0].unfinished, 4);
  EXPECT_EQ(scalar("SELECT count(*) FROM messages WHERE tier = 7"), 2);
  EXPECT_EQ(scalar("SELECT count(*) FROM deliveries WHERE tier = 7"), 2);
  EXPECT_EQ(split(), 0);
  ASSERT_TRUE(other("COMMIT").ok());
  // Next run: the rest, and the period goes.
  auto again = drop();
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->moved, 2);
  EXPECT_TRUE(again->held.empty());
  EXPECT_FALSE(exists("messages_t7_" + compact(day(-10))));
  EXPECT_EQ(scalar("SELECT count(*) FROM messages WHERE tier = 0"), 4);
  EXPECT_EQ(split(), 0);
}

TEST_F(RetentionTest, AnInterruptedDropLeftWithUnfinishedRowsIsAttachedAgain) {
  partitionsFrom(10, 0);
  storeOld(7, 10, 2, 0);
  const std::string d10 = compact(day(-10));
  // A drop detached both tables, a resend made rows pending, then the
  // engine died: the queue no longer sees them.
  for (const char* t : {"deliveries", "messages"})
    ASSERT_TRUE(
        (*sql_)(std::string("ALTER TABLE ") + t + "_t7 DETACH PARTITION " + t + "_t7_" + d10).ok());
  EXPECT_TRUE(queue(destA_).empty());
  auto r = drop();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->failed.empty()) << r->failed.front();
  // Back where they were, then moved on as any unfinished rows.
  EXPECT_EQ(queue(destA_).size(), 2u);
  EXPECT_EQ(text("SELECT relispartition FROM pg_class WHERE relname = 'messages_t7_" + d10 + "'"),
            "t");
  auto again = drop();
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->moved, 2);
  EXPECT_FALSE(exists("messages_t7_" + d10));
  EXPECT_EQ(queue(destA_).size(), 2u);
}

TEST_F(RetentionTest, QuarantinedMessagesAreHeldUnlessTheirInterfacePurgesThem) {
  auto purging = run<int64_t>([&](auto cb) { store_->ensureInterface("purging", cb); });
  ASSERT_TRUE(purging.ok());
  auto purgingDest = run<int64_t>([&](auto cb) { store_->ensureDestination(*purging, "out", cb); });
  ASSERT_TRUE(purgingDest.ok());
  RetentionOptions o;
  o.conninfo = db_->conninfo();
  o.quarantinePurged = {*purging};
  o.moveBatch = 2;  // several batches
  retention_ = std::make_unique<Retention>(&loop_, o);
  partitionsFrom(10, 0);
  storeOld(7, 10, 5, 3);                             // quarantined, kept
  storeOldFor(*purging, *purgingDest, 7, 10, 4, 3);  // quarantined, purged
  storeOld(7, 10, 6, 1);                             // sent
  // Quarantined at intake: no delivery to resend or dismiss it by, so
  // nothing could ever take it out of the held area. It goes.
  ASSERT_TRUE((*sql_)("INSERT INTO messages (tier, received_at, interface_id, payload, status) "
                      "VALUES (7, now() - interval '10 days', $1, 'refused', 3)",
                      {std::to_string(iface_)})
                  .ok());
  auto r = drop();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->moved, 5);
  ASSERT_EQ(r->dropped.size(), 1u);
  EXPECT_EQ(r->dropped[0].messages, 11);  // the purged, the sent and the refused ones
  EXPECT_EQ(
      scalar("SELECT count(*) FROM messages WHERE interface_id = $1", {std::to_string(*purging)}),
      0);
  auto h = held();
  EXPECT_EQ(h.quarantined, 5);
  EXPECT_EQ(h.pending, 0);
  EXPECT_EQ(h.deliveries, 5);
  EXPECT_EQ(split(), 0);
}

TEST_F(RetentionTest, ADropNeverHoldsUpInsertsBehindALongQueryAndTheNextRunFinishesIt) {
  partitionsFrom(40, 0);
  storeOld(7, 40, 10, 1);
  const std::string d40 = compact(day(-40));
  // A long report reads the 1w tier and keeps its transaction open: the
  // detach has to wait for it, and gives up after its lock_timeout.
  Sql report(db_->conninfo());
  ASSERT_TRUE(report("BEGIN").ok());
  ASSERT_TRUE(report("SELECT count(*) FROM messages WHERE tier = 7").ok());
  std::optional<Result<DropReport>> dropped;
  retention_->dropExpired([&](Result<DropReport> r) { dropped = std::move(r); });
  // Inserts into the same tables go through meanwhile.
  for (int i = 0; i < 20; ++i) {
    std::optional<Result<StoredMessage>> stored;
    store_->insert(message("during the drop", {destA_}),
                   [&](Result<StoredMessage> r) { stored = std::move(r); });
    ASSERT_TRUE(runUntil([&] { return stored.has_value(); }, 10000))
        << "an insert waited behind the drop";
    ASSERT_TRUE(stored->ok()) << stored->error().message;
  }
  ASSERT_TRUE(runUntil([&] { return dropped.has_value(); }, 20000));
  ASSERT_TRUE(dropped->ok()) << dropped->error().message;
  // Gave up on the 1w period (the report is still running); the 3w week,
  // which the report didn't read, went.
  ASSERT_EQ((*dropped)->failed.size(), 1u);
  EXPECT_EQ((*dropped)->failed[0].rfind("1w " + day(-40), 0), 0u) << (*dropped)->failed[0];
  for (auto& p : (*dropped)->dropped) EXPECT_NE(p.tier, Tier::Week1);
  // The report still sees what it saw.
  EXPECT_TRUE(report("SELECT count(*) FROM messages_t7_" + d40).ok());
  ASSERT_TRUE(report("COMMIT").ok());

  // The plan says an interrupted drop is there; the next run finishes it.
  auto plan = run<RetentionPlan>([&](auto cb) { retention_->plan(cb); });
  ASSERT_TRUE(plan.ok());
  auto again = drop();
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(again->failed.empty()) << again->failed.front();
  ASSERT_EQ(again->dropped.size(), 1u);
  EXPECT_EQ(again->dropped[0].messages, 10);
  EXPECT_FALSE(exists("messages_t7_" + d40));
  EXPECT_FALSE(exists("deliveries_t7_" + d40));
  EXPECT_EQ(scalar("SELECT count(*) FROM messages WHERE payload = 'during the drop'"), 20);
}

TEST_F(RetentionTest, OneRunAtATimePerDatabase) {
  partitionsFrom(40, 0);
  Sql other(db_->conninfo());
  ASSERT_TRUE(other("SELECT pg_advisory_lock(7310595005420971365)").ok());
  auto r = drop();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->busy);
  EXPECT_TRUE(exists("messages_t7_" + compact(day(-40))));
  ASSERT_TRUE(other("SELECT pg_advisory_unlock(7310595005420971365)").ok());
  auto again = drop();
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->busy);
  EXPECT_FALSE(exists("messages_t7_" + compact(day(-40))));
}

TEST_F(RetentionTest, AShorterTierWaitsForAConfirmationALongerOneAppliesAtOnce) {
  using Change = TierState::Change;
  auto apply = [&](Tier configured) {
    return run<std::vector<TierState>>([&](auto cb) {
      retention_->applyTiers({{iface_, "adt", configured}}, cb);
    });
  };
  auto first = apply(Tier::Week7);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ((*first)[0].change, Change::New);
  EXPECT_EQ((*first)[0].applied, Tier::Week7);
  auto same = apply(Tier::Week7);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ((*same)[0].change, Change::None);

  // Shorter: the old tier stays applied, the request is recorded.
  auto shorter = apply(Tier::Week1);
  ASSERT_TRUE(shorter.ok());
  EXPECT_EQ((*shorter)[0].change, Change::Waiting);
  EXPECT_EQ((*shorter)[0].applied, Tier::Week7);
  ASSERT_TRUE((*shorter)[0].requestedAt.has_value());
  EXPECT_EQ(text("SELECT tier || '/' || requested_tier FROM interface_retention "
                 "WHERE interface_id = $1",
                 {std::to_string(iface_)}),
            "49/7");
  // Started again without a confirmation: still waiting, since the same time.
  auto still = apply(Tier::Week1);
  ASSERT_TRUE(still.ok());
  EXPECT_EQ((*still)[0].applied, Tier::Week7);
  EXPECT_EQ((*still)[0].requestedAt, (*shorter)[0].requestedAt);
  // Reading changes nothing.
  auto read = run<std::vector<TierState>>(
      [&](auto cb) { retention_->readTiers({{iface_, "adt", Tier::Week3}}, cb); });
  ASSERT_TRUE(read.ok());
  EXPECT_EQ((*read)[0].change, Change::Waiting);
  EXPECT_EQ(text("SELECT requested_tier FROM interface_retention WHERE interface_id = $1",
                 {std::to_string(iface_)}),
            "7");

  // Confirmed: applies; confirming a tier that isn't shorter does nothing.
  auto longer = run<bool>([&](auto cb) { retention_->confirm(iface_, Tier::Week7, cb); });
  ASSERT_TRUE(longer.ok());
  EXPECT_FALSE(*longer);
  auto ok = run<bool>([&](auto cb) { retention_->confirm(iface_, Tier::Week1, cb); });
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_TRUE(*ok);
  auto after = apply(Tier::Week1);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)[0].change, Change::None);
  EXPECT_EQ((*after)[0].applied, Tier::Week1);

  // Longer again: at once, nothing to confirm.
  auto lengthened = apply(Tier::Week3);
  ASSERT_TRUE(lengthened.ok());
  EXPECT_EQ((*lengthened)[0].change, Change::Lengthened);
  EXPECT_EQ((*lengthened)[0].applied, Tier::Week3);
  EXPECT_EQ(text("SELECT tier || '/' || coalesce(requested_tier::text, '-') FROM "
                 "interface_retention WHERE interface_id = $1",
                 {std::to_string(iface_)}),
            "21/-");
}

TEST_F(RetentionTest, DedupeKeysPastTheWindowGoAndARepeatAfterThatIsStoredAsNew) {
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(insert(message("m", {destA_}, "K" + std::to_string(i))).ok());
  // Another interface (removed from the project: not listed) with old keys.
  auto other = run<int64_t>([&](auto cb) { store_->ensureInterface("removed", cb); });
  ASSERT_TRUE(other.ok());
  NewMessage m = message("x", {}, "R1");
  m.interfaceId = *other;
  ASSERT_TRUE(insert(m).ok());
  // K0..K6 and R1 were first seen ten days ago; K7 just now.
  ASSERT_TRUE((*sql_)("UPDATE dedupe_keys SET seen_at = now() - interval '10 days' "
                      "WHERE key <> 'K7'")
                  .ok());
  auto dup = insert(message("m", {destA_}, "K1"));
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ(dup->status, MessageStatus::Duplicate);

  // A 7-day window for the interface, 49 days for interfaces not listed.
  auto n = run<int64_t>([&](auto cb) {
    retention_->purgeDedupeKeys({{iface_, 7 * 24 * 3600}}, 49 * 24 * 3600, cb);
  });
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ(*n, 7);  // in batches of 3
  EXPECT_EQ(scalar("SELECT count(*) FROM dedupe_keys WHERE interface_id = $1",
                   {std::to_string(iface_)}),
            1);
  EXPECT_EQ(scalar("SELECT count(*) FROM dedupe_keys WHERE interface_id = $1",
                   {std::to_string(*other)}),
            1);
  auto again = insert(message("m", {destA_}, "K1"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, MessageStatus::Pending);
  auto recent = insert(message("m", {destA_}, "K7"));
  ASSERT_TRUE(recent.ok());
  EXPECT_EQ(recent->status, MessageStatus::Duplicate);

  // Interfaces not listed go after their own, longer window.
  auto others = run<int64_t>(
      [&](auto cb) { retention_->purgeDedupeKeys({{iface_, 7 * 24 * 3600}}, 3600, cb); });
  ASSERT_TRUE(others.ok());
  EXPECT_EQ(*others, 1);
}

TEST_F(RetentionTest, InterfacesSharingAWindowArePurgedTogetherAndEachWindowKeepsItsOwn) {
  // Interfaces of one window go in one statement (and its batches of 3).
  auto second = run<int64_t>([&](auto cb) { store_->ensureInterface("second", cb); });
  auto longer = run<int64_t>([&](auto cb) { store_->ensureInterface("longer", cb); });
  ASSERT_TRUE(second.ok() && longer.ok());
  for (int64_t id : {iface_, *second, *longer})
    for (int i = 0; i < 4; ++i) {
      NewMessage m = message("m", {}, "K" + std::to_string(i));
      m.interfaceId = id;
      ASSERT_TRUE(insert(m).ok());
    }
  ASSERT_TRUE((*sql_)("UPDATE dedupe_keys SET seen_at = now() - interval '10 days'").ok());
  const int64_t week = 7 * 24 * 3600, month = 30 * 24 * 3600;
  auto n = run<int64_t>([&](auto cb) {
    retention_->purgeDedupeKeys({{iface_, week}, {*second, week}, {*longer, month}}, month, cb);
  });
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ(*n, 8);
  for (auto [id, left] : {std::pair{iface_, 0}, {*second, 0}, {*longer, 4}})
    EXPECT_EQ(
        scalar("SELECT count(*) FROM dedupe_keys WHERE interface_id = $1", {std::to_string(id)}),
        left);
}

TEST_F(RetentionTest, StoredMessagesFollowTheirInterfacesNewTierAndWhatItNoLongerKeepsGoes) {
  // Only the 7w tier's weeks: the 1w days the messages move to are made by
  // the move.
  for (const char* t : {"messages", "deliveries"})
    ASSERT_EQ(text(std::string("SELECT created FROM ductus_ensure_partitions('") + t +
                       "', 49::int2, $1::date, 20, 2000)",
                   {day(-20)})
                  .empty(),
              false);
  storeOld(49, 20, 3, 1);  // sent 20 days ago: past 1w, deleted
  storeOld(49, 2, 4, 1);   // sent 2 days ago: moves
  storeOld(49, 2, 2, 0);   // pending: left until finished
  storeOld(49, 20, 2, 3);  // quarantined 20 days ago, kept: stays
  storeOld(49, 2, 1, 3);   // quarantined 2 days ago: moves
  auto apply = [&](Tier tier) {
    return run<TierMoves>([&](auto cb) {
      retention_->applyTiersToStored({StoredTier{iface_, tier, false}}, cb);
    });
  };
  auto r = apply(Tier::Week1);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->moved, 5);
  EXPECT_EQ(r->deleted, 3);
  EXPECT_TRUE(exists("messages_t7_" + compact(day(-2))));
  // Not a day the next run would only drop again.
  EXPECT_FALSE(exists("messages_t7_" + compact(day(-10))));
  EXPECT_EQ(scalar("SELECT count(*) FROM messages WHERE tier = 7"), 5);
  EXPECT_EQ(scalar("SELECT count(*) FROM deliveries WHERE tier = 7"), 5);
  EXPECT_EQ(text("SELECT string_agg(status::text, ',' ORDER BY status) FROM messages WHERE "
                 "tier = 49"),
            "0,0,3,3");
  EXPECT_EQ(scalar("SELECT count(*) FROM messages"), 9);
  EXPECT_EQ(split(), 0);

  // Finished since: they follow at the next run.
  ASSERT_TRUE((*sql_)("UPDATE deliveries SET status = 1 WHERE status = 0").ok());
  ASSERT_TRUE((*sql_)("UPDATE messages SET status = 1 WHERE status = 0").ok());
  auto again = apply(Tier::Week1);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->moved, 2);
  EXPECT_EQ(again->deleted, 0);
  // Lengthened again: everything within 7w moves back, nothing goes.
  auto longer = apply(Tier::Week7);
  ASSERT_TRUE(longer.ok()) << longer.error().message;
  EXPECT_EQ(longer->moved, 7);
  EXPECT_EQ(longer->deleted, 0);
  EXPECT_EQ(scalar("SELECT count(*) FROM messages WHERE tier = 49"), 9);
  EXPECT_EQ(split(), 0);
  // A purged interface's quarantined messages past the window go too.
  auto purged = run<TierMoves>([&](auto cb) {
    retention_->applyTiersToStored({StoredTier{iface_, Tier::Week1, true}}, cb);
  });
  ASSERT_TRUE(purged.ok()) << purged.error().message;
  EXPECT_EQ(purged->deleted, 2);
  EXPECT_EQ(purged->moved, 7);
}

}  // namespace
}  // namespace ductus::store::test
