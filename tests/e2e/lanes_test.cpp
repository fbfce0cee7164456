// Per-key order with `isolation: dedicated, workers: N`: the interface's lanes
// are split round-robin across N delivery loops (docs/architecture.md,
// invariant 3). A real engine, four MLLP senders, one receiver that records
// arrival order. One key's first message is refused until the test lets it
// through: its loop's lanes must wait behind it while the other loops'
// lanes are delivered, and every key keeps its order.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/partition.h"
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

TEST(EngineLanes, PerKeyOrderHoldsWithTheLanesSplitAcrossThreeDeliveryLoops) {
  constexpr int kKeys = 24, kPerKey = 10, kSenders = 4;
  constexpr uint32_t kPartitions = 12, kSlots = 3;
  auto mrn = [](int k) { return "MRN" + std::to_string(k); };
  auto id = [](int k, int i) { return "K" + std::to_string(k) + "-" + std::to_string(i); };
  // The engine's assignment: lane = partition_of(key), slot = lane % slots.
  auto slotOf = [&](int k) { return partition_of(mrn(k), kPartitions) % kSlots; };
  const uint32_t blockedSlot = slotOf(0);
  std::set<int> blockedKeys, freeKeys;
  for (int k = 0; k < kKeys; ++k) (slotOf(k) == blockedSlot ? blockedKeys : freeKeys).insert(k);
  ASSERT_GE(blockedKeys.size(), 2u) << "K0 needs a neighbour in its slot";
  ASSERT_GE(freeKeys.size(), 2u);

  TestDatabase db;
  std::atomic<bool> release{false};
  MllpReceiver receiver([&](const std::string& controlId, int) {
    return controlId == "K0-0" && !release ? "AE" : "AA";
  });
  uint16_t port = freePort();
  TempProject project(MllpProject{
      .port = port,
      .settings = "isolation: dedicated\nworkers: " + std::to_string(kSlots) +
                  "\nordering: { key: PID.3.1, partitions: " + std::to_string(kPartitions) + " }\n",
      .destination = mllpDestination(receiver.port())});
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());

  // K0-0 first: refused, it blocks its loop from now on.
  {
    auto c = MllpClient::connect("127.0.0.1", port);
    ASSERT_TRUE(c.ok()) << c.error().message;
    auto ack = c->exchange(hl7("K0-0", mrn(0)), 10000ms);
    ASSERT_TRUE(ack.ok()) << ack.error().message;
    ASSERT_EQ(readAck(*ack).code, "AA");
  }
  ASSERT_TRUE(waitFor([&] { return receiver.arrivals("K0-0") >= 1; }, 30s)) << engine.log();

  // Each sender owns some keys and interleaves them, so each key's order is
  // the order its sender had them acknowledged.
  std::vector<std::vector<std::string>> acked(kSenders);
  std::atomic<bool> stop{false};
  std::vector<std::thread> senders;
  for (int t = 0; t < kSenders; ++t) {
    std::vector<std::pair<std::string, std::string>> msgs;
    for (int i = 0; i < kPerKey; ++i)
      for (int k = t; k < kKeys; k += kSenders)
        if (k != 0 || i != 0) msgs.emplace_back(id(k, i), hl7(id(k, i), mrn(k)));
    senders.emplace_back([&, t, msgs] { sendAll(port, msgs, acked[t], stop); });
  }
  for (auto& s : senders) s.join();

  // The other loops deliver all of theirs while K0-0 is still refused...
  auto accepted = [&] {
    auto got = receiver.accepted();
    return std::set<std::string>(got.begin(), got.end());
  };
  ASSERT_TRUE(waitFor(
      [&] {
        auto got = accepted();
        for (int k : freeKeys)
          for (int i = 0; i < kPerKey; ++i)
            if (!got.count(id(k, i))) return false;
        return true;
      },
      60s))
      << accepted().size() << " accepted\n" << engine.log();
  // ...and K0-0's loop has sent nothing behind it.
  for (auto& got : receiver.accepted()) {
    int k = std::stoi(got.substr(1, got.find('-') - 1));
    EXPECT_FALSE(blockedKeys.count(k)) << got << " overtook K0-0 in its loop";
  }
  EXPECT_GE(receiver.arrivals("K0-0"), 1);

  release = true;
  ASSERT_TRUE(waitFor([&] { return accepted().size() == size_t{kKeys * kPerKey}; }, 90s))
      << accepted().size() << " of " << kKeys * kPerKey << "\n" << engine.log();
  expectPerKeyOrder(receiver.accepted());
  EXPECT_TRUE(waitFor(
      [&] {
        return db.value("SELECT count(*) FROM messages WHERE status = 1") ==
               std::to_string(kKeys * kPerKey);
      },
      30s));
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

}  // namespace
}  // namespace ductus::test
