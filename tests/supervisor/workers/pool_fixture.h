// A libuv loop, a throwaway project folder and a WorkerPool of real
// `ductus worker` processes, for the worker tests.
#pragma once

#include <gtest/gtest.h>
#include <uv.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/uv_handle.h"
#include "tests/support/run_until.h"
#include "supervisor/workers/worker_pool.h"
#include "tests/support/test_env.h"

namespace ductus::test {

// Services answered by the test: db resources by a function of (sql, params),
// env from a map, fetch by a function of (url, init); every call recorded.
class FakeServices : public supervisor::ServiceHandler {
 public:
  using Reply = std::function<void(Result<std::string>)>;
  std::function<Result<std::string>(const supervisor::ServiceCall&)> answer;
  // When set, replies are held until the test releases them.
  bool hold = false;
  std::vector<std::pair<supervisor::ServiceCall, Reply>> held;
  std::vector<supervisor::ServiceCall> calls;

  void call(const supervisor::ServiceCall& c, Reply reply) override {
    calls.push_back(c);
    if (hold) {
      held.emplace_back(c, std::move(reply));
      return;
    }
    reply(answer ? answer(c) : Result<std::string>(Error{"no fake answer"}));
  }
};

class PoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    uv_loop_init(&loop_);
    char tmpl[] = "/tmp/ductus-worker-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    project_ = tmpl;
  }

  void TearDown() override {
    if (pool_) {
      bool down = false;
      pool_->shutdown([&] { down = true; });
      runUntil([&] { return down; }, std::chrono::seconds(5));
      pool_.reset();
    }
    // Let closing handles finish.
    for (int i = 0; i < 10; ++i) uv_run(&loop_, UV_RUN_NOWAIT);
    uv_loop_close(&loop_);
    std::error_code ec;
    std::filesystem::remove_all(project_, ec);
  }

  supervisor::WorkerPool& pool(supervisor::WorkerPool::Options o = {}) {
    if (!pool_) {
      o.binary = ductusBinary();
      pool_ = std::make_unique<supervisor::WorkerPool>(&loop_, o, services_);
    }
    return *pool_;
  }

  void writeFile(const std::string& rel, const std::string& text) {
    auto p = project_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }

  supervisor::InterfaceSpec spec(const std::string& name, std::string in = "hl7v2",
                                 std::string out = "") {
    supervisor::InterfaceSpec s;
    s.name = name;
    s.dir = project_ / "interfaces" / name;
    s.projectLib = project_ / "lib";
    s.functions.push_back({"transform", in, out.empty() ? in : out, "dest"});
    return s;
  }

  // Loads the interface and waits for the first worker's verdict.
  Result<supervisor::WorkerPool::FunctionId> load(const supervisor::InterfaceSpec& s) {
    auto modules = supervisor::readInterfaceModules(s);
    if (!modules) return modules.error();
    std::optional<Status> verdict;
    auto ids = pool().addInterface(s, std::move(*modules), [&](Status st) { verdict = st; });
    if (!ids) return ids.error();
    runUntil([&] { return verdict.has_value(); }, std::chrono::seconds(20));
    if (!verdict) return Error{"no load verdict"};
    if (!*verdict) return verdict->error();
    return (*ids)[0];
  }

  supervisor::Outcome call(supervisor::WorkerPool::FunctionId fn, const std::string& payload,
                           std::chrono::milliseconds wait = std::chrono::seconds(20)) {
    std::optional<supervisor::Outcome> got;
    pool().invoke(fn, payload, {}, [&](supervisor::Outcome o) { got = std::move(o); });
    runUntil([&] { return got.has_value(); }, wait);
    if (!got) return {supervisor::Outcome::Kind::Transient, "the test gave up waiting"};
    return *got;
  }

  // Runs the loop until pred() or the time is up; true if pred() held.
  bool runUntil(const std::function<bool()>& pred, std::chrono::milliseconds limit) {
    return ductus::test::runUntil(&loop_, pred, limit);
  }

  uv_loop_t loop_{};
  std::filesystem::path project_;
  FakeServices services_;
  std::unique_ptr<supervisor::WorkerPool> pool_;
};

}  // namespace ductus::test
