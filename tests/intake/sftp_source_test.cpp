// The file source over a real OpenSSH server (tests/support/sshd_server.h):
// split records stored and the file moved to done/; a growing file waits
// until it holds still; a source destroyed mid-file and made again resumes
// at the saved offset (no record lost or repeated); a wrong host key takes
// nothing and says so.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "intake/sftp_folder.h"
#include "tests/intake/file_source_support.h"
#include "tests/support/log_capture.h"
#include "tests/support/sshd_server.h"

namespace ductus::intake {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class SftpSource : public test::FileSourceTest {
 protected:
  void SetUp() override {
    FileSourceTest::SetUp();
    ASSERT_TRUE(sshd_.start()) << sshd_.log();
    sshd_.makeFolder("outbox");
  }
  sftp::ServerSettings server(std::string hostKey = "") const {
    sftp::ServerSettings s;
    s.host = sshd_.host();
    s.port = sshd_.port();
    s.user = sshd_.user();
    s.privateKeyFile = sshd_.privateKeyFile();
    s.hostKeys = {hostKey.empty() ? sshd_.hostKeyLine() : hostKey};
    s.connectTimeout = 5s;
    s.requestTimeout = 5s;
    return s;
  }
  std::unique_ptr<FileSource> source(sftp::ServerSettings s) {
    return makeSource(
        std::make_unique<SftpFolder>(&loop_, std::move(s), "outbox/", "done/", "drop source"));
  }
  // Written under a dot-name, then renamed: never seen half written.
  void drop(const std::string& name, const std::string& bytes) {
    fs::path dot = sshd_.folder() / "outbox" / ("." + name);
    std::ofstream(dot, std::ios::binary) << bytes;
    fs::rename(dot, sshd_.folder() / "outbox" / name);
  }
  int64_t stored() { return scalar("SELECT count(*) FROM messages"); }
  int64_t distinct() { return scalar("SELECT count(DISTINCT payload) FROM messages"); }

  ductus::test::SshdServer sshd_;
};

TEST_F(SftpSource, SplitRecordsAreAllStoredAndTheFileMovesToDone) {
  drop("lab.hl7", test::hl7Records(1200, "S"));
  auto src = source(server());
  ASSERT_TRUE(runUntil([&] { return fs::exists(sshd_.folder() / "done" / "lab.hl7"); }, 30s));
  EXPECT_EQ(stored(), 1200);
  EXPECT_EQ(distinct(), 1200);
  EXPECT_FALSE(fs::exists(sshd_.folder() / "outbox" / "lab.hl7"));
}

TEST_F(SftpSource, AGrowingFileIsNotTakenUntilItHoldsStill) {
  fs::path p = sshd_.folder() / "outbox" / "grow.hl7";
  // A poll longer than the appends' interval: each poll sees a new size.
  pollMs_ = 500;
  auto src = source(server());
  int written = 0;
  // Appended to for about 2.5 s (SFTP times are whole seconds: the size
  // tells a growing file apart).
  for (int i = 0; i < 25; ++i) {
    std::ofstream(p, std::ios::binary | std::ios::app) << test::hl7Records(1, "G", ++written);
    runFor(100ms);
    EXPECT_EQ(stored(), 0) << "taken while still growing";
  }
  ASSERT_TRUE(runUntil([&] { return fs::exists(sshd_.folder() / "done" / "grow.hl7"); }, 30s));
  EXPECT_EQ(stored(), written);
}

TEST_F(SftpSource, ASourceDestroyedMidFileResumesAtTheSavedOffset) {
  const int n = 5000;
  drop("big.hl7", test::hl7Records(n, "B"));
  auto src = source(server());
  ASSERT_TRUE(runUntil([&] { return stored() >= 1000; }, 30s));
  src.reset();  // mid-file: some batches committed, the rest not read
  int64_t before = stored();
  EXPECT_LT(before, n);
  ductus::test::LogCapture log(spdlog::level::info);
  src = source(server());
  ASSERT_TRUE(runUntil([&] { return fs::exists(sshd_.folder() / "done" / "big.hl7"); }, 60s));
  EXPECT_EQ(log.count("resuming big.hl7 at byte"), 1u) << log.all();
  EXPECT_EQ(stored(), n);
  EXPECT_EQ(distinct(), n);
}

TEST_F(SftpSource, AWrongHostKeyTakesNothingAndSaysTheKeyDidNotMatch) {
  drop("lab.hl7", test::hl7Records(3, "W"));
  ductus::test::LogCapture log(spdlog::level::info);
  // A key of the right shape that is not the server's.
  auto src = source(
      server("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBkAEJ0mG8EKv4n5kM1bXo1mOMoZ4T6rGqDfWl3RO6pA"));
  runFor(1500ms);
  EXPECT_EQ(stored(), 0);
  EXPECT_TRUE(fs::exists(sshd_.folder() / "outbox" / "lab.hl7"));
  EXPECT_EQ(log.count("host key"), 1u) << "once, not at every poll:\n" << log.all();
  EXPECT_NE(log.all().find("did not match"), std::string::npos) << log.all();
}

}  // namespace
}  // namespace ductus::intake
