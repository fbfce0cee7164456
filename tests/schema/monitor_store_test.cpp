// What monitoring keeps in PostgreSQL (migration 0010), against a real
// cluster: last activity saved in two statements whatever the count, times
// that never move back, baselines with gaps; the queue probes and the index
// they read; an alert step's compare-and-set between two engines, the
// outbox's claims and leases, an operator's acknowledge and silence with
// their audit rows, and the purge of history.
#include <gtest/gtest.h>

#include <chrono>
#include <set>

#include "common/text.h"
#include "schema/activity_store.h"
#include "schema/alert_store.h"
#include "schema/queue_probes.h"
#include "tests/schema/store_fixture.h"

namespace ductus::store::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::system_clock;

// A moment with whole microseconds (what the database keeps).
Clock::time_point at(int64_t secondsAfter2026) {
  return Clock::time_point(std::chrono::seconds(1767225600 + secondsAfter2026));
}

class MonitorStore : public StoreTest {
 protected:
  PgPool& pool() { return store_->sharedConnections(); }

  Status save(ActivityChanges c) {
    return await<bool>(
               &loop_,
               [&](auto cb) {
                 saveActivity(pool(), std::move(c), [cb](Status s) {
                   if (!s) return cb(s.error());
                   cb(true);
                 });
               }).ok()
               ? Status{}
               : Status{Error{"save failed"}};
  }
  ActivityRows load() {
    auto r = run<ActivityRows>([&](auto cb) { loadActivity(pool(), cb); });
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r ? *r : ActivityRows{};
  }
  // Counts INSERT statements (not rows) on the two activity tables.
  void countStatements() {
    ASSERT_TRUE((*sql_)("CREATE TABLE stmt_count (n int NOT NULL)").ok());
    ASSERT_TRUE((*sql_)("CREATE FUNCTION count_stmt() RETURNS trigger LANGUAGE plpgsql AS "
                        "$$BEGIN INSERT INTO stmt_count VALUES (1); RETURN NULL; END$$")
                    .ok());
    for (auto t : {"interface_activity", "destination_activity"})
      ASSERT_TRUE((*sql_)(std::string("CREATE TRIGGER count_stmt AFTER INSERT ON ") + t +
                          " FOR EACH STATEMENT EXECUTE FUNCTION count_stmt()")
                      .ok());
  }
};

// ---- activity -------------------------------------------------------------------

TEST_F(MonitorStore, AThousandInterfacesAreSavedInTwoStatements) {
  std::vector<int64_t> ids;
  for (int i = 0; i < 1001; ++i) {
    auto id =
        run<int64_t>([&](auto cb) { store_->ensureInterface("if-" + std::to_string(i), cb); });
    ASSERT_TRUE(id.ok()) << id.error().message;
    ids.push_back(*id);
  }
  countStatements();
  ActivityChanges c;
  for (size_t i = 0; i < ids.size(); ++i)
    c.interfaces.push_back({ids[i], at(static_cast<int64_t>(i)), at(-100)});
  c.destinations.push_back({destA_, at(5), at(6), "refused \"x\" \\ y", {}, {}});
  c.destinations.push_back({destB_, at(7), std::nullopt, "", {}, {}});
  ASSERT_TRUE(save(c).ok());
  EXPECT_EQ(scalar("SELECT count(*) FROM stmt_count"), 2);
  EXPECT_EQ(scalar("SELECT count(*) FROM interface_activity"), 1001);

  auto rows = load();
  ASSERT_EQ(rows.interfaces.size(), 1001u);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(rows.interfaces[i].interfaceId, ids[i]);
    EXPECT_EQ(rows.interfaces[i].lastReceived, at(static_cast<int64_t>(i)));
    EXPECT_EQ(rows.interfaces[i].watchedSince, at(-100));
  }
  ASSERT_EQ(rows.destinations.size(), 2u);
  EXPECT_EQ(rows.destinations[0].lastSent, at(5));
  EXPECT_EQ(rows.destinations[0].lastError, at(6));
  EXPECT_EQ(rows.destinations[0].lastErrorText, "refused \"x\" \\ y");
  EXPECT_FALSE(rows.destinations[1].lastError);
  EXPECT_TRUE(rows.destinations[1].baselineIn.empty());

  // Nothing changed: no statement at all.
  ASSERT_TRUE(save({}).ok());
  EXPECT_EQ(scalar("SELECT count(*) FROM stmt_count"), 2);
}

TEST_F(MonitorStore, AnOlderSaveAfterANewerOneLeavesTheNewer) {
  ActivityChanges newer;
  newer.interfaces.push_back({iface_, at(100), at(10)});
  newer.destinations.push_back({destA_, at(100), at(90), "newer error", {}, {}});
  ASSERT_TRUE(save(newer).ok());
  ActivityChanges older;
  older.interfaces.push_back({iface_, at(50), at(20)});
  older.destinations.push_back({destA_, at(50), at(40), "older error", {}, {}});
  ASSERT_TRUE(save(older).ok());
  auto rows = load();
  ASSERT_EQ(rows.interfaces.size(), 1u);
  EXPECT_EQ(rows.interfaces[0].lastReceived, at(100));
  EXPECT_EQ(rows.interfaces[0].watchedSince, at(10));
  ASSERT_EQ(rows.destinations.size(), 1u);
  EXPECT_EQ(rows.destinations[0].lastSent, at(100));
  EXPECT_EQ(rows.destinations[0].lastError, at(90));
  EXPECT_EQ(rows.destinations[0].lastErrorText, "newer error");

  // An earlier first watch wins; a later error brings its text.
  ActivityChanges later;
  later.interfaces.push_back({iface_, std::nullopt, at(5)});
  later.destinations.push_back({destA_, std::nullopt, at(200), "latest", {}, {}});
  ASSERT_TRUE(save(later).ok());
  rows = load();
  EXPECT_EQ(rows.interfaces[0].lastReceived, at(100));
  EXPECT_EQ(rows.interfaces[0].watchedSince, at(5));
  EXPECT_EQ(rows.destinations[0].lastSent, at(100));
  EXPECT_EQ(rows.destinations[0].lastError, at(200));
  EXPECT_EQ(rows.destinations[0].lastErrorText, "latest");
}

TEST_F(MonitorStore, BaselinesRoundTripWithTheirGapsAndAreKeptWhenNotGiven) {
  Baseline in(168), send(168);
  in[0] = 1.5;
  in[3] = 0.1;
  in[167] = 12345.678901;
  send[5] = 250.0;
  ActivityChanges c;
  c.destinations.push_back({destA_, at(1), std::nullopt, "", in, send});
  ASSERT_TRUE(save(c).ok());
  auto rows = load();
  ASSERT_EQ(rows.destinations.size(), 1u);
  EXPECT_EQ(rows.destinations[0].baselineIn, in);
  EXPECT_EQ(rows.destinations[0].baselineSendMs, send);

  // A save without baselines keeps them; one with replaces them.
  ActivityChanges times;
  times.destinations.push_back({destA_, at(2), std::nullopt, "", {}, {}});
  ASSERT_TRUE(save(times).ok());
  rows = load();
  EXPECT_EQ(rows.destinations[0].baselineIn, in);
  in[1] = 2.0;
  ActivityChanges again;
  again.destinations.push_back({destA_, std::nullopt, std::nullopt, "", in, {}});
  ASSERT_TRUE(save(again).ok());
  rows = load();
  EXPECT_EQ(rows.destinations[0].baselineIn, in);
  EXPECT_EQ(rows.destinations[0].baselineSendMs, send);
  EXPECT_EQ(rows.destinations[0].lastSent, at(2));
}

TEST_F(MonitorStore, AnErrorsTextIsStoredAsBoundedDatabaseText) {
  std::string longText = std::string("x\0y", 3);
  for (int i = 0; i < 800; ++i) longText += "\xc3\xa9";  // é: two bytes each
  ActivityChanges c;
  c.destinations.push_back({destA_, std::nullopt, at(1), longText, {}, {}});
  ASSERT_TRUE(save(c).ok());
  auto rows = load();
  ASSERT_EQ(rows.destinations.size(), 1u);
  const auto& text = rows.destinations[0].lastErrorText;
  EXPECT_LE(text.size(), kMaxErrorTextBytes);
  EXPECT_GT(text.size(), kMaxErrorTextBytes - 2);
  EXPECT_EQ(text.rfind("x\\X00\\y", 0), 0u) << text.substr(0, 20);
  EXPECT_TRUE(isUtf8(text));
}

// ---- queue probes -----------------------------------------------------------------

TEST_F(MonitorStore, TheOldestWaitingMessageIsOneIndexProbePerDestination) {
  auto m1 = insert(message("m1", {destA_, destB_}));
  auto m2 = insert(message("m2", {destA_}));
  ASSERT_TRUE(m1.ok() && m2.ok());
  // m1 sent to A: A's oldest waiting is m2.
  ASSERT_TRUE((*sql_)("UPDATE deliveries SET status = 1 WHERE message_id = $1::int8 AND "
                      "destination_id = $2::int8",
                      {std::to_string(m1->ref.id), std::to_string(destA_)})
                  .ok());
  auto r = run<std::map<int64_t, QueueTime>>([&](auto cb) {
    oldestWaiting(pool(), {destA_, destB_, destC_}, cb);
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  auto receivedOf = [&](int64_t id) {
    return scalar(
        "SELECT (extract(epoch FROM received_at) * 1000000)::int8 FROM messages "
        "WHERE id = $1::int8",
        {std::to_string(id)});
  };
  auto micros = [](QueueTime t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  };
  EXPECT_EQ(micros(r->at(destA_)), receivedOf(m2->ref.id));
  EXPECT_EQ(micros(r->at(destB_)), receivedOf(m1->ref.id));
  EXPECT_FALSE(r->count(destC_));

  ASSERT_TRUE((*sql_)("ANALYZE deliveries").ok());
  // The tables are tiny: without this the planner reads them whole.
  ASSERT_TRUE((*sql_)("SET enable_seqscan = off").ok());
  std::string probe = oldestWaitingSql();
  probe.replace(probe.find("$1::int8[]"), 10, "'{1,2}'::int8[]");
  auto plan = (*sql_)("EXPLAIN " + probe);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  std::string text;
  for (int i = 0; i < plan->rows(); ++i) text += std::string(plan->text(i, 0)) + "\n";
  EXPECT_NE(text.find("deliveries_t7"), std::string::npos) << text;
  EXPECT_NE(text.find("Limit"), std::string::npos) << text;
  // Each partition's deliveries_queue, merged in message order, no sort.
  EXPECT_NE(text.find("Merge Append"), std::string::npos) << text;
  EXPECT_NE(text.find("destination_id_message_id_partition"), std::string::npos) << text;
  EXPECT_EQ(text.find("-> Sort"), std::string::npos) << text;
  EXPECT_EQ(text.find("Seq Scan on deliveries"), std::string::npos) << text;
}

TEST_F(MonitorStore, LanesComeMostWaitingFirstWithTheirFirstMessage) {
  auto keyed = [&](std::string payload, int32_t lane, std::string key) {
    auto m = message(std::move(payload), {destA_}, std::nullopt, lane);
    m.columns.keyValue = std::move(key);
    auto r = insert(std::move(m));
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r ? r->ref.id : 0;
  };
  int64_t first3 = keyed("a", 3, "PID-3");
  keyed("b", 3, "PID-3");
  keyed("c", 3, "PID-3");
  int64_t first7 = keyed("d", 7, "PID-7");
  keyed("e", 9, "PID-9");
  ASSERT_TRUE((*sql_)("UPDATE deliveries SET attempts = 4, last_error = 'refused' "
                      "WHERE message_id = $1::int8",
                      {std::to_string(first3)})
                  .ok());
  auto r = run<std::vector<LaneRow>>([&](auto cb) { lanes(pool(), destA_, 2, cb); });
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].lane, 3);
  EXPECT_EQ((*r)[0].waiting, 3);
  EXPECT_EQ((*r)[0].firstMessageId, first3);
  EXPECT_EQ((*r)[0].key, "PID-3");
  EXPECT_EQ((*r)[0].attempts, 4);
  EXPECT_EQ((*r)[0].lastError, "refused");
  EXPECT_GT((*r)[0].receivedAt, QueueTime{});
  EXPECT_EQ((*r)[1].lane, 7);  // ties by lane
  EXPECT_EQ((*r)[1].firstMessageId, first7);
  EXPECT_EQ((*r)[1].lastError, "");
  // A limit below one reads one lane.
  auto one = run<std::vector<LaneRow>>([&](auto cb) { lanes(pool(), destA_, 0, cb); });
  ASSERT_TRUE(one.ok()) << one.error().message;
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].lane, 3);
  auto none = run<std::vector<LaneRow>>([&](auto cb) { lanes(pool(), destC_, 10, cb); });
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// ---- alerts -----------------------------------------------------------------------

monitor::AlertState firing(const std::string& interface, const std::string& destination) {
  monitor::AlertState a;
  a.subject.interface = interface;
  a.subject.destination = destination;
  a.phase = monitor::Phase::Firing;
  a.state = monitor::State::Stalled;
  a.severity = monitor::Severity::Critical;
  a.openedAt = at(10);
  a.changedAt = at(10);
  a.remindAt = at(3610);
  a.told = true;
  return a;
}

OutboxRow mail(std::string subject, Clock::time_point due = {}) {
  OutboxRow r;
  r.channel = "oncall";
  r.kind = "email";
  r.target = "a@example.org,b@example.org";
  r.subject = std::move(subject);
  r.body = "text";
  r.due = due;
  return r;
}

class Alerts : public MonitorStore {
 protected:
  void SetUp() override {
    MonitorStore::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE((*sql_)("CREATE TABLE action_log (what text NOT NULL)").ok());
  }
  Result<bool> apply(AlertWrite w) {
    return run<bool>([&](auto cb) { applyStep(pool(), std::move(w), cb); });
  }
  std::vector<monitor::AlertState> alerts() {
    auto r = run<std::vector<monitor::AlertState>>([&](auto cb) { loadAlerts(pool(), cb); });
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r ? *r : std::vector<monitor::AlertState>{};
  }
  // Both calls started before either answers: two engines at once.
  std::pair<Result<bool>, Result<bool>> applyTwice(AlertWrite a, AlertWrite b) {
    std::optional<Result<bool>> ra, rb;
    applyStep(pool(), std::move(a), [&](Result<bool> r) { ra = std::move(r); });
    applyStep(pool(), std::move(b), [&](Result<bool> r) { rb = std::move(r); });
    while ((!ra || !rb) && uv_run(&loop_, UV_RUN_ONCE)) {
    }
    if (!ra || !rb) return {Error{"no answer"}, Error{"no answer"}};
    return {std::move(*ra), std::move(*rb)};
  }
  AlertWrite fire() {
    AlertWrite w;
    w.after = firing("adt-in", "lab");
    w.change = "fired";
    w.reason = "nothing sent for 10 minutes";
    w.notifications.push_back(mail("[critical] adt-in/lab stalled"));
    return w;
  }
  AuditStatement<monitor::AlertState> logRow() {
    return [](const monitor::AlertState& a) -> Result<SqlStatement> {
      return SqlStatement{"INSERT INTO action_log VALUES ($1)",
                          {a.subject.key() + " by " + a.acknowledgedBy + a.silencedBy}};
    };
  }
};

TEST_F(Alerts, ANewAlertIsStoredWithItsEventAndNotificationsAndReadBack) {
  auto r = apply(fire());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(*r);
  auto all = alerts();
  ASSERT_EQ(all.size(), 1u);
  auto& a = all[0];
  EXPECT_GT(a.id, 0);
  EXPECT_EQ(a.subject.key(), "adt-in/lab");
  EXPECT_EQ(a.phase, monitor::Phase::Firing);
  EXPECT_EQ(a.state, monitor::State::Stalled);
  EXPECT_EQ(a.severity, monitor::Severity::Critical);
  EXPECT_EQ(a.openedAt, at(10));
  EXPECT_EQ(a.remindAt, at(3610));
  EXPECT_FALSE(a.goodSince);
  EXPECT_TRUE(a.told);
  EXPECT_EQ(a.rev, 1);
  EXPECT_EQ(text("SELECT change || ':' || state || ':' || reason FROM alert_events"),
            "fired:stalled:nothing sent for 10 minutes");
  EXPECT_EQ(scalar("SELECT count(*) FROM alert_deliveries WHERE event_id IS NOT NULL"), 1);
  // The certificate's key.
  AlertWrite c;
  c.after.subject.certificate = "server";
  c.after.phase = monitor::Phase::Firing;
  c.after.state = monitor::State::Expiring;
  c.after.stage = 2;
  c.change = "fired";
  ASSERT_TRUE(apply(c).ok());
  all = alerts();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].subject.key(), "certificate:server");
  EXPECT_EQ(all[1].stage, 2);
}

TEST_F(Alerts, TwoEnginesMakingTheSameStepApplyItOnce) {
  // A new subject: one insert wins.
  auto [a, b] = applyTwice(fire(), fire());
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_NE(*a, *b);
  EXPECT_EQ(scalar("SELECT count(*) FROM alert_state"), 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM alert_events"), 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM alert_deliveries"), 1);

  // A stored one: the compare-and-set on rev lets one recovery through.
  auto before = alerts().at(0);
  auto recover = [&] {
    AlertWrite w;
    w.before = before;
    w.after = before;
    w.after.phase = monitor::Phase::Ok;
    w.after.state = monitor::State::Ok;
    w.change = "recovered";
    w.cancelPending = true;
    w.notifications.push_back(mail("[ok] adt-in/lab recovered"));
    return w;
  };
  auto [c, d] = applyTwice(recover(), recover());
  ASSERT_TRUE(c.ok() && d.ok());
  EXPECT_NE(*c, *d);
  auto after = alerts().at(0);
  EXPECT_EQ(after.rev, before.rev + 1);
  EXPECT_EQ(after.phase, monitor::Phase::Ok);
  // The firing's unsent mail given up as recovered; the recovery's own waits.
  EXPECT_EQ(text("SELECT string_agg(subject || ':' || given_up || ':' || "
                 "coalesce(last_error, ''), ' ' ORDER BY id) FROM alert_deliveries"),
            "[critical] adt-in/lab stalled:true:recovered [ok] adt-in/lab recovered:false:");
  // A step from the old rev is refused.
  auto stale = apply(recover());
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(*stale);
}

TEST_F(Alerts, TwoClaimersNeverGetTheSameRowAndAnExpiredLeaseIsClaimableAgain) {
  auto w = fire();
  for (int i = 0; i < 9; ++i) w.notifications.push_back(mail("m" + std::to_string(i)));
  w.notifications.push_back(mail("later", Clock::now() + 1h));
  ASSERT_TRUE(apply(w).ok());
  std::optional<Result<std::vector<OutboxRow>>> ra, rb;
  claimDue(pool(), 6, 120s, [&](auto r) { ra = std::move(r); });
  claimDue(pool(), 6, 120s, [&](auto r) { rb = std::move(r); });
  while ((!ra || !rb) && uv_run(&loop_, UV_RUN_ONCE)) {
  }
  ASSERT_TRUE(ra && rb && ra->ok() && rb->ok());
  std::set<int64_t> ids;
  for (auto* r : {&*ra, &*rb})
    for (auto& row : **r) {
      EXPECT_TRUE(ids.insert(row.id).second) << "claimed twice: " << row.id;
      EXPECT_EQ(row.attempts, 1);
      EXPECT_EQ(row.kind, "email");
      EXPECT_GT(row.alertId, 0);
    }
  EXPECT_EQ(ids.size(), 10u);  // every due row, not the one due later

  // Leased: nothing more to claim. Sent and failed rows leave the claim.
  auto again = run<std::vector<OutboxRow>>([&](auto cb) { claimDue(pool(), 50, 120s, cb); });
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
  std::vector<int64_t> list(ids.begin(), ids.end());
  auto status = [&](std::function<void(std::function<void(Status)>)> f) {
    return await<bool>(&loop_, [&](auto cb) {
      f([cb](Status s) {
        if (!s) return cb(s.error());
        cb(true);
      });
    });
  };
  ASSERT_TRUE(status([&](auto cb) { markSent(pool(), list[0], cb); }).ok());
  ASSERT_TRUE(status([&](auto cb) {
                markFailed(pool(), list[1], "refused", Clock::now() - 1s, false, cb);
              }).ok());
  ASSERT_TRUE(status([&](auto cb) {
                markFailed(pool(), list[2], "refused", Clock::now() - 1s, true, cb);
              }).ok());
  // The lease of the rest runs out.
  ASSERT_TRUE((*sql_)("UPDATE alert_deliveries SET lease_until = now() - interval '1 second' "
                      "WHERE id <> ALL($1::int8[])",
                      {"{" + std::to_string(list[0]) + "," + std::to_string(list[1]) + "," +
                       std::to_string(list[2]) + "}"})
                  .ok());
  again = run<std::vector<OutboxRow>>([&](auto cb) { claimDue(pool(), 50, 120s, cb); });
  ASSERT_TRUE(again.ok());
  // 7 whose lease ran out, the failed one due again; not the sent, given up or later ones.
  EXPECT_EQ(again->size(), 8u);
  for (auto& r : *again) {
    EXPECT_NE(r.id, list[0]);
    EXPECT_NE(r.id, list[2]);
    EXPECT_EQ(r.attempts, 2);
    if (r.id == list[1]) {
      EXPECT_EQ(r.lastError, "refused");
    }
  }
  // A server's long answer is kept bounded.
  ASSERT_TRUE(status([&](auto cb) {
                markFailed(pool(), list[1], std::string(3000, 'e'), Clock::now(), false, cb);
              }).ok());
  EXPECT_EQ(scalar("SELECT length(last_error) FROM alert_deliveries WHERE id = $1::int8",
                   {std::to_string(list[1])}),
            static_cast<int64_t>(kMaxOutboxErrorBytes));
}

TEST_F(Alerts, AnAcknowledgeAndASilenceAreWrittenWithTheirAuditRow) {
  ASSERT_TRUE(apply(fire()).ok());
  int64_t id = alerts().at(0).id;
  auto acked = run<monitor::AlertState>(
      [&](auto cb) { acknowledgeAlert(pool(), id, "olga", logRow(), cb); });
  ASSERT_TRUE(acked.ok()) << acked.error().message;
  EXPECT_EQ(acked->acknowledgedBy, "olga");
  EXPECT_TRUE(acked->acknowledgedAt);
  EXPECT_FALSE(acked->remindAt);
  EXPECT_EQ(acked->rev, 2);
  EXPECT_EQ(text("SELECT string_agg(what, ',') FROM action_log"), "adt-in/lab by olga");

  auto until = at(100000);
  auto silenced = run<monitor::AlertState>(
      [&](auto cb) { silenceAlert(pool(), id, until, "ivan", logRow(), cb); });
  ASSERT_TRUE(silenced.ok()) << silenced.error().message;
  EXPECT_EQ(silenced->silencedUntil, until);
  EXPECT_EQ(silenced->silencedBy, "ivan");
  EXPECT_EQ(scalar("SELECT count(*) FROM alert_deliveries WHERE NOT given_up"), 0);
  EXPECT_EQ(text("SELECT string_agg(change, ',' ORDER BY id) FROM alert_events"),
            "fired,acknowledged,silenced");

  // A failing audit row rolls the change back.
  auto failing = [](const monitor::AlertState&) -> Result<SqlStatement> {
    return SqlStatement{"INSERT INTO no_such_audit_table VALUES (1)", {}};
  };
  auto refused = run<monitor::AlertState>(
      [&](auto cb) { acknowledgeAlert(pool(), id, "mallory", failing, cb); });
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(alerts().at(0).acknowledgedBy, "olga");

  // No such alert; one that is not firing.
  auto none = run<monitor::AlertState>(
      [&](auto cb) { acknowledgeAlert(pool(), id + 100, "olga", logRow(), cb); });
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().kind, ErrorKind::NotFound);
  ASSERT_TRUE((*sql_)("UPDATE alert_state SET phase = 'ok'").ok());
  auto ok = run<monitor::AlertState>(
      [&](auto cb) { silenceAlert(pool(), id, until, "olga", logRow(), cb); });
  ASSERT_FALSE(ok.ok());
  EXPECT_EQ(ok.error().kind, ErrorKind::Conflict);
  EXPECT_EQ(scalar("SELECT count(*) FROM action_log"), 2);
}

TEST_F(Alerts, TheListHasTheFiringFirstWithTheirLastEventsAndThePurgeKeepsTheRecent) {
  auto w = fire();
  ASSERT_TRUE(apply(w).ok());
  AlertWrite ok;
  ok.after.subject.interface = "quiet-one";
  ok.after.changedAt = at(5000);
  ok.change = "recovered";
  ASSERT_TRUE(apply(ok).ok());
  auto firingOne = alerts().at(0);
  for (int i = 0; i < 12; ++i) {
    AlertWrite again;
    again.before = firingOne;
    again.after = firingOne;
    again.after.severity = i % 2 ? monitor::Severity::Critical : monitor::Severity::Warning;
    again.change = "escalated";
    again.reason = "r" + std::to_string(i);
    ASSERT_TRUE(apply(again).ok());
    firingOne = alerts().at(0);
  }
  auto list = run<std::vector<AlertListItem>>([&](auto cb) { listAlerts(pool(), cb); });
  ASSERT_TRUE(list.ok()) << list.error().message;
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].alert.subject.key(), "adt-in/lab");
  ASSERT_EQ((*list)[0].events.size(), static_cast<size_t>(kEventsPerAlert));
  EXPECT_EQ((*list)[0].events[0].reason, "r11");
  EXPECT_EQ((*list)[1].alert.subject.key(), "quiet-one");
  ASSERT_EQ((*list)[1].events.size(), 1u);
  EXPECT_EQ((*list)[1].events[0].change, "recovered");
  EXPECT_GT((*list)[1].events[0].at, Clock::now() - 1h);

  // History: the old events and the sent mail go; the pending mail stays.
  ASSERT_TRUE((*sql_)("UPDATE alert_deliveries SET sent_at = now() - interval '40 days'").ok());
  ASSERT_TRUE((*sql_)("UPDATE alert_events SET at = now() - interval '40 days'").ok());
  ASSERT_TRUE(apply([&] {
                AlertWrite n;
                n.before = firingOne;
                n.after = firingOne;
                n.change = "reminded";
                n.notifications.push_back(mail("reminder"));
                return n;
              }())
                  .ok());
  auto gone = run<int64_t>([&](auto cb) { purgeAlerts(pool(), std::chrono::hours(24 * 30), cb); });
  ASSERT_TRUE(gone.ok()) << gone.error().message;
  // 1 sent mail + every event but the reminder's (at now): 14.
  EXPECT_EQ(*gone, 15);
  EXPECT_EQ(scalar("SELECT count(*) FROM alert_deliveries"), 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM alert_events"), 1);

  // The list is bounded, the firing one still first.
  ASSERT_TRUE((*sql_)("INSERT INTO alert_state (subject, interface_name, phase, state, severity, "
                      "changed_at) SELECT 'if-' || i, 'if-' || i, 'ok', 'ok', 'info', now() "
                      "FROM generate_series(1, 600) i")
                  .ok());
  list = run<std::vector<AlertListItem>>([&](auto cb) { listAlerts(pool(), cb); });
  ASSERT_TRUE(list.ok()) << list.error().message;
  ASSERT_EQ(list->size(), static_cast<size_t>(kMaxAlertsListed));
  EXPECT_EQ((*list)[0].alert.subject.key(), "adt-in/lab");
}

}  // namespace
}  // namespace ductus::store::test
