// The engine's events from a real `ductus run` (issue #36 item 8): an MLLP
// frame without an MSH answered AR, a script that runs away (its worker
// killed and started again), a delivery given up after its retries, and an
// operator's intake stop and start each leave a row in the events table,
// read back through GET /api/v1/event-log with the message's id.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/support/e2e.h"
#include "tests/support/engine_api.h"
#include "tests/support/engine_process.h"
#include "tests/support/exit_status.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
#include "tests/support/test_database.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

std::string ackOf(MllpClient& c, const std::string& msg) {
  auto ack = c.exchange(msg, 10000ms);
  return ack ? readAck(*ack).code : "no answer: " + ack.error().message;
}

TEST(Events, RefusalsRunawaysRestartsGiveUpsAndStopsAreRecorded) {
  TestDatabase db;
  uint16_t adtPort = freePort(), labPort = freePort(), apiPort = freePort();
  uint16_t nobody = freePort();  // lab's receiver: nothing listens there
  MllpProject adt{.port = adtPort,
                  .settings = "timeout: 200ms\n",
                  .transform =
                      "export function transform(msg) {\n"
                      "  if (msg.get('MSH.10').startsWith('SPIN')) { while (true) {} }\n"
                      "  return msg;\n}\n"};
  MllpProject lab{.port = labPort,
                  .destination = "destination:\n  mllp: { host: 127.0.0.1, port: " +
                                 std::to_string(nobody) + " }\n  retry: { max_attempts: 2 }\n",
                  .name = "lab"};
  auto files = adt.files();
  for (auto& [path, text] : lab.files())
    if (path != "ductus.yaml") files[path] = text;
  TempProject project(files);
  EngineProcess engine(project.root(), db.url());
  engine.setExtraArgs({"--api-listen", "127.0.0.1:" + std::to_string(apiPort)});
  ASSERT_TRUE(engine.start()) << engine.log();
  EngineApi api{apiPort, tokenFor(db.url(), "ops", "operator")};

  // AR: a frame with no MSH.
  auto c = MllpClient::connect("127.0.0.1", adtPort);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(ackOf(*c, "PID|1||M1\r"), "AR");
  // A runaway: its worker killed for it and started again.
  EXPECT_EQ(ackOf(*c, hl7("SPIN1")), "AA");
  // A delivery given up after its two attempts.
  auto l = MllpClient::connect("127.0.0.1", labPort);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(ackOf(*l, hl7("LAB1")), "AA");
  std::string labId = db.value("SELECT id FROM messages WHERE control_id = 'LAB1'");
  std::string spinId = db.value("SELECT id FROM messages WHERE control_id = 'SPIN1'");
  // An operator's stop and start of adt's intake.
  ASSERT_EQ(api.call("POST", "/api/v1/interfaces/adt/stop", {{"reason", "testing"}}).status, 200);
  ASSERT_EQ(api.call("POST", "/api/v1/interfaces/adt/start").status, 200);

  auto kinds = [&] {
    std::set<std::string> out;
    json page = api.get("/api/v1/event-log");
    for (auto& e : page["events"]) out.insert(e["kind"].get<std::string>());
    return out;
  };
  const std::set<std::string> want{"ar_refused",           "runaway",        "worker_restarted",
                                   "delivery_quarantined", "intake_stopped", "intake_started"};
  ASSERT_TRUE(waitFor(
      [&] {
        auto k = kinds();
        return std::includes(k.begin(), k.end(), want.begin(), want.end());
      },
      30s))
      << api.get("/api/v1/event-log").dump(2) << engine.log();

  // What each says, and whose it is.
  EXPECT_EQ(db.value("SELECT interface || ' ' || (detail LIKE 'from 127.0.0.1:%: %answered AR') "
                     "FROM events WHERE kind = 'ar_refused'"),
            "adt true");
  EXPECT_EQ(db.value("SELECT interface || ' ' || destination || ' ' || message_id FROM events "
                     "WHERE kind = 'runaway'"),
            "adt default " + spinId);
  EXPECT_EQ(db.value("SELECT interface FROM events WHERE kind = 'worker_restarted' LIMIT 1"),
            "adt");
  EXPECT_EQ(db.value("SELECT interface || ' ' || destination || ' ' || message_id || ' ' || "
                     "(detail LIKE 'gave up after 2 attempts:%') FROM events WHERE kind = "
                     "'delivery_quarantined'"),
            "lab default " + labId + " true");
  EXPECT_EQ(db.value("SELECT detail FROM events WHERE kind = 'intake_stopped'"),
            "intake stopped by ops: testing");
  json runaways = api.get("/api/v1/event-log?kind=runaway&interface=adt");
  ASSERT_EQ(runaways["events"].size(), 1u) << runaways.dump();
  EXPECT_EQ(std::to_string(runaways["events"][0]["messageId"].get<int64_t>()), spinId);

  EXPECT_TRUE(exitedWith(engine.terminate(), 0)) << engine.log();
}

}  // namespace
}  // namespace ductus::test
