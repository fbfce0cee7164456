// A full disk under a running engine (issue #22): PostgreSQL on a small
// tmpfs of the test's own is filled while a sender sends. ACKs turn to AE
// (nothing unstored is acknowledged), the engine logs the failures once a
// minute, not once per message, and once space returns it stores again by
// itself and every message it acknowledged is delivered. Needs root (to
// mount the tmpfs); skipped otherwise.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
#include "tests/support/pg_cluster.h"

namespace ductus::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// A tmpfs of `size` mounted on a fresh folder, unmounted (lazily, in case
// something still holds it) and removed when it goes.
class Tmpfs {
 public:
  explicit Tmpfs(const std::string& size) {
    char tmpl[] = "/tmp/dfull.XXXXXX";
    if (!mkdtemp(tmpl)) return;
    dir_ = tmpl;
    std::string opts = "size=" + size + ",mode=0777";
    mounted_ = mount("tmpfs", tmpl, "tmpfs", 0, opts.c_str()) == 0;
    if (!mounted_) why_ = std::strerror(errno);
  }
  ~Tmpfs() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
    if (!dir_.empty()) rmdir(dir_.c_str());
  }
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
  bool mounted_ = false;
  std::string why_ = "mkdtemp failed";
};

// Writes zeros to `path` until the file system has no room left.
void fill(const fs::path& path) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::vector<char> chunk(1 << 20, 0);
  while (std::fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size()) {
  }
  std::fclose(f);
}

TEST(DiskFull, AcksTurnToAeWhileItIsFullAndEveryAcknowledgedMessageIsDeliveredAfter) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  Tmpfs disk("160m");
  if (!disk.mounted()) GTEST_SKIP() << "no tmpfs: " << disk.why();
  PgCluster pg(disk.dir() / "pg");
  ASSERT_TRUE(pg.start());
  uint16_t port = freePort();
  TempProject project(MllpProject{.port = port});
  EngineProcess engine(project.root(), pg.url());
  ASSERT_TRUE(engine.start());

  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok()) << c.error().message;
  std::vector<std::string> acked;
  int sent = 0;
  auto sendOne = [&]() -> std::string {
    std::string id = "D-" + std::to_string(sent++);
    auto ack = c->exchange(hl7(id), 30000ms);
    if (!ack) return "none: " + ack.error().message;
    auto f = readAck(*ack);
    if (f.code == "AA") acked.push_back(id);
    return f.code;
  };
  for (int i = 0; i < 20; ++i) ASSERT_EQ(sendOne(), "AA");

  // Full: once the pages stored rows still fit in are used up, every ACK
  // is an AE, and never an AA for a message that wasn't stored.
  fill(disk.dir() / "filler");
  int errorsInARow = 0;
  for (int i = 0; i < 20000 && errorsInARow < 200; ++i) {
    std::string code = sendOne();
    ASSERT_TRUE(code == "AA" || code == "AE") << code;
    errorsInARow = code == "AE" ? errorsInARow + 1 : 0;
  }
  ASSERT_EQ(errorsInARow, 200) << "the disk never filled up";
  // Once a minute, not once a message.
  std::string log = engine.log();
  size_t lines = 0;
  for (size_t at = log.find("storing a message failed"); at != std::string::npos;
       at = log.find("storing a message failed", at + 1))
    ++lines;
  EXPECT_GE(lines, 1u) << log;
  EXPECT_LE(lines, 2u) << log;

  // Space returns: the engine stores again by itself.
  fs::remove(disk.dir() / "filler");
  ASSERT_TRUE(waitFor([&] { return sendOne() == "AA"; }, 60s)) << engine.log();
  for (int i = 0; i < 20; ++i) ASSERT_EQ(sendOne(), "AA");

  // Every acknowledged message is delivered.
  std::set<std::string> want(acked.begin(), acked.end());
  auto delivered = [&] {
    auto v = pg.column("SELECT split_part(convert_from(payload, 'LATIN1'), '|', 10) FROM messages "
                       "WHERE status = 1");
    std::set<std::string> got(v.begin(), v.end());
    for (auto& id : want)
      if (!got.count(id)) return false;
    return true;
  };
  EXPECT_TRUE(waitFor(delivered, 120s)) << engine.log();
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

}  // namespace
}  // namespace ductus::test
