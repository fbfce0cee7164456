// A package upgrade renames a new /usr/bin/ductus over the running one. Until
// the reload hands over, the old engine goes on, and a worker it restarts
// (a crash, a runaway) must be its own binary, not whatever now has the
// name: the test runs a copy of ductus, renames a program that only fails
// over it, kills the worker and checks the next message is still delivered.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <thread>
#include <fstream>
#include <sstream>

#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
#include "tests/support/processes.h"
#include "tests/support/test_database.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(ReplacedBinary, AWorkerRestartedAfterTheBinaryWasReplacedIsStillTheEnginesOwn) {
  TestDatabase db;
  char tmpl[] = "/tmp/ductus-replaced-XXXXXX";
  fs::path dir = mkdtemp(tmpl);
  fs::path copy = dir / "ductus";
  fs::copy_file(ductusBinary(), copy);
  fs::permissions(copy, fs::perms::owner_all);
  uint16_t port = freePort();
  TempProject project(MllpProject{.port = port});
  EngineProcess engine(project.root(), db.url());
  engine.setBinary(copy.string());
  ASSERT_TRUE(engine.start()) << engine.log();

  auto send = [&](const std::string& id) {
    auto c = MllpClient::connect("127.0.0.1", port, 5000ms);
    if (!c) return std::string("no connection");
    auto ack = c->exchange(hl7(id), 10000ms);
    return ack ? readAck(*ack).code : ack.error().message;
  };
  auto delivered = [&](const std::string& id) {
    return waitFor(
        [&] {
          return db.value("SELECT count(*) FROM messages WHERE control_id = $1 AND status = 1",
                          {id}) == "1";
        },
        20s);
  };
  ASSERT_EQ(send("BEFORE-1"), "AA");
  ASSERT_TRUE(delivered("BEFORE-1")) << engine.log();

  // As dpkg does: the new file under a temporary name, renamed over the old.
  fs::path next = dir / "ductus.new";
  std::ofstream(next) << "#!/bin/sh\nexit 70\n";
  fs::permissions(next, fs::perms::owner_all);
  fs::rename(next, copy);

  auto workers = childrenOf(engine.pid());
  ASSERT_FALSE(workers.empty()) << "the engine has no worker";
  for (pid_t w : workers) kill(w, SIGKILL);
  // The next message only once a new worker runs: sent while the engine
  // has not yet seen the kill, its call went to the dead worker, which a
  // SIGKILL during a call reads as a runaway (CI's debug build saw it).
  ASSERT_TRUE(waitFor(
      [&] {
        for (pid_t p : childrenOf(engine.pid()))
          if (std::find(workers.begin(), workers.end(), p) == workers.end()) return true;
        return false;
      },
      20s))
      << "no worker was started again:\n"
      << engine.log();
  std::this_thread::sleep_for(500ms);  // its code loaded before the call

  EXPECT_EQ(send("AFTER-1"), "AA");
  EXPECT_TRUE(delivered("AFTER-1")) << "the restarted worker is not the engine's binary:\n"
                                    << engine.log();
  engine.terminate();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ductus::test
