// Retention in a real engine (issue #22): the job runs 5 s after the start
// and drops a period older than its tier; an interface whose retention is
// shortened between two starts keeps sending its messages to the old tier
// until `ductus retention confirm`; `ductus retention` lists tiers and
// partitions; `ductus retention run` runs the job on demand.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <string>

#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/exit_status.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
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
  // Stored before, stored where it was.
  EXPECT_EQ(tierOf(db, "A-2"), "49");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

}  // namespace
}  // namespace ductus::test
