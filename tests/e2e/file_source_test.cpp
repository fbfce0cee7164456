// The file source's paths beside `split: records` (intake/file_source.h), in
// a real engine: a file read whole is one message; `delete: true` removes
// it once stored; a move that fails after the file is stored (its state
// says done) is retried at the next polls, and after a restart, without
// storing the file again. (A file read whole over max_message_size is left
// in place: engine_test.cpp, AFileSourceSkipsLinks...)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "tests/e2e/paths_support.h"
#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/mllp_receiver.h"
#include "tests/support/test_database.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Written under a dot-name, then renamed: the poller never sees half a file.
void drop(const fs::path& folder, const std::string& name, const std::string& bytes) {
  fs::create_directories(folder);
  std::ofstream(folder / ("." + name), std::ios::binary) << bytes;
  fs::rename(folder / ("." + name), folder / name);
}

std::string readAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t visibleFiles(const fs::path& dir) {
  size_t n = 0;
  std::error_code ec;
  if (fs::exists(dir, ec))
    for (auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string()[0] != '.') ++n;
  return n;
}

TEST(EngineFileSource, AFileReadWholeIsOneMessageByteForByte) {
  TestDatabase db;
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/drop/interface.yaml",
       "source:\n  file: { path: in/, pattern: \"*.hl7\", move_to: done/, poll: 200ms }\n"
       "format: hl7v2\ndestination:\n  file: { path: out/ }\n"},
      {"interfaces/drop/transform.js", kPassThrough},
  });
  // Two messages in one file: without split: records they stay together.
  const std::string bytes = hl7("W-1", "M1") + hl7("W-2", "M2");
  drop(project.root() / "in", "batch.hl7", bytes);
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  ASSERT_TRUE(waitFor([&] { return fs::exists(project.root() / "done" / "batch.hl7"); }, 30s))
      << engine.log();
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "1");
  EXPECT_EQ(db.value("SELECT convert_from(payload, 'LATIN1') = $1 FROM messages", {bytes}), "t")
      << db.value("SELECT convert_from(payload, 'LATIN1') FROM messages");
  EXPECT_EQ(readAll(project.root() / "done" / "batch.hl7"), bytes);
  // Delivered as the one message it is, unchanged.
  ASSERT_TRUE(waitFor([&] { return db.value("SELECT status FROM messages") == "1"; }, 30s))
      << engine.log();
  ASSERT_EQ(visibleFiles(project.root() / "out"), 1u);
  for (auto& e : fs::directory_iterator(project.root() / "out")) {
    if (e.path().filename().string()[0] == '.') continue;
    EXPECT_EQ(readAll(e.path()), bytes);
  }
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

// A file of MLLP frames where one record holds a start block inside a
// segment: framed as it is, it would reach the receiver as two messages.
// That record is stored quarantined at intake with the reason (an operator
// sees it) and never delivered; the records around it are stored and
// delivered, and the file is done.
TEST(EngineFileSource, ARecordHoldingAFramingByteIsQuarantinedAtIntakeAndTheRestDelivered) {
  TestDatabase db;
  MllpReceiver receiver;
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/drop/interface.yaml",
       "source:\n  file: { path: in/, pattern: \"*.hl7\", split: records, move_to: done/, "
       "poll: 200ms }\nformat: hl7v2\ndestination:\n  mllp: { host: 127.0.0.1, port: " +
           std::to_string(receiver.port()) + " }\n"},
      {"interfaces/drop/transform.js", kPassThrough},
  });
  const std::string nested =
      "MSH|^~\\&|S|F|R|F|2026||ADT^A01|F-2|P|2.5\rPID|1||M\x0b" "2\rEVN|A01\r";
  drop(project.root() / "in", "frames.hl7",
       "\x0b" + hl7("F-1") + "\x1c\r\x0b" + nested + "\x1c\r\x0b" + hl7("F-3") + "\x1c\r");
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  ASSERT_TRUE(waitFor([&] { return fs::exists(project.root() / "done" / "frames.hl7"); }, 30s))
      << engine.log();
  ASSERT_TRUE(waitFor([&] { return receiver.accepted().size() >= 2; }, 30s)) << engine.log();
  EXPECT_EQ(receiver.accepted(), (std::vector<std::string>{"F-1", "F-3"}));
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "3");
  EXPECT_EQ(db.value("SELECT status FROM messages WHERE control_id = 'F-2'"), "3");
  EXPECT_NE(db.value("SELECT last_error FROM messages WHERE control_id = 'F-2'")
                .find("record contains MLLP framing bytes (0x0B"),
            std::string::npos)
      << db.value("SELECT last_error FROM messages WHERE control_id = 'F-2'");
  // Kept as it came, so the operator sees what was sent; never queued.
  EXPECT_EQ(db.value("SELECT convert_from(payload, 'LATIN1') = $1 FROM messages "
                     "WHERE control_id = 'F-2'",
                     {nested}),
            "t");
  EXPECT_EQ(db.value("SELECT count(*) FROM deliveries d JOIN messages m ON m.id = d.message_id "
                     "WHERE m.control_id = 'F-2'"),
            "0");
  ASSERT_TRUE(waitFor(
      [&] { return db.value("SELECT count(*) FROM messages WHERE status = 1") == "2"; }, 20s))
      << engine.log();
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
  EXPECT_EQ(receiver.arrivals("F-2"), 0);
  EXPECT_NE(engine.log().find("is quarantined, not delivered: record contains MLLP framing"),
            std::string::npos)
      << engine.log();
}

TEST(EngineFileSource, DeleteTrueRemovesEachFileOnceItIsStored) {
  TestDatabase db;
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/drop/interface.yaml",
       "source:\n  file: { path: in/, pattern: \"*.hl7\", delete: true, poll: 200ms }\n"
       "format: hl7v2\ndestination:\n  file: { path: out/ }\n"},
      {"interfaces/drop/transform.js", kPassThrough},
  });
  drop(project.root() / "in", "a.hl7", hl7("DEL-1"));
  drop(project.root() / "in", "b.hl7", hl7("DEL-2"));
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  ASSERT_TRUE(waitFor([&] { return visibleFiles(project.root() / "in") == 0; }, 30s))
      << engine.log();
  // Gone only because stored: both rows are there.
  auto ids = db.column(kStoredControlIds, {"drop"});
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()),
            (std::set<std::string>{"DEL-1", "DEL-2"}));
  EXPECT_FALSE(fs::exists(project.root() / "done"));
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
  EXPECT_EQ(logCount(engine, "stored (1 message(s)) and deleted"), 2u) << engine.log();
}

// The move is the file's acknowledgement; the commit before it saved the
// file's state as done. A move that fails (here: move_to lies under a
// regular file, so its folder can't be made) leaves the file in place, and
// each later round tries only the move again, in this run and the next.
TEST(EngineFileSource, AMoveThatFailsAfterTheStoreIsRetriedWithoutStoringTheFileAgain) {
  TestDatabase db;
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"blocked", "a file where move_to's parent folder should be\n"},
      {"interfaces/drop/interface.yaml",
       "source:\n  file: { path: in/, pattern: \"*.hl7\", move_to: blocked/done/, poll: 200ms }\n"
       "format: hl7v2\ndestination:\n  file: { path: out/ }\n"},
      {"interfaces/drop/transform.js", kPassThrough},
  });
  drop(project.root() / "in", "a.hl7", hl7("MOVE-1"));
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  const std::string failedMove = "a.hl7 is stored but could not be moved to";
  // Tried at least three times: the first after the store, then at polls.
  ASSERT_TRUE(waitFor([&] { return logCount(engine, failedMove) >= 3; }, 30s)) << engine.log();
  EXPECT_EQ(db.column(kStoredControlIds, {"drop"}), std::vector<std::string>{"MOVE-1"});
  EXPECT_EQ(logCount(engine, "storing a.hl7"), 1u) << engine.log();
  EXPECT_TRUE(fs::exists(project.root() / "in" / "a.hl7"));
  EXPECT_EQ(db.value("SELECT value->>'done' FROM source_state WHERE key = 'file:a.hl7'"), "true");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();

  // The next run finds it done: it only moves it.
  fs::remove(project.root() / "blocked");
  ASSERT_TRUE(engine.start());
  ASSERT_TRUE(waitFor([&] { return fs::exists(project.root() / "blocked" / "done" / "a.hl7"); },
                      30s))
      << engine.log();
  EXPECT_FALSE(fs::exists(project.root() / "in" / "a.hl7"));
  EXPECT_EQ(db.column(kStoredControlIds, {"drop"}), std::vector<std::string>{"MOVE-1"});
  EXPECT_EQ(logCount(engine, "storing a.hl7"), 1u) << "stored again\n" << engine.log();
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

}  // namespace
}  // namespace ductus::test
