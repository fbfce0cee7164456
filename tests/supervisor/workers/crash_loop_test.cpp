// A worker that dies as soon as it starts (a broken binary, V8 failing to
// come up) is restarted on the one back-off rule (supervisor/delivery/
// backoff.h, WorkerPool::onExit): at once after the first quick death, then
// 400 ms, 800 ms, 1.6 s... up to 5 s, instead of a fork loop that would eat
// the machine. The stand-in worker is a script that notes when it started
// and exits 1.
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "tests/supervisor/workers/pool_fixture.h"

namespace ductus::test {
namespace {

using namespace std::chrono_literals;

std::vector<int64_t> startTimesMs(const std::filesystem::path& file) {
  std::vector<int64_t> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(std::stoll(line) / 1'000'000);
  return out;
}

class CrashLoopTest : public PoolTest {
 protected:
  // A pool of one stand-in worker that notes when it started in `starts`
  // and exits 1, with one interface to start it for.
  void startDyingWorkers(supervisor::WorkerPool::Options o, const std::filesystem::path& starts) {
    // The worker's environment is empty: absolute paths only.
    writeFile("dies-at-start.sh",
              "#!/bin/sh\n/bin/date +%s%N >> '" + starts.string() + "'\nexit 1\n");
    const auto script = project_ / "dies-at-start.sh";
    ASSERT_EQ(chmod(script.c_str(), 0755), 0);
    writeFile("interfaces/a/transform.js", "export function transform(m) { return m; }\n");
    o.binary = script.string();
    o.sharedWorkers = 1;
    pool_ = std::make_unique<supervisor::WorkerPool>(&loop_, o, services_);
    auto s = spec("a");
    auto modules = supervisor::readInterfaceModules(s);
    ASSERT_TRUE(modules.ok()) << modules.error().message;
    ASSERT_TRUE(pool_->addInterface(s, std::move(*modules)).ok());
  }
};

TEST_F(CrashLoopTest, AWorkerThatDiesAtEveryStartIsRestartedAfterGrowingWaits) {
  const auto starts = project_ / "starts";
  ASSERT_NO_FATAL_FAILURE(startDyingWorkers({}, starts));

  // Five starts: the first, one at once, then after 400, 800 and 1600 ms.
  ASSERT_TRUE(runUntil([&] { return startTimesMs(starts).size() >= 5; }, 60s))
      << startTimesMs(starts).size() << " starts";
  auto t = startTimesMs(starts);
  EXPECT_GE(pool_->restarts(), 4u);
  // Each wait is at least its back-off (less a margin for how late each
  // script got to run after its spawn); a restart loop without back-off
  // would start them milliseconds apart.
  const std::vector<int64_t> waits = {0, 400, 800, 1600};
  for (size_t i = 1; i < 5; ++i)
    EXPECT_GE(t[i] - t[i - 1], waits[i - 1] * 3 / 4)
        << "start " << i + 1 << " came " << t[i] - t[i - 1] << " ms after start " << i;
}

// The window that tells a quick death from a worker that lived is read on
// the pool's clock (Options::clock): here every worker "lives" ten seconds
// by it before dying, so none is a quick death and each is started again at
// once, where the back-off would wait 400 + 800 + 1600 + 3200 ms.
TEST_F(CrashLoopTest, AWorkerThatLivedPastTheQuickDeathWindowIsRestartedAtOnce) {
  const auto starts = project_ / "starts";
  supervisor::WorkerPool::Options o;
  o.clock = [t = std::chrono::steady_clock::now()]() mutable { return t += 10s; };
  ASSERT_NO_FATAL_FAILURE(startDyingWorkers(o, starts));

  EXPECT_TRUE(runUntil([&] { return startTimesMs(starts).size() >= 6; }, 3s))
      << startTimesMs(starts).size() << " starts in 3 s";
}

}  // namespace
}  // namespace ductus::test
