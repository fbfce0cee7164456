// WorkerPool::restartInterface with real workers: an interface runaways
// stopped runs its fixed code in every worker of its group afterwards (a
// worker that still held the old modules is replaced, since a worker keeps
// what it compiled), a running one is refused, and new code that does not
// load leaves it stopped.
#include <gtest/gtest.h>

#include <string>

#include "tests/supervisor/workers/pool_fixture.h"

namespace ductus::test {
namespace {

using Kind = supervisor::Outcome::Kind;
using namespace std::chrono_literals;

const char* const kOld =
    "export function transform(s) { if (s === 'SPIN') { for (;;) {} } return 'old:' + s; }\n";
const char* const kNew = "export function transform(s) { return 'new:' + s; }\n";

class RestartTest : public PoolTest {
 protected:
  // Two shared workers; three runaways in a row stop `flaky`.
  supervisor::WorkerPool::FunctionId stopped() {
    supervisor::WorkerPool::Options o;
    o.sharedWorkers = 2;
    pool(o);
    writeFile("interfaces/flaky/transform.js", kOld);
    auto s = spec("flaky", "text");
    s.timeout = 150ms;
    auto fn = load(s);
    EXPECT_TRUE(fn) << fn.error().message;
    if (!fn) return 0;
    // Both workers hold the old code.
    for (int i = 0; i < 4; ++i) EXPECT_EQ(call(*fn, "x").data, "old:x");
    for (int i = 0; i < 3 && !pool().isStopped("flaky"); ++i)
      EXPECT_EQ(call(*fn, "SPIN").kind, Kind::RunawayTimeout);
    EXPECT_TRUE(pool().isStopped("flaky"));
    EXPECT_EQ(call(*fn, "x").kind, Kind::Stopped);
    return *fn;
  }

  Status restart() {
    auto modules = supervisor::readInterfaceModules(spec("flaky", "text"));
    if (!modules) return modules.error();
    std::optional<Status> verdict;
    if (auto s = pool().restartInterface("flaky", std::move(*modules),
                                         [&](Status st) { verdict = st; });
        !s)
      return s;
    runUntil([&] { return verdict.has_value(); }, 20s);
    if (!verdict) return Error{"no load verdict"};
    return *verdict;
  }
};

TEST_F(RestartTest, TheFixedCodeRunsInEveryWorkerOfTheGroup) {
  auto fn = stopped();
  ASSERT_NE(fn, 0u);
  writeFile("interfaces/flaky/transform.js", kNew);
  auto s = restart();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_FALSE(pool().isStopped("flaky"));
  // Calls spread over both workers: neither answers with the old code.
  for (int i = 0; i < 10; ++i) EXPECT_EQ(call(fn, "x").data, "new:x") << "call " << i;
  // Running now: a second restart is refused.
  auto again = pool().restartInterface("flaky", {});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().kind, ErrorKind::Conflict);
  EXPECT_EQ(pool().restartInterface("nosuch", {}).error().kind, ErrorKind::NotFound);
}

TEST_F(RestartTest, CodeThatDoesNotLoadLeavesItStopped) {
  auto fn = stopped();
  ASSERT_NE(fn, 0u);
  writeFile("interfaces/flaky/transform.js", "export function transform(s) { return ; ; ) }\n");
  auto s = restart();
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("SyntaxError"), std::string::npos) << s.error().message;
  EXPECT_TRUE(pool().isStopped("flaky"));
  EXPECT_EQ(call(fn, "x").kind, Kind::Stopped);
  // Fixed for real this time.
  writeFile("interfaces/flaky/transform.js", kNew);
  s = restart();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(call(fn, "x").data, "new:x");
}

}  // namespace
}  // namespace ductus::test
