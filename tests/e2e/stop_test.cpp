// Stopping the engine (`ductus run`'s SIGTERM, supervisor/engine_process.h):
// listeners close, every store in flight is answered, delivery loops flush,
// then it exits 0; past --stop-timeout it exits 1 anyway; a second signal
// exits 1 at once. A real engine, real MLLP senders, and a lock on
// `messages` that holds a store in flight for as long as the test needs.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/paths_support.h"
#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/exit_status.h"
#include "tests/support/messages_lock.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_receiver.h"
#include "tests/support/test_database.h"

namespace ductus::test {
namespace {

using namespace std::chrono_literals;

std::string mllpProject(uint16_t port, uint16_t receiverPort) {
  return "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(port) +
         " }\nformat: hl7v2\nordering: { key: PID.3.1, partitions: 16 }\n"
         "destination:\n  mllp: { host: 127.0.0.1, port: " +
         std::to_string(receiverPort) + " }\n";
}

// One sender streaming new messages on one connection until its first
// answer that is not AA (or none: the connection closed): the stop's. Or
// until `stop`, when the test gives up early.
struct Stream {
  std::vector<std::string> acked;
  std::string ending;  // what ended it: "AE", "closed: ...", "finished", "stopped"
};

void stream(uint16_t port, int sender, int count, const std::atomic<bool>& stop, Stream& out) {
  auto c = MllpClient::connect("127.0.0.1", port);
  if (!c) {
    out.ending = "connect: " + c.error().message;
    return;
  }
  for (int i = 0; i < count; ++i) {
    if (stop) {
      out.ending = "stopped";
      return;
    }
    std::string id = "S" + std::to_string(sender) + "-" + std::to_string(i);
    auto ack = c->exchange(hl7(id, "MRN" + std::to_string(sender)), 30000ms);
    if (!ack) {
      out.ending = "closed: " + ack.error().message;
      return;
    }
    auto f = readAck(*ack);
    if (f.code != "AA" || f.controlId != id) {
      out.ending = f.code + " " + f.controlId;
      return;
    }
    out.acked.push_back(id);
  }
  out.ending = "finished";
}

TEST(EngineStop, AStopWhileSendersStreamLosesNothingAcknowledged) {
  TestDatabase db;
  MllpReceiver receiver;
  uint16_t port = freePort();
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/adt/interface.yaml", mllpProject(port, receiver.port())},
      {"interfaces/adt/transform.js", kPassThrough},
  });
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());

  constexpr int kSenders = 4, kEach = 5000;
  std::vector<Stream> streams(kSenders);  // each sender's own; read after join
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  // Joined however the test ends (an ASSERT returns early); the engine,
  // declared before, still answers them meanwhile.
  struct Joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop = true;
      for (auto& th : threads)
        if (th.joinable()) th.join();
    }
  } joiner{stop, threads};
  for (int t = 0; t < kSenders; ++t)
    threads.emplace_back([&, t] { stream(port, t, kEach, stop, streams[t]); });
  ASSERT_TRUE(waitFor(
      [&] { return std::stoll("0" + db.value("SELECT count(*) FROM messages")) >= 400; }, 60s))
      << engine.log();
  engine.signal(SIGTERM);
  int status = engine.wait(60s);
  for (auto& th : threads) th.join();
  ASSERT_TRUE(exitedWith(status, 0)) << status << "\n" << engine.log();
  EXPECT_NE(engine.log().find("stopped"), std::string::npos) << engine.log();

  std::set<std::string> acked;
  for (auto& s : streams) {
    // The stop came mid-stream: every sender was cut off, none finished.
    EXPECT_NE(s.ending, "finished");
    EXPECT_EQ(s.ending.rfind("connect", 0), std::string::npos) << s.ending;
    acked.insert(s.acked.begin(), s.acked.end());
  }
  ASSERT_GT(acked.size(), 0u);
  // Every AA is a committed row...
  auto stored = db.column(kStoredControlIds, {"adt"});
  std::set<std::string> inStore(stored.begin(), stored.end());
  for (auto& id : acked) EXPECT_TRUE(inStore.count(id)) << id << " got AA and is not stored";

  // ...and is delivered, in order per key, once the engine runs again.
  ASSERT_TRUE(engine.start());
  ASSERT_TRUE(waitFor(
      [&] {
        auto got = receiver.accepted();
        return std::set<std::string>(got.begin(), got.end()).size() >= inStore.size();
      },
      90s))
      << receiver.accepted().size() << " of " << inStore.size() << "\n" << engine.log();
  auto got = receiver.accepted();
  std::set<std::string> delivered(got.begin(), got.end());
  for (auto& id : acked) EXPECT_TRUE(delivered.count(id)) << id << " got AA, never delivered";
  expectPerKeyOrder(got);
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

TEST(EngineStop, AStopWaitsForTheStoreInFlightAndAnswersItBeforeExiting) {
  TestDatabase db;
  MllpReceiver receiver;
  uint16_t port = freePort();
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/adt/interface.yaml", mllpProject(port, receiver.port())},
      {"interfaces/adt/transform.js", kPassThrough},
  });
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());

  MessagesLock lock(db);
  ASSERT_TRUE(lock.ok());
  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_TRUE(c->send(hl7("INFLIGHT-1", "M1")).ok());
  ASSERT_TRUE(anInsertWaits(db)) << engine.log();

  engine.signal(SIGTERM);
  ASSERT_TRUE(waitFor([&] { return logCount(engine, "stopping (listeners close") == 1; }, 30s))
      << engine.log();
  // The listener is closed: nobody new gets in while the stop waits.
  EXPECT_TRUE(waitFor([&] { return !MllpClient::connect("127.0.0.1", port, 1000ms).ok(); }, 10s));
  // The stop waits for the store it let in: the engine is still there.
  EXPECT_EQ(engine.wait(1s), -1) << "the engine exited with a store in flight\n" << engine.log();

  lock.release();
  auto ack = c->readFrame(30000ms);
  ASSERT_TRUE(ack.ok()) << ack.error().message << "\n" << engine.log();
  EXPECT_EQ(readAck(*ack).code, "AA");
  EXPECT_EQ(readAck(*ack).controlId, "INFLIGHT-1");
  int status = engine.wait(60s);
  EXPECT_TRUE(exitedWith(status, 0)) << status << "\n" << engine.log();
  EXPECT_EQ(db.column(kStoredControlIds, {"adt"}), std::vector<std::string>{"INFLIGHT-1"});

  // Stored and acknowledged during the stop, delivered after the restart.
  ASSERT_TRUE(engine.start());
  EXPECT_TRUE(waitFor([&] { return receiver.accepted().size() >= 1; }, 30s)) << engine.log();
  EXPECT_EQ(receiver.accepted().at(0), "INFLIGHT-1");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

TEST(EngineStop, AStopThatCannotFinishExitsWithOneAfterTheStopTimeout) {
  TestDatabase db;
  uint16_t port = freePort();
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/adt/interface.yaml",
       "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(port) +
           " }\nformat: hl7v2\ndestination:\n  file: { path: out/ }\n"},
      {"interfaces/adt/transform.js", kPassThrough},
  });
  EngineProcess engine(project.root(), db.url());
  engine.setExtraArgs({"--stop-timeout", "1s"});
  ASSERT_TRUE(engine.start());

  MessagesLock lock(db);
  ASSERT_TRUE(lock.ok());
  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_TRUE(c->send(hl7("STUCK-1", "M1")).ok());
  ASSERT_TRUE(anInsertWaits(db)) << engine.log();

  engine.signal(SIGTERM);
  int status = engine.wait(60s);
  EXPECT_TRUE(exitedWith(status, 1)) << status << "\n" << engine.log();
  EXPECT_NE(engine.log().find("stop did not finish within 1000 ms: exiting anyway"),
            std::string::npos)
      << engine.log();
  // Never acknowledged: the sender sends it again to the next engine.
  auto ack = c->readFrame(5000ms);
  EXPECT_FALSE(ack.ok() && readAck(*ack).code == "AA") << "acknowledged without a commit";
}

TEST(EngineStop, ASecondSignalExitsWithOneWithoutWaitingForTheStop) {
  TestDatabase db;
  uint16_t port = freePort();
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/adt/interface.yaml",
       "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(port) +
           " }\nformat: hl7v2\ndestination:\n  file: { path: out/ }\n"},
      {"interfaces/adt/transform.js", kPassThrough},
  });
  EngineProcess engine(project.root(), db.url());
  // Far longer than the test waits: only the second signal can end it.
  engine.setExtraArgs({"--stop-timeout", "10m"});
  ASSERT_TRUE(engine.start());

  MessagesLock lock(db);
  ASSERT_TRUE(lock.ok());
  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_TRUE(c->send(hl7("STUCK-2", "M1")).ok());
  ASSERT_TRUE(anInsertWaits(db)) << engine.log();

  engine.signal(SIGTERM);
  ASSERT_TRUE(waitFor([&] { return logCount(engine, "stopping (listeners close") == 1; }, 30s))
      << engine.log();
  engine.signal(SIGINT);
  int status = engine.wait(60s);
  EXPECT_TRUE(exitedWith(status, 1)) << status << "\n" << engine.log();
  EXPECT_NE(engine.log().find("second signal (2): exiting now"), std::string::npos)
      << engine.log();
  auto ack = c->readFrame(5000ms);
  EXPECT_FALSE(ack.ok() && readAck(*ack).code == "AA") << "acknowledged without a commit";
}

}  // namespace
}  // namespace ductus::test
