// WorkerPool::dryRun (POST /api/v1/interfaces/{name}/try) with real worker
// processes: the script's services are answered with mocks and never reach
// the engine's handler (env() aside), and its runaways cost its worker but
// never count toward stopping the interface, nor clear the count real
// calls made.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "tests/supervisor/workers/pool_fixture.h"

namespace ductus::test {
namespace {

using supervisor::Outcome;
using Kind = supervisor::Outcome::Kind;
using namespace std::chrono_literals;

class DryRunTest : public PoolTest {
 protected:
  Outcome dryRun(supervisor::WorkerPool::FunctionId fn, const std::string& payload) {
    std::optional<Outcome> got;
    pool().dryRun(fn, payload, {}, [&](Outcome o) { got = std::move(o); });
    runUntil([&] { return got.has_value(); }, 20s);
    if (!got) return {Kind::Transient, "the test gave up waiting"};
    return *got;
  }
};

TEST_F(DryRunTest, ServicesAreMockedAndNeverReachTheHandlerButEnv) {
  writeFile("interfaces/svc/transform.js",
            "import { db, fetch, secret, env } from 'ductus';\n"
            "export async function transform(s) {\n"
            "  const rows = await db('patients').query('select 1');\n"
            "  const done = await db('patients').execute('delete from p');\n"
            "  const r = await fetch('https://lab.example/x', { method: 'POST', body: s });\n"
            "  const k = await secret('api-key');\n"
            "  const e = await env('DUCTUS_PUBLIC_SITE');\n"
            "  return JSON.stringify([rows, done.rowCount, r.status, k, e]);\n"
            "}\n");
  services_.answer = [](const supervisor::ServiceCall& c) -> Result<std::string> {
    if (c.kind == supervisor::ServiceCall::Kind::Env) return std::string("\"north\"");
    return Error{"a real service was called"};
  };
  auto fn = load(spec("svc", "text"));
  ASSERT_TRUE(fn) << fn.error().message;
  auto out = dryRun(*fn, "x");
  ASSERT_EQ(out.kind, Kind::Output) << out.data;
  EXPECT_EQ(out.data, R"j([[],0,200,"(secret api-key)","north"])j");
  ASSERT_EQ(services_.calls.size(), 1u);
  EXPECT_EQ(services_.calls[0].kind, supervisor::ServiceCall::Kind::Env);
  // The same function called for real reaches the handler.
  EXPECT_EQ(call(*fn, "x").kind, Kind::Quarantine);
  EXPECT_GT(services_.calls.size(), 1u);
}

TEST_F(DryRunTest, ARunawayKillsItsWorkerButNeverStopsTheInterface) {
  writeFile("interfaces/spin/transform.js",
            "export function transform(m) { if (m === 'spin') { while (true) {} } return m; }\n");
  auto s = spec("spin", "text");
  s.dedicated = true;
  s.workers = 1;
  s.timeout = 100ms;
  auto fn = load(s);
  ASSERT_TRUE(fn) << fn.error().message;
  // Two real runaways, then dry runs that run away and succeed: neither
  // stops it nor clears the count, so a third real one does.
  for (int i = 0; i < 2; ++i) EXPECT_EQ(call(*fn, "spin").kind, Kind::RunawayTimeout);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(dryRun(*fn, "spin").kind, Kind::RunawayTimeout);
  EXPECT_EQ(dryRun(*fn, "ok").kind, Kind::Output);
  EXPECT_FALSE(pool().isStopped("spin"));
  EXPECT_EQ(call(*fn, "spin").kind, Kind::RunawayTimeout);
  EXPECT_TRUE(pool().isStopped("spin"));
  EXPECT_EQ(dryRun(*fn, "ok").kind, Kind::Stopped);
}

}  // namespace
}  // namespace ductus::test
