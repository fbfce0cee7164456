// ductusctl against a real `ductus run` (issue #21): `status --json` and
// the tables over the engine's control socket, "isn't running" once it
// stopped, and a caller of another uid refused (root only: the test runs
// ductusctl as `nobody` through setpriv).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
#include "tests/support/test_database.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;

std::string ductusctlBinary() {
  return (fs::path(ductusBinary()).parent_path() / "ductusctl").string();
}


class Ctl : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ductus-ctl-e2e-XXXXXX";
    dir_ = mkdtemp(tmpl);
    // Others may look (the refusal names the socket's owner); the
    // socket itself is 0600.
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
    control_ = (dir_ / "control").string();
    port_ = freePort();
    project_ = std::make_unique<TempProject>(MllpProject{.port = port_});
    engine_ = std::make_unique<EngineProcess>(project_->root(), db_.url());
    engine_->setExtraArgs({"--control", control_});
  }
  void TearDown() override {
    engine_.reset();
    fs::remove_all(dir_);
  }
  SplitOutput ctl(std::vector<std::string> args) {
    args.insert(args.begin(), ductusctlBinary());
    return runSplit(args);
  }

  TestDatabase db_;
  fs::path dir_;
  std::string control_;
  uint16_t port_ = 0;
  std::unique_ptr<TempProject> project_;
  std::unique_ptr<EngineProcess> engine_;
};

TEST_F(Ctl, StatusAnswersWhileTheEngineRunsAndSaysWhenItIsGone) {
  ASSERT_TRUE(engine_->start());
  struct stat st {};
  ASSERT_EQ(lstat(control_.c_str(), &st), 0) << engine_->log();
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  auto c = MllpClient::connect("127.0.0.1", port_, 5000ms);
  ASSERT_TRUE(c);
  auto ack = c->exchange(hl7("C1"), 10000ms);
  ASSERT_TRUE(ack);
  EXPECT_EQ(readAck(*ack).code, "AA");

  json status;
  ASSERT_TRUE(waitFor(
      [&] {
        auto r = ctl({"status", "--json", "--control", control_});
        if (r.code != 0) return false;
        status = json::parse(r.out, nullptr, false);
        // Sent counts when decided, pending once the delivery's row is
        // flushed: both, eventually.
        return !status.is_discarded() && status["interfaces"][0]["received"] == 1 &&
               status["interfaces"][0]["destinations"][0]["sent"] == 1 &&
               status["interfaces"][0]["destinations"][0]["pending"] == 0;
      },
      30s))
      << status.dump(2) << "\n"
      << engine_->log();
  EXPECT_EQ(status["ok"], true);
  EXPECT_EQ(status["engine"]["pid"], engine_->pid());
  EXPECT_EQ(status["engine"]["state"], "serving");
  auto& adt = status["interfaces"][0];
  EXPECT_EQ(adt["name"], "adt");
  EXPECT_EQ(adt["state"], "running");
  EXPECT_EQ(adt["intake"], "open");
  ASSERT_FALSE(status["workers"].empty());
  EXPECT_GT(status["workers"][0]["pid"].get<int64_t>(), 0);
  EXPECT_EQ(status["workers"][0]["state"], "running");

  auto table = ctl({"status", "--control", control_});
  EXPECT_EQ(table.code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("pid " + std::to_string(engine_->pid())));
  EXPECT_THAT(table.out, HasSubstr("PENDING"));
  EXPECT_THAT(table.out, HasSubstr("WORKER"));
  auto interfaces = ctl({"interfaces", "--control", control_});
  EXPECT_EQ(interfaces.code, 0) << interfaces.err;
  EXPECT_THAT(interfaces.out, HasSubstr("adt"));

  auto usage = ctl({"status", "--frob", "--control", control_});
  EXPECT_EQ(usage.code, 2) << usage.err;

  EXPECT_EQ(engine_->terminate(), 0);
  auto gone = ctl({"status", "--control", control_});
  EXPECT_EQ(gone.code, 1);
  EXPECT_EQ(gone.err,
            "ductusctl status: the engine isn't running (no control socket at " + control_ + ")\n");
}

// A killed engine leaves its socket; the next start takes its place.
TEST_F(Ctl, ARestartAfterKillReplacesTheStaleSocket) {
  ASSERT_TRUE(engine_->start());
  engine_->kill9();
  ASSERT_TRUE(fs::exists(control_));
  auto stale = ctl({"status", "--control", control_});
  EXPECT_EQ(stale.code, 1);
  EXPECT_THAT(stale.err, HasSubstr("the engine isn't running"));
  ASSERT_TRUE(engine_->start()) << engine_->log();
  auto r = ctl({"status", "--json", "--control", control_});
  ASSERT_EQ(r.code, 0) << r.err << engine_->log();
  EXPECT_EQ(json::parse(r.out)["engine"]["pid"], engine_->pid());
}

TEST_F(Ctl, RefusesACallerOfAnotherUid) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run ductusctl as another user";
  ASSERT_TRUE(engine_->start());
  // A copy nobody may run, wherever the build folder is.
  fs::path bin = dir_ / "ductusctl";
  fs::copy_file(ductusctlBinary(), bin);
  fs::permissions(bin, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  auto r = runSplit({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                     bin.string(), "status", "--control", control_});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("permission denied: the engine runs as uid 0"));
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace ductus::test
