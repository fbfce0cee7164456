#include "common/monitor/hotspots.h"

#include <gtest/gtest.h>

namespace ductus::monitor {
namespace {

using namespace std::chrono_literals;

const TimePoint kT0 = Clock::from_time_t(1780315200);  // 2026-06-01T12:00:00Z

LaneFact lane(int32_t l, int64_t waiting, int32_t attempts = 0, int64_t id = 0,
              TimePoint received = kT0 - 10min) {
  LaneFact f;
  f.lane = l;
  f.waiting = waiting;
  f.firstMessageId = id ? id : 1000 + l;
  f.firstKey = "MRN" + std::to_string(l);
  f.firstAttempts = attempts;
  f.firstLastError = attempts ? "HTTP 500\r\nfrom receiver" : "";
  f.firstReceivedAt = received;
  return f;
}

std::vector<std::string> kinds(const std::vector<Finding>& fs) {
  std::vector<std::string> out;
  for (const auto& f : fs) out.push_back(f.kind);
  return out;
}

using Kinds = std::vector<std::string>;

TEST(Hotspots, LanesGoToLoopsAsTheEngineSplitsThem) {
  // One loop reads every lane, even past partitions; with more, lane l is
  // loop l % loops's, and lanes at or past partitions are no one's.
  EXPECT_EQ(loopOfLane(0, 1, 8), 0u);
  EXPECT_EQ(loopOfLane(12, 1, 8), 0u);
  EXPECT_EQ(loopOfLane(5, 4, 8), 1u);
  EXPECT_EQ(loopOfLane(7, 4, 8), 3u);
  EXPECT_EQ(loopOfLane(8, 4, 8), std::nullopt);
  EXPECT_EQ(loopOfLane(-1, 4, 8), std::nullopt);
}

TEST(Hotspots, NothingToSayAboutAFlowingBacklog) {
  LaneFacts f;
  f.loops = 2;
  f.partitions = 4;
  f.lanes = {lane(0, 10), lane(1, 12), lane(2, 9), lane(3, 11)};
  f.lastFinished = kT0;
  EXPECT_TRUE(findHotspots(f).empty());
  EXPECT_TRUE(findHotspots(LaneFacts{}).empty());
}

TEST(Hotspots, ABlockedLaneHoldsEveryLaneOfItsLoopAndTheMessageIsTheTrouble) {
  LaneFacts f;
  f.loops = 2;
  f.partitions = 4;
  // Loop 0 owns lanes 0 and 2; lane 2's first message keeps failing.
  f.lanes = {lane(0, 30), lane(2, 20, 5, 77), lane(1, 3), lane(3, 4)};
  f.lastFinished = kT0 - 1min;  // the receiver took others after 77 arrived
  auto fs = findHotspots(f);
  ASSERT_EQ(kinds(fs), (Kinds{"blocked-lane"}));
  const std::string& t = fs[0].text;
  EXPECT_NE(t.find("Loop 0 of 2 is retrying message 77 (key MRN2) in lane 2 after 5 failed "
                   "attempts (HTTP 500 from receiver); 50 waiting in its lanes (0, 2)"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("the message is the trouble, not the receiver"), std::string::npos) << t;
}

TEST(Hotspots, TheOldestFailingFirstMessageIsTheOneRetried) {
  LaneFacts f;
  f.loops = 1;
  f.partitions = 4;
  f.lanes = {lane(3, 5, 2, 90), lane(1, 5, 1, 40)};
  auto fs = findHotspots(f);
  ASSERT_FALSE(fs.empty());
  EXPECT_NE(fs[0].text.find("retrying message 40"), std::string::npos) << fs[0].text;
}

TEST(Hotspots, EveryLoopBlockedAndNothingDeliveredSinceIsAReceiverDown) {
  LaneFacts f;
  f.loops = 2;
  f.partitions = 2;
  f.lanes = {lane(0, 5, 3), lane(1, 6, 3)};
  f.lastFinished = kT0 - 1h;  // before both arrived
  auto fs = findHotspots(f);
  EXPECT_EQ(kinds(fs), (Kinds{"blocked-lane", "blocked-lane", "receiver-down"}));
  EXPECT_NE(fs[0].text.find("Nothing was delivered since it arrived"), std::string::npos);
  // One loop of two blocked: not down.
  f.lanes[1].firstAttempts = 0;
  EXPECT_EQ(kinds(findHotspots(f)), (Kinds{"blocked-lane"}));
  // All blocked but the receiver took one after a blocker arrived: the
  // messages are the trouble, it is not down.
  f.lanes[1].firstAttempts = 3;
  f.lastFinished = kT0 - 5min;
  EXPECT_EQ(kinds(findHotspots(f)), (Kinds{"blocked-lane", "blocked-lane"}));
  // A single loop, never finished anything.
  LaneFacts one;
  one.lanes = {lane(0, 3, 1)};
  EXPECT_EQ(kinds(findHotspots(one)), (Kinds{"blocked-lane", "receiver-down"}));
}

TEST(Hotspots, ALaneOrALoopWithMostOfTheBacklogIsAHotKey) {
  struct Row {
    const char* name;
    uint32_t loops, partitions;
    std::vector<LaneFact> lanes;
    Kinds want;
    const char* says;
  } rows[] = {
      {"one lane, most of it",
       4,
       8,
       {lane(5, 150), lane(1, 20), lane(2, 20)},
       {"hot-key"},
       "Lane 5 holds 150 of 190 waiting (its first key: MRN5)"},
      {"most, but under 100", 4, 8, {lane(5, 99), lane(2, 10)}, {}, ""},
      {"100, but not most", 4, 8, {lane(5, 100), lane(2, 60), lane(3, 60)}, {}, ""},
      {"a loop, spread over its lanes",
       2,
       8,
       {lane(0, 60), lane(2, 60), lane(4, 60), lane(1, 10)},
       {"hot-key"},
       "Loop 0 of 2 holds 180 of 190 waiting (lanes 0, 2, 4)"},
      {"one loop, one lane: nothing to compare", 1, 1, {lane(0, 500)}, {}, ""},
  };
  for (const auto& r : rows) {
    LaneFacts f;
    f.loops = r.loops;
    f.partitions = r.partitions;
    f.lanes = r.lanes;
    f.lastFinished = kT0;
    auto fs = findHotspots(f);
    EXPECT_EQ(kinds(fs), r.want) << r.name;
    if (!fs.empty()) {
      EXPECT_NE(fs[0].text.find(r.says), std::string::npos) << fs[0].text;
    }
  }
  // The destination's total, when given, is what "most" is of.
  LaneFacts f;
  f.loops = 4;
  f.partitions = 8;
  f.lanes = {lane(5, 150)};
  f.waiting = 1000;  // the rest in lanes not listed
  EXPECT_TRUE(findHotspots(f).empty());
}

TEST(Hotspots, LanesNoLoopReadsAreUnowned) {
  LaneFacts f;
  f.loops = 2;
  f.partitions = 4;  // lowered from 8
  f.lanes = {lane(1, 3), lane(6, 4), lane(5, 2)};
  f.lastFinished = kT0;
  auto fs = findHotspots(f);
  ASSERT_EQ(kinds(fs), (Kinds{"unowned-lanes"}));
  EXPECT_NE(fs[0].text.find("6 waiting in lanes no loop reads (5, 6): ordering.partitions was "
                            "lowered to 4"),
            std::string::npos)
      << fs[0].text;
  // One loop reads every lane: nothing unowned.
  f.loops = 1;
  EXPECT_TRUE(findHotspots(f).empty());
}

}  // namespace
}  // namespace ductus::monitor
