// Schedules in a real engine (intake/schedule_source.h): cron runs missed
// while the engine was down collapse into one run at start, which names the
// last run as `previous`; a run is skipped while the previous one is still
// pending, and the schedule carries on once it is delivered.
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "tests/e2e/paths_support.h"
#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/mllp_receiver.h"
#include "tests/support/test_database.h"

namespace ductus::test {
namespace {

using namespace std::chrono_literals;

TEST(EngineSchedule, CronRunsMissedWhileTheEngineWasDownCollapseIntoOneRunAtStart) {
  TestDatabase db;
  TempProject project({
      {"ductus.yaml", engineYaml()},
      // New Year at midnight: never due while the test runs.
      {"interfaces/tick/interface.yaml",
       "source:\n  schedule: { cron: \"0 0 1 1 *\" }\nformat: json\n"
       "destination:\n  file: { path: out/ }\n  output: json\n"},
      {"interfaces/tick/transform.js", "export function transform(m) { return m; }\n"},
  });
  EngineProcess engine(project.root(), db.url());
  // A first start with no history waits for the cron's time: nothing runs.
  ASSERT_TRUE(engine.start());
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "0");

  // The last run was on 2020-01-01: six New Years were missed since.
  const std::string previous = "1577836800000";  // 2020-01-01T00:00:00Z
  db.value("INSERT INTO source_state (interface_id, key, value) SELECT id, 'schedule', "
           "jsonb_build_object('previous', $1::bigint) FROM interfaces WHERE name = 'tick'",
           {previous});
  ASSERT_EQ(db.value("SELECT count(*) FROM source_state"), "1");
  ASSERT_TRUE(engine.start());
  ASSERT_TRUE(waitFor([&] { return db.value("SELECT count(*) FROM messages") == "1"; }, 30s))
      << engine.log();
  std::string payload = db.value("SELECT convert_from(payload, 'UTF8') FROM messages");
  EXPECT_NE(payload.find("\"previous\":\"2020-01-01T00:00:00Z\""), std::string::npos) << payload;
  EXPECT_EQ(payload.find("\"due\":\"2020-"), std::string::npos) << payload;
  // The state moved on to this run: the next start does not run it again.
  EXPECT_GT(std::stoll(db.value("SELECT value->>'previous' FROM source_state")),
            std::stoll(previous));
  ASSERT_TRUE(waitFor([&] { return db.value("SELECT status FROM messages") == "1"; }, 30s))
      << engine.log();
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
  ASSERT_TRUE(engine.start());
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "1") << "one run for all the missed ones";
}

TEST(EngineSchedule, ARunIsSkippedWhileThePreviousOneIsPendingAndTheScheduleCarriesOn) {
  TestDatabase db;
  std::atomic<bool> accept{false};
  MllpReceiver receiver([&](const std::string&, int) { return accept ? "AA" : "AE"; });
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/tick/interface.yaml",
       "source:\n  schedule: { every: 1s }\nformat: json\n"
       "destination:\n  mllp: { host: 127.0.0.1, port: " +
           std::to_string(receiver.port()) + " }\n  output: hl7v2\n"},
      // The run record as an HL7 message whose MSH-10 is the run's due time.
      {"interfaces/tick/transform.js",
       "export function transform(run) {\n"
       "  return 'MSH|^~\\\\&|T|T|R|R|20260101000000||ADT^A01|' + run.due + '|P|2.5\\r';\n"
       "}\n"},
  });
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  const std::string skipped = "skipped, the previous run is still pending";
  ASSERT_TRUE(waitFor([&] { return logCount(engine, skipped) >= 2; }, 30s)) << engine.log();
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "1");
  const std::string firstDue =
      db.value("SELECT convert_from(payload, 'UTF8')::jsonb->>'due' FROM messages");

  // Once the first run is delivered, the next one runs, after the first.
  accept = true;
  ASSERT_TRUE(waitFor([&] { return std::stoll(db.value("SELECT count(*) FROM messages")) >= 2; },
                      60s))
      << engine.log();
  EXPECT_EQ(db.value("SELECT convert_from(payload, 'UTF8')::jsonb->>'previous' FROM messages "
                     "ORDER BY id LIMIT 1 OFFSET 1"),
            firstDue);
  EXPECT_EQ(db.value("SELECT status FROM messages ORDER BY id LIMIT 1"), "1");
  ASSERT_FALSE(receiver.accepted().empty());
  EXPECT_EQ(receiver.accepted().front(), firstDue);
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

}  // namespace
}  // namespace ductus::test
