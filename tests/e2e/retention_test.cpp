// Retention in a real engine (issue #22): the job runs 5 s after the start
// and drops a period older than its tier; an interface whose retention is
// shortened between two starts keeps sending its messages to the old tier
// until `ductus retention confirm`, and then the job brings the messages
// stored before to the new tier; `ductus retention` lists tiers and
// partitions; `ductus retention run` runs the job on demand. A pending
// message of an expired period moves to the held area, the period drops,
// and the message is delivered from there, before the newer ones of its
// lane (issue #35).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <string>

#include "tests/support/e2e.h"
#include "tests/support/engine_api.h"
#include "tests/support/engine_process.h"
#include "tests/support/exit_status.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
#include "tests/support/mllp_receiver.h"
#include "tests/support/test_database.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

using namespace std::chrono_literals;

// The adt interface keeping its messages this long.
MllpProject keeping(uint16_t port, const std::string& retention) {
  return {.port = port,
          .settings = "retention: " + retention + "\ndedupe: { key: MSH.10, window: 2d }\n"};
}

// The tier the message with this control id was stored in.
std::string tierOf(TestDatabase& db, const std::string& id) {
  return db.value("SELECT tier FROM messages WHERE split_part(convert_from(payload, 'LATIN1'), "
                  "'|', 10) = $1",
                  {id});
}

void send(uint16_t port, const std::string& id) {
  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto ack = c->exchange(hl7(id));
  ASSERT_TRUE(ack.ok()) << ack.error().message;
  ASSERT_EQ(readAck(*ack).code, "AA");
}

ChildOutput ductus(std::vector<std::string> args, const std::string& url) {
  args.insert(args.begin(), ductusBinary());
  args.push_back("--database");
  args.push_back(url);
  return runChild(args);
}

TEST(EngineRetention, TheJobDropsOldPeriodsAndAShorterTierWaitsForAConfirmation) {
  TestDatabase db;
  uint16_t port = freePort();
  TempProject project(keeping(port, "7w"));
  const std::string yamlPath = (project.root() / "interfaces/adt/interface.yaml").string();
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  send(port, "A-1");
  EXPECT_EQ(tierOf(db, "A-1"), "49");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();

  // A finished 1w message 40 days old, in partitions made by the engine's
  // own function, and a dedupe key older than the interface's window.
  db.value("SELECT ductus_ensure_partitions(t, 7::int2, (now() AT TIME ZONE 'UTC')::date - 40, 0, "
           "2000) FROM unnest(ARRAY['messages', 'deliveries']) t");
  db.value("WITH m AS (INSERT INTO messages (tier, received_at, interface_id, payload, status) "
           "SELECT 7, now() - interval '40 days', id, 'old', 1 FROM interfaces RETURNING id, "
           "received_at) INSERT INTO deliveries (message_id, destination_id, tier, received_at, "
           "status) SELECT m.id, d.id, 7, m.received_at, 1 FROM m, destinations d");
  db.value("UPDATE dedupe_keys SET seen_at = now() - interval '3 days'");
  std::string old = db.value("SELECT to_char((now() AT TIME ZONE 'UTC')::date - 40, 'YYYYMMDD')");
  ASSERT_EQ(db.value("SELECT to_regclass('messages_t7_" + old + "') IS NOT NULL"), "t");

  // Shortened to 1w: the engine says it waits, and keeps the 7w tier.
  { std::ofstream(yamlPath) << keeping(port, "1w").interfaceYaml(); }
  ASSERT_TRUE(engine.start());
  EXPECT_NE(engine.log().find("retention confirm adt"), std::string::npos) << engine.log();
  send(port, "A-2");
  EXPECT_EQ(tierOf(db, "A-2"), "49");
  // 5 s after the start the job drops the old period and purges the key.
  ASSERT_TRUE(waitFor([&] { return engine.log().find("retention: dropped the 1w period") !=
                                   std::string::npos; },
                      30s))
      << engine.log();
  EXPECT_NE(engine.log().find("1 messages, 1 deliveries"), std::string::npos) << engine.log();
  EXPECT_EQ(db.value("SELECT to_regclass('messages_t7_" + old + "') IS NOT NULL"), "f");
  EXPECT_EQ(db.value("SELECT to_regclass('deliveries_t7_" + old + "') IS NOT NULL"), "f");
  ASSERT_TRUE(waitFor([&] { return engine.log().find("purged 1 dedupe keys") != std::string::npos; },
                      10s))
      << engine.log();
  // A-1's key is gone: the same control id is a new message now.
  send(port, "A-1");
  EXPECT_EQ(db.value("SELECT count(*) FROM messages WHERE status <> 4 AND "
                     "split_part(convert_from(payload, 'LATIN1'), '|', 10) = 'A-1'"),
            "2");

  auto listed = ductus({"retention", project.root().string()}, db.url());
  EXPECT_TRUE(exitedWith(listed.exitStatus, 0)) << listed.out;
  EXPECT_NE(listed.out.find("the project says 1w: waiting for `ductus retention confirm adt`"),
            std::string::npos)
      << listed.out;
  // validate --database says the same after its own verdict.
  auto validated = ductus({"validate", project.root().string()}, db.url());
  EXPECT_TRUE(exitedWith(validated.exitStatus, 0)) << validated.out;
  EXPECT_NE(validated.out.find("valid"), std::string::npos) << validated.out;
  EXPECT_NE(validated.out.find("the project says 1w: waiting for `ductus retention confirm adt`"),
            std::string::npos)
      << validated.out;
  auto ran = ductus({"retention", "run", project.root().string()}, db.url());
  EXPECT_TRUE(exitedWith(ran.exitStatus, 0)) << ran.out;
  EXPECT_NE(ran.out.find("nothing has expired"), std::string::npos) << ran.out;
  EXPECT_EQ(engine.terminate(), 0) << engine.log();

  // Confirmed: from the next start on, its messages go to the 1w tier.
  auto confirmed = ductus({"retention", "confirm", "adt", project.root().string()}, db.url());
  EXPECT_TRUE(exitedWith(confirmed.exitStatus, 0)) << confirmed.out;
  EXPECT_NE(confirmed.out.find("confirmed"), std::string::npos) << confirmed.out;
  ASSERT_TRUE(engine.start());
  std::string third = engine.log().substr(engine.log().find("==== run 3"));
  EXPECT_EQ(third.find("retention confirm adt"), std::string::npos) << engine.log();
  send(port, "A-3");
  EXPECT_EQ(tierOf(db, "A-3"), "7");
  // Stored before: the job's run brings them to the new tier (all recent
  // enough for 1w, so none is deleted).
  ASSERT_TRUE(waitFor(
      [&] {
        return engine.log().find(
                   "stored messages moved to their "
                   "interface's new tier") != std::string::npos;
      },
      30s))
      << engine.log();
  EXPECT_EQ(tierOf(db, "A-2"), "7");
  EXPECT_EQ(db.value("SELECT count(*) FROM messages WHERE tier = 49"), "0");
  EXPECT_EQ(db.value("SELECT count(*) FROM messages m JOIN deliveries d ON d.message_id = m.id "
                     "WHERE d.tier <> m.tier"),
            "0");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

TEST(EngineRetention,
     APendingMessageOfAnExpiredPeriodMovesToTheHeldAreaAndIsDeliveredFirstFromThere) {
  TestDatabase db;
  MllpReceiver receiver;
  uint16_t port = freePort(), apiPort = freePort();
  TempProject project(MllpProject{.port = port,
                                  .settings = "retention: 1w\n",
                                  .destination = mllpDestination(receiver.port())});
  EngineProcess engine(project.root(), db.url());
  engine.setExtraArgs({"--api-listen", "127.0.0.1:" + std::to_string(apiPort)});
  ASSERT_TRUE(engine.start()) << engine.log();
  EngineApi api{apiPort, tokenFor(db.url(), "ops", "operator")};
  // The receiver is down for maintenance (paused), and has been for days.
  ASSERT_EQ(api.call("POST", "/api/v1/interfaces/adt/destinations/default/pause",
                     {{"reason", "lab system upgrade"}})
                .status,
            200);
  EXPECT_TRUE(exitedWith(engine.terminate(), 0)) << engine.log();

  // A message ten days old that has waited since: its 1w period expired
  // three days ago.
  db.value(
      "SELECT ductus_ensure_partitions(t, 7::int2, (now() AT TIME ZONE 'UTC')::date - 10, 0, "
      "2000) FROM unnest(ARRAY['messages', 'deliveries']) t");
  db.value(
      "WITH m AS (INSERT INTO messages (tier, received_at, interface_id, payload, status) "
      "SELECT 7, now() - interval '10 days', id, convert_to($1, 'LATIN1'), 0 FROM interfaces "
      "RETURNING id, received_at) INSERT INTO deliveries (message_id, destination_id, tier, "
      "received_at) SELECT m.id, d.id, 7, m.received_at FROM m, destinations d",
      {hl7("OLD-1")});
  const std::string old =
      db.value("SELECT to_char((now() AT TIME ZONE 'UTC')::date - 10, 'YYYYMMDD')");
  ASSERT_TRUE(engine.start()) << engine.log();
  send(port, "NEW-1");

  // 5 s after the start the job moves it and drops the period.
  ASSERT_TRUE(waitFor(
      [&] { return engine.log().find("retention: dropped the 1w period") != std::string::npos; },
      30s))
      << engine.log();
  EXPECT_NE(engine.log().find("1 unfinished messages moved to the held area first"),
            std::string::npos)
      << engine.log();
  EXPECT_EQ(db.value("SELECT to_regclass('messages_t7_" + old + "') IS NOT NULL"), "f");
  EXPECT_EQ(db.value("SELECT to_regclass('deliveries_t7_" + old + "') IS NOT NULL"), "f");
  EXPECT_EQ(tierOf(db, "OLD-1"), "0");
  EXPECT_EQ(db.value("SELECT tier FROM deliveries WHERE status = 0 ORDER BY message_id LIMIT 1"),
            "0");
  auto metrics = api.call("GET", "/api/v1/metrics").body;
  EXPECT_NE(metrics.find("ductus_held_messages{status=\"pending\"} 1"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("ductus_retention_moved_total 1"), std::string::npos) << metrics;
  auto retention = api.get("/api/v1/retention");
  EXPECT_EQ(retention["held"]["pending"], 1) << retention.dump();
  EXPECT_EQ(retention["lastRun"]["moved"], 1) << retention.dump();
  EXPECT_EQ(retention["interfaces"][0]["applied"], "1w") << retention.dump();
  auto listed = ductus({"retention", project.root().string()}, db.url());
  EXPECT_TRUE(exitedWith(listed.exitStatus, 0)) << listed.out;
  EXPECT_NE(listed.out.find("Held area"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find(": 1 pending, 0 quarantined"), std::string::npos) << listed.out;

  // Back: the held message goes first, then the new one.
  ASSERT_EQ(api.call("POST", "/api/v1/interfaces/adt/destinations/default/resume").status, 200);
  EXPECT_TRUE(waitFor([&] { return receiver.accepted().size() == 2; }, 20s)) << engine.log();
  EXPECT_EQ(receiver.accepted(), (std::vector<std::string>{"OLD-1", "NEW-1"}));
  EXPECT_TRUE(
      waitFor([&] { return db.value("SELECT status FROM messages WHERE tier = 0") == "1"; }, 10s));
  EXPECT_EQ(db.value("SELECT count(*) FROM deliveries WHERE tier = 0 AND status = 1"), "1");
  EXPECT_TRUE(exitedWith(engine.terminate(), 0)) << engine.log();
}

}  // namespace
}  // namespace ductus::test
