// A real worker, started the way the engine starts one (WorkerProcess::spawn),
// seen from outside through /proc once it said `ready`: it holds only stdio
// and its socket, whatever the parent left open without close-on-exec; no
// thread of it keeps a capability, even when the engine runs as root (as
// these tests do); and its limits are those docs/architecture.md promises.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "common/fd.h"
#include "common/sanitizers.h"
#include "supervisor/workers/worker_process.h"
#include "tests/support/run_until.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

using namespace std::chrono_literals;

struct QuietEvents : supervisor::WorkerProcess::Events {
  bool exited = false;
  void onExit(supervisor::WorkerProcess&, int64_t, int, const std::string&) override {
    exited = true;
  }
};

std::string readAll(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The value after "<name>:" in a /proc status file, "" when absent.
std::string field(const std::string& status, const std::string& name) {
  auto at = status.find("\n" + name + ":");
  if (at == std::string::npos) return "";
  at = status.find_first_not_of(" \t", at + name.size() + 2);
  return status.substr(at, status.find('\n', at) - at);
}

class WorkerConfinementTest : public ::testing::Test {
 protected:
  static constexpr size_t kHeapMb = 64;

  void SetUp() override {
    uv_loop_init(&loop_);
    // Left open by "the shell that started the engine": no O_CLOEXEC.
    inherited_ = Fd(::open("/etc/passwd", O_RDONLY));
    ASSERT_TRUE(inherited_.valid());
    ASSERT_EQ(fcntl(inherited_.get(), F_GETFD) & FD_CLOEXEC, 0);
    supervisor::WorkerProcess::Options o;
    o.binary = ductusBinary();
    o.heapMb = kHeapMb;
    auto w = supervisor::WorkerProcess::spawn(&loop_, o, events_);
    ASSERT_TRUE(w) << w.error().message;
    worker_ = std::move(*w);
    ASSERT_TRUE(runUntil(&loop_, [&] { return worker_->ready() || events_.exited; }, 20s));
    ASSERT_TRUE(worker_->ready()) << "the worker exited before it was ready";
    proc_ = "/proc/" + std::to_string(worker_->pid());
  }

  void TearDown() override {
    worker_.reset();
    for (int i = 0; i < 10; ++i) uv_run(&loop_, UV_RUN_NOWAIT);
    uv_loop_close(&loop_);
  }

  uv_loop_t loop_{};
  QuietEvents events_;
  Fd inherited_;
  std::unique_ptr<supervisor::WorkerProcess> worker_;
  std::filesystem::path proc_;
};

TEST_F(WorkerConfinementTest, AWorkerHoldsOnlyStdioAndItsSocketNotWhatItsParentLeftOpen) {
  std::set<int> fds;
  for (auto& e : std::filesystem::directory_iterator(proc_ / "fd"))
    fds.insert(std::stoi(e.path().filename().string()));
  EXPECT_EQ(fds, (std::set<int>{0, 1, 2, 3})) << "the parent's fd " << inherited_.get();
}

TEST_F(WorkerConfinementTest, NoThreadOfAWorkerKeepsACapabilityEvenWhenTheEngineRunsAsRoot) {
  int threads = 0;
  // Capabilities belong to each thread: V8's platform threads and the
  // watchdog as well as the main one.
  for (auto& task : std::filesystem::directory_iterator(proc_ / "task")) {
    std::string status = readAll(task.path() / "status");
    ASSERT_FALSE(status.empty());
    ++threads;
    for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"})
      EXPECT_EQ(field(status, set), "0000000000000000")
          << set << " of thread " << task.path().filename() << " (uid " << getuid() << ")";
  }
  EXPECT_GT(threads, 1) << "V8's threads were expected";
  EXPECT_EQ(field(readAll(proc_ / "status"), "NoNewPrivs"), "1");
}

TEST_F(WorkerConfinementTest, AWorkerWritesNoCoreAndMapsAtMostFourTimesItsHeapPlusTwoGigabytes) {
  std::string limits = readAll(proc_ / "limits");
  auto row = [&](const std::string& name) {
    auto at = limits.find(name);
    if (at == std::string::npos) return std::string();
    std::istringstream in(limits.substr(at + name.size(), limits.find('\n', at) - at - name.size()));
    std::string soft, hard;
    in >> soft >> hard;
    return soft + " " + hard;
  };
  EXPECT_EQ(row("Max core file size"), "0 0") << limits;
#if !DUCTUS_ASAN
  std::string as = std::to_string((kHeapMb * 4 + 2048) << 20);
  EXPECT_EQ(row("Max address space"), as + " " + as) << limits;
#endif
}

}  // namespace
}  // namespace ductus::test
