// PostgreSQL failover (issue #35): a primary and a streaming standby of the
// test's own (pg_basebackup -R), the engine on the URL an operator gives it
// (both servers, target_session_attrs=read-write), two MLLP senders
// streaming new messages; the primary killed -9 mid-stream and the standby
// promoted. With the standby synchronous no acknowledged message is lost.
// Asynchronous, what the standby had not received when the primary died is
// lost: the tests count it, and one makes the standby fall behind to show
// that everything acknowledged since goes. Either way nothing is
// acknowledged while no server takes writes, the engine answers AA again
// without a restart, and every message the new primary holds is delivered,
// at least once.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
#include "tests/support/mllp_receiver.h"
#include "tests/support/mllp_stream.h"
#include "tests/support/pg_cluster.h"

namespace ductus::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const char* kStandbyName = "ductus_standby";

std::string summary(const std::vector<Answer>& answers) {
  std::map<std::string, int> n;
  for (auto& a : answers) ++n[a.code.empty() ? "none: " + a.error : a.code];
  std::string s;
  for (auto& [k, v] : n) s += k + " x" + std::to_string(v) + "; ";
  return s;
}

long long millis(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

enum class Standby {
  Synchronous,   // synchronous_standby_names names it: a commit waits for its flush
  Asynchronous,  // streaming, the primary never waits
  Behind,        // asynchronous and cut off from the primary before the kill
};

void failOver(Standby mode) {
  const bool synchronous = mode == Standby::Synchronous;
  uint16_t primaryPort = freePort(), standbyPort = freePort();
  PgCluster primary;
  ASSERT_TRUE(primary.start(primaryPort));
  PgCluster standby;
  ASSERT_TRUE(standby.startStandbyOf(primary, kStandbyName, standbyPort));
  // After the copy: the promoted standby must not wait for a standby of
  // its own.
  if (synchronous) {
    ASSERT_TRUE(primary.setSynchronousStandbys(kStandbyName));
  }
  ASSERT_TRUE(primary.waitForStandby(kStandbyName, synchronous ? "sync" : "async"));

  // The URL an operator gives the engine: both servers, and only the one
  // that takes writes will do (libpq tries them in turn).
  const std::string url = "postgresql://127.0.0.1:" + std::to_string(primaryPort) +
                          ",127.0.0.1:" + std::to_string(standbyPort) +
                          "/postgres?user=postgres&target_session_attrs=read-write";
  MllpReceiver receiver;
  uint16_t port = freePort();
  TempProject project(MllpProject{.port = port,
                                  .settings = "durability: strict\n",
                                  .destination = mllpDestination(receiver.port())});
  EngineProcess engine(project.root(), url);
  ASSERT_TRUE(engine.start());

  std::array<Answers, 2> answers;
  std::atomic<bool> stop{false};
  std::array<std::thread, 2> senders;
  for (size_t i = 0; i < senders.size(); ++i)
    senders[i] = std::thread([&, i] {
      streamMllp(port, answers[i], stop, "F" + std::to_string(i) + "-", 10000ms, 5ms);
    });
  struct Joiner {
    std::atomic<bool>& stop;
    std::array<std::thread, 2>& threads;
    ~Joiner() {
      stop = true;
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  } joiner{stop, senders};
  auto acknowledgedSince = [&](Clock::time_point t) {
    size_t n = 0;
    for (auto& a : answers) n += a.countSince("AA", t);
    return n;
  };
  auto everySender = [&](auto pred) {
    for (auto& a : answers)
      if (!pred(a)) return false;
    return true;
  };
  auto allAnswers = [&] {
    std::vector<Answer> all;
    for (auto& a : answers) {
      auto part = a.all();
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  };

  // Streaming, replicated and delivered before the failure.
  auto begin = Clock::now();
  // Zero until the standby has replayed the table's creation (a count of a
  // table it doesn't have yet would be an error, not a wait).
  auto standbyRows = [&]() -> long long {
    if (standby.value("SELECT to_regclass('messages') IS NOT NULL") != "t") return 0;
    return std::stoll("0" + standby.value("SELECT count(*) FROM messages"));
  };
  ASSERT_TRUE(waitFor(
      [&] {
        return everySender([&](Answers& a) { return a.countSince("AA", begin) >= 50; }) &&
               standbyRows() >= 20 && receiver.accepted().size() >= 20;
      },
      60s))
      << summary(allAnswers()) << "\nstandby rows: " << standbyRows()
      << ", delivered: " << receiver.accepted().size() << "\n"
      << engine.log();

  // Behind: the standby stops streaming (its primary_conninfo emptied, as a
  // network between the two that fails would) while the primary goes on
  // acknowledging, asynchronous, without it.
  Clock::time_point cutOff{};
  if (mode == Standby::Behind) {
    standby.value("ALTER SYSTEM SET primary_conninfo = ''");
    standby.value("SELECT pg_reload_conf()");
    ASSERT_TRUE(waitFor(
        [&] {
          return standby.value("SELECT count(*) FROM pg_stat_wal_receiver") == "0" &&
                 primary.value("SELECT count(*) FROM pg_stat_replication") == "0";
        },
        60s))
        << "the standby still streams";
    cutOff = Clock::now();
    ASSERT_TRUE(waitFor([&] { return acknowledgedSince(cutOff) >= 40; }, 60s))
        << summary(allAnswers()) << "\n"
        << engine.log();
  }

  ASSERT_TRUE(primary.crash("kill"));
  auto down = Clock::now();  // no server takes writes from here on
  // Every sender hears it (an AE, or its connection lost) for a message
  // sent after the kill: its last AA from the old primary came before.
  ASSERT_TRUE(
      waitFor([&] { return everySender([&](Answers& a) { return a.refusedSince(down); }); }, 60s))
      << summary(allAnswers()) << "\n"
      << engine.log();

  auto promoting = Clock::now();
  ASSERT_TRUE(standby.promote());
  auto promoted = Clock::now();
  // AA again, with no restart: the engine's connections find the new
  // primary through the URL.
  bool again = waitFor(
      [&] { return everySender([&](Answers& a) { return a.countSince("AA", promoted) >= 20; }); },
      90s);
  stop = true;
  for (auto& t : senders) t.join();
  auto all = allAnswers();
  ASSERT_TRUE(again) << "no AA within 90 s of the promotion: " << summary(all) << "\n"
                     << engine.log();

  // Nothing was acknowledged while no server took writes; the first AA
  // after, from `pg_ctl promote` on.
  std::optional<Clock::time_point> firstAgain;
  size_t acknowledged = 0;
  for (auto& a : all) {
    if (a.code != "AA") continue;
    ++acknowledged;
    EXPECT_TRUE(a.idMatches) << a.id << ": MSA-2 is not its MSH-10";
    if (a.sent >= down) {
      EXPECT_GE(a.answered, promoting) << a.id << " got AA while no server took writes";
      if (!firstAgain || a.answered < *firstAgain) firstAgain = a.answered;
    }
  }
  ASSERT_TRUE(firstAgain);
  auto takeover = *firstAgain - promoting;

  // What the promoted standby holds: each message at most once (no sender
  // sends one twice).
  auto stored = standby.column(kStoredControlIds, {"adt"});
  std::set<std::string> present(stored.begin(), stored.end());
  EXPECT_EQ(stored.size(), present.size()) << "a message is stored twice";
  size_t lost = 0;
  for (auto& a : all) {
    if (a.code != "AA" || present.count(a.id)) continue;
    ++lost;
    if (synchronous && lost <= 20) {
      ADD_FAILURE() << a.id << " got AA and is not on the new primary";
    }
    // Only the old primary's acknowledgements can be lost.
    EXPECT_LT(a.sent, down) << a.id << " got AA after the kill and is lost";
  }
  if (synchronous) {
    EXPECT_EQ(lost, 0u);
  }
  if (mode == Standby::Behind) {
    // Everything the old primary acknowledged after the standby stopped
    // receiving is gone.
    size_t afterCutOff = 0;
    for (auto& a : all)
      if (a.code == "AA" && a.sent >= cutOff && a.answered < promoting) {
        ++afterCutOff;
        EXPECT_FALSE(present.count(a.id)) << a.id << " was acknowledged after the standby fell "
                                          << "behind and is on the new primary";
      }
    EXPECT_GE(afterCutOff, 40u);
    EXPECT_GE(lost, afterCutOff);
  }

  // Delivery resumes: every message the new primary holds is delivered, at
  // least once (an outcome committed without a flush may be lost with the
  // old primary and the message sent again).
  auto undelivered = [&] {
    auto got = receiver.accepted();
    std::set<std::string> delivered(got.begin(), got.end());
    size_t n = 0;
    for (auto& id : present) n += !delivered.count(id);
    return n;
  };
  EXPECT_TRUE(waitFor(
      [&] {
        return undelivered() == 0 &&
               standby.value("SELECT count(*) FROM messages WHERE status = 0") == "0";
      },
      120s))
      << undelivered() << " of " << present.size() << " not delivered, "
      << standby.value("SELECT count(*) FROM messages WHERE status = 0") << " pending\n"
      << engine.log();
  auto got = receiver.accepted();
  std::set<std::string> delivered(got.begin(), got.end());
  size_t deliveredLost = 0;  // delivered, then lost with the old primary
  for (auto& id : delivered) deliveredLost += !present.count(id);

  const char* name = synchronous               ? "synchronous"
                     : mode == Standby::Behind ? "behind"
                                               : "asynchronous";
  std::printf(
      "%s standby: %zu acknowledged, %zu of them lost (%zu of those already delivered); "
      "AA again %lld ms after pg_ctl promote began (it took %lld ms); %zu deliveries sent "
      "again\n",
      name, acknowledged, lost, deliveredLost, millis(takeover), millis(promoted - promoting),
      got.size() - delivered.size());
  ::testing::Test::RecordProperty("acknowledged", static_cast<int>(acknowledged));
  ::testing::Test::RecordProperty("lost", static_cast<int>(lost));
  ::testing::Test::RecordProperty("takeover_ms", static_cast<int>(millis(takeover)));
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

TEST(Failover, ASynchronousStandbyPromotedAfterKillNineOfThePrimaryLosesNoAcknowledgedMessage) {
  failOver(Standby::Synchronous);
}

// Streaming at full speed on one machine the standby is a few milliseconds
// behind at most: usually nothing is lost, and nothing asserts that.
TEST(Failover, AnAsynchronousStandbyPromotedLosesOnlyWhatItHadNotReceived) {
  failOver(Standby::Asynchronous);
}

TEST(Failover, AnAsynchronousStandbyThatFellBehindLosesEverythingAcknowledgedSince) {
  failOver(Standby::Behind);
}

}  // namespace
}  // namespace ductus::test
