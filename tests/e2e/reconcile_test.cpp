// Destinations changed in interface.yaml between two runs on one database:
// at start the engine reconciles what is waiting (Store::reconcile, called
// from Engine::reconcile). Pending deliveries to a removed destination are
// filtered ("destination removed"); messages still pending get a delivery
// to an added destination; messages already finished do not; new messages
// go to the destinations the project has now.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/paths_support.h"
#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
#include "tests/support/mllp_receiver.h"
#include "tests/support/test_database.h"

namespace ductus::test {
namespace {

using namespace std::chrono_literals;

// Control ids with a delivery to `destination` in this status ("" any).
std::set<std::string> idsAt(TestDatabase& db, const std::string& destination,
                            const std::string& status = "") {
  auto v = db.column(
      "SELECT split_part(convert_from(m.payload, 'LATIN1'), '|', 10) FROM deliveries d "
      "JOIN destinations t ON t.id = d.destination_id JOIN messages m ON m.id = d.message_id "
      "WHERE t.name = $1 AND ($2 = '' OR d.status::text = $2)",
      {destination, status});
  return {v.begin(), v.end()};
}

// The adt interface with these named destinations.
MllpProject withDestinations(uint16_t port, const std::string& destinations) {
  return {.port = port, .destination = "destinations:\n" + destinations};
}

TEST(EngineReconcile, DestinationsChangedBetweenRunsGetWhatIsStillPendingAndNothingFinished) {
  TestDatabase db;
  // lab takes the F messages and refuses the P ones, which come after them
  // (one lane): those stay pending.
  MllpReceiver lab([](const std::string& id, int) { return id[0] == 'P' ? "AE" : "AA"; });
  uint16_t port = freePort();
  const std::string archive = "  archive:\n    file: { path: out-archive/ }\n";
  TempProject project(withDestinations(
      port, archive + "  lab:\n    mllp: { host: 127.0.0.1, port: " + std::to_string(lab.port()) +
                " }\n"));
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  {
    auto c = MllpClient::connect("127.0.0.1", port);
    ASSERT_TRUE(c.ok()) << c.error().message;
    for (const char* id : {"F-1", "F-2", "P-1", "P-2"}) {
      auto ack = c->exchange(hl7(id, "M1"));
      ASSERT_TRUE(ack.ok()) << ack.error().message;
      ASSERT_EQ(readAck(*ack).code, "AA");
    }
  }
  ASSERT_TRUE(waitFor(
      [&] {
        return idsAt(db, "lab", "1") == std::set<std::string>{"F-1", "F-2"} &&
               idsAt(db, "archive", "1").size() == 4 && lab.arrivals("P-1") >= 1;
      },
      30s))
      << engine.log();
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
  ASSERT_EQ(idsAt(db, "lab", "0"), (std::set<std::string>{"P-1", "P-2"}));
  // A stop may leave the settle of messages it finished to the next start
  // (the loop's settle timer): as if it had, for F-1 and F-2.
  db.value(
      "UPDATE messages SET status = 0 WHERE split_part(convert_from(payload, 'LATIN1'), "
      "'|', 10) LIKE 'F-%'");

  // lab removed, billing added.
  {
    auto changed = withDestinations(port, archive + "  billing:\n    file: { path: out-billing/ }\n");
    std::ofstream(project.root() / changed.interfacePath()) << changed.interfaceYaml();
  }
  ASSERT_TRUE(engine.start());
  EXPECT_NE(engine.log().find("adt: reconciled: 2 deliveries added, 2 to removed destinations "
                              "filtered"),
            std::string::npos)
      << engine.log();
  EXPECT_EQ(idsAt(db, "lab", "2"), (std::set<std::string>{"P-1", "P-2"}));
  EXPECT_EQ(db.value("SELECT DISTINCT d.last_error FROM deliveries d JOIN destinations t ON t.id "
                     "= d.destination_id WHERE t.name = 'lab' AND d.status = 2"),
            "destination removed");
  {
    auto c = MllpClient::connect("127.0.0.1", port);
    ASSERT_TRUE(c.ok()) << c.error().message;
    auto ack = c->exchange(hl7("N-1", "M1"));
    ASSERT_TRUE(ack.ok()) << ack.error().message;
    ASSERT_EQ(readAck(*ack).code, "AA");
  }
  ASSERT_TRUE(waitFor([&] { return db.value("SELECT count(*) FROM messages WHERE status = 0") == "0"; },
                      30s))
      << db.value("SELECT string_agg(id || ':' || status, ' ') FROM messages") << "\n"
      << engine.log();
  // billing: what was still pending and what is new; never the finished ones.
  EXPECT_EQ(idsAt(db, "billing"), (std::set<std::string>{"P-1", "P-2", "N-1"}));
  EXPECT_EQ(idsAt(db, "billing", "1"), (std::set<std::string>{"P-1", "P-2", "N-1"}));
  EXPECT_EQ(idsAt(db, "archive", "1"), (std::set<std::string>{"F-1", "F-2", "P-1", "P-2", "N-1"}));
  EXPECT_EQ(idsAt(db, "lab").count("N-1"), 0u);
  EXPECT_EQ(lab.arrivals("N-1"), 0);
  // Each message's status follows its deliveries: sent somewhere, so sent.
  EXPECT_EQ(db.value("SELECT count(*) FROM messages WHERE status = 1"), "5");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

}  // namespace
}  // namespace ductus::test
