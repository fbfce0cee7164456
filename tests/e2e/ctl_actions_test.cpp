// ductusctl's actions against a real `ductus run` (issue #21): each goes
// through the control socket to the API's own operation, so it changes what
// the API would and writes the audit row the API would, with the caller
// local:<the OS account>, via control. The API's port is off: the actions
// don't need it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
#include "tests/support/ports.h"
#include "tests/support/test_database.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;

std::string me() {
  passwd* pw = getpwuid(geteuid());
  return pw ? pw->pw_name : "uid" + std::to_string(geteuid());
}

// Quarantines what has no MRN (as the demo project does), delivers the rest.
constexpr const char* kTransform =
    "import { quarantine } from \"ductus\";\n"
    "export function transform(msg) {\n"
    "  if (msg.get(\"PID.3.1\") === \"NONE\") throw quarantine(\"no MRN\");\n"
    "  return msg;\n"
    "}\n";

class CtlActions : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ductus-ctl-actions-XXXXXX";
    dir_ = mkdtemp(tmpl);
    control_ = (dir_ / "control").string();
    port_ = freePort();
    project_ = std::make_unique<TempProject>(MllpProject{.port = port_,
                                                         .settings = "ordering: { key: PID.3.1 }\n",
                                                         .destination = destination(),
                                                         .transform = kTransform});
    engine_ = std::make_unique<EngineProcess>(project_->root(), db_.url());
    engine_->setExtraArgs({"--control", control_});
    ASSERT_TRUE(engine_->start()) << engine_->log();
  }
  void TearDown() override {
    engine_.reset();
    fs::remove_all(dir_);
  }
  // The interface's destination block: files in out/ unless a test says.
  virtual std::string destination() { return MllpProject{}.destination; }
  SplitOutput ctl(std::vector<std::string> args) {
    args.insert(args.begin(), (fs::path(ductusBinary()).parent_path() / "ductusctl").string());
    args.insert(args.end(), {"--control", control_});
    return runSplit(args);
  }
  void send(const std::string& controlId, const std::string& mrn) {
    auto c = MllpClient::connect("127.0.0.1", port_, 5000ms);
    ASSERT_TRUE(c);
    auto ack = c->exchange(hl7(controlId, mrn), 10000ms);
    ASSERT_TRUE(ack);
    ASSERT_EQ(readAck(*ack).code, "AA");
  }
  // The message's id once its status is `status`.
  std::string idOnce(const std::string& controlId, const std::string& status) {
    std::string id;
    waitFor(
        [&] {
          id = db_.value("SELECT id FROM messages WHERE control_id = $1 AND status = "
                         "(CASE $2 WHEN 'sent' THEN 1 WHEN 'quarantined' THEN 3 "
                         "WHEN 'filtered' THEN 2 ELSE 0 END)",
                         {controlId, status});
          return !id.empty();
        },
        10s);
    return id;
  }

  TestDatabase db_;
  fs::path dir_;
  std::string control_;
  uint16_t port_ = 0;
  std::unique_ptr<TempProject> project_;
  std::unique_ptr<EngineProcess> engine_;
};

TEST_F(CtlActions, MessagesShowAndDismissAQuarantinedMessageAuditedAsTheLocalAccount) {
  send("GOOD-1", "M1");
  send("BAD-1", "NONE");
  std::string bad = idOnce("BAD-1", "quarantined");
  ASSERT_FALSE(bad.empty()) << engine_->log();
  ASSERT_FALSE(idOnce("GOOD-1", "sent").empty());

  auto list = ctl({"messages", "adt", "--status", "quarantined"});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("BAD-1"));
  EXPECT_THAT(list.out, HasSubstr("default quarantined"));
  EXPECT_THAT(list.out, ::testing::Not(HasSubstr("GOOD-1")));
  auto byKey = ctl({"messages", "adt", "--key", "M1", "--json"});
  ASSERT_EQ(byKey.code, 0) << byKey.err;
  auto page = json::parse(byKey.out);
  ASSERT_EQ(page["items"].size(), 1u) << byKey.out;
  EXPECT_EQ(page["items"][0]["controlId"], "GOOD-1");

  auto shown = ctl({"show", bad, "--payload"});
  ASSERT_EQ(shown.code, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("quarantined"));
  EXPECT_THAT(shown.out, HasSubstr("no MRN"));
  EXPECT_THAT(shown.out, HasSubstr("PID|1||NONE^^^H||Doe^John"));  // a segment a line
  EXPECT_EQ(db_.value("SELECT actor || ' ' || actor_kind || ' ' || via FROM audit_log WHERE "
                      "action = 'message.payload' AND target_id = $1",
                      {bad}),
            "local:" + me() + " system control")
      << "a payload read through ductusctl is audited as the API's are";

  auto missingReason = ctl({"dismiss", bad});
  EXPECT_EQ(missingReason.code, 2) << "--reason is required";
  auto dismissed = ctl({"dismiss", bad, "--reason", "test data"});
  ASSERT_EQ(dismissed.code, 0) << dismissed.err;
  EXPECT_THAT(dismissed.out, HasSubstr(bad + ": 1 quarantined deliveries filtered"));
  EXPECT_EQ(db_.value("SELECT last_error FROM deliveries WHERE message_id = $1", {bad}),
            "dismissed by local:" + me() + ": test data");
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log WHERE action = 'message.dismiss' AND "
                      "actor = $1 AND via = 'control' AND outcome = 'ok'",
                      {"local:" + me()}),
            "1");

  auto again = ctl({"dismiss", bad, "--reason", "twice"});
  EXPECT_EQ(again.code, 1);
  EXPECT_THAT(again.err, HasSubstr("no quarantined delivery")) << again.err;
}

TEST_F(CtlActions, ResendPauseResumeRestartAndDrainGoThroughTheApisOperations) {
  send("BAD-2", "NONE");
  std::string bad = idOnce("BAD-2", "quarantined");
  ASSERT_FALSE(bad.empty()) << engine_->log();

  // Resent, it is quarantined again by the same code: the attempt counts.
  auto resent = ctl({"resend", bad});
  ASSERT_EQ(resent.code, 0) << resent.err;
  EXPECT_THAT(resent.out, HasSubstr("1 deliveries of 1 messages back to pending"));
  ASSERT_TRUE(waitFor(
      [&] {
        return db_.value("SELECT attempts FROM deliveries WHERE message_id = $1", {bad}) == "2";
      },
      10s));

  auto paused = ctl({"pause", "adt", "--reason", "receiver down"});
  ASSERT_EQ(paused.code, 0) << paused.err;
  EXPECT_THAT(paused.out, HasSubstr("adt/default paused since"));
  send("HELD-1", "M2");
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(db_.value("SELECT status FROM messages WHERE control_id = 'HELD-1'"), "0")
      << "a paused destination delivers nothing";
  auto resumed = ctl({"resume", "adt"});
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_THAT(resumed.out, HasSubstr("adt/default delivers again"));
  EXPECT_FALSE(idOnce("HELD-1", "sent").empty());

  auto running = ctl({"restart", "adt"});
  EXPECT_EQ(running.code, 1) << "an interface that runs is not restarted";
  EXPECT_FALSE(running.err.empty());

  auto drain = ctl({"drain"});
  ASSERT_EQ(drain.code, 0) << drain.err;
  EXPECT_THAT(drain.out, HasSubstr("draining yes"));
  auto status = ctl({"drain", "--status", "--json"});
  ASSERT_EQ(status.code, 0);
  EXPECT_TRUE(json::parse(status.out).value("draining", false));
  auto undrain = ctl({"undrain"});
  ASSERT_EQ(undrain.code, 0) << undrain.err;
  EXPECT_THAT(undrain.out, HasSubstr("draining no"));
  send("AFTER-1", "M3");

  for (auto action : {"message.resend", "destination.pause", "destination.resume", "engine.drain"})
    EXPECT_NE(db_.value("SELECT count(*) FROM audit_log WHERE action = $1 AND actor = $2 AND "
                        "via = 'control'",
                        {action, "local:" + me()}),
              "0")
        << action;

  auto unknown = ctl({"messages", "nosuch"});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("nosuch"));
}

// Issue #31: the monitor's judgement in status, and the monitoring
// commands through the API's operations.
TEST_F(CtlActions, StatusSaysHealthAndHotspotsAndAlertsGoThroughTheApi) {
  auto paused = ctl({"pause", "adt", "--reason", "receiver down"});
  ASSERT_EQ(paused.code, 0) << paused.err;
  send("HELD-9", "M9");
  auto status = ctl({"status"});
  ASSERT_EQ(status.code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("HEALTH"));
  // A row "STATE  OF  WHY": the state, whose it is, and a reason.
  auto row = [&](const std::string& state, const std::string& of) {
    std::istringstream lines(status.out);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string first, second, why;
      if (words >> first >> second >> why && first == state && second == of) return true;
    }
    return false;
  };
  EXPECT_TRUE(row("paused", "adt")) << "the interface's state and why:\n" << status.out;
  EXPECT_TRUE(row("paused", "adt/default")) << status.out;
  auto asJson = ctl({"interfaces", "--json"});
  ASSERT_EQ(asJson.code, 0);
  auto dest = json::parse(asJson.out)["interfaces"][0]["destinations"][0];
  EXPECT_EQ(dest["health"]["state"], "paused") << asJson.out;

  auto hot = ctl({"hotspots", "--json"});
  ASSERT_EQ(hot.code, 0) << hot.err;
  EXPECT_TRUE(json::parse(hot.out)["destinations"].is_array()) << hot.out;
  EXPECT_EQ(ctl({"hotspots"}).code, 0);

  auto alerts = ctl({"alerts"});
  ASSERT_EQ(alerts.code, 0) << alerts.err;
  EXPECT_EQ(alerts.out, "no alerts\n") << "no alerts: in ductus.yaml, none fire";
  auto ack = ctl({"alerts", "ack", "424242"});
  EXPECT_EQ(ack.code, 1);
  EXPECT_THAT(ack.err, HasSubstr("ductusctl alerts ack: ")) << ack.err;
  EXPECT_EQ(ctl({"alerts", "silence", "424242"}).code, 2) << "--for is required";
  auto silence = ctl({"alerts", "silence", "424242", "--for", "2h"});
  EXPECT_EQ(silence.code, 1);
  EXPECT_THAT(silence.err, HasSubstr("ductusctl alerts silence: ")) << silence.err;
}

// Its receiver refuses every connection: the first message is retried.
class CtlRetrying : public CtlActions {
 protected:
  std::string destination() override {
    refusing_ = closedPort(&refusingPort_);
    return mllpDestination(refusingPort_);
  }
  Fd refusing_;  // bound, never listening: connects are refused
  uint16_t refusingPort_ = 0;
};

// Issue #36: the next retry of a lane's head, which the console's Overview
// shows, in `ductusctl hotspots` too.
TEST_F(CtlRetrying, HotspotsSaysWhenTheHeadOfARetryingLaneIsTriedAgain) {
  send("RETRY-1", "M1");
  // The loop waits 1 s, 2 s, 4 s ... between tries: the row is caught
  // while it waits, with its attempts and the receiver's refusal.
  std::string out, row;
  bool seen = waitFor(
      [&] {
        out = ctl({"hotspots"}).out;
        std::istringstream lines(out);
        for (std::string line; std::getline(lines, line);) {
          std::smatch m;
          if (std::regex_search(line, m,
                                std::regex(R"(^\s+\d+\s+1\s+\d+\s+M1\s+[1-9]\d*\s+(\S+))")) &&
              m[1] != "-") {
            row = line;
            return true;
          }
        }
        return false;
      },
      20s);
  ASSERT_TRUE(seen) << "no lane of M1 with its next try:\n" << out << engine_->log();
  EXPECT_THAT(out, HasSubstr("NEXT TRY"));
  // Two times in the row, the next try's and the message's receipt.
  std::regex time(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z)");
  EXPECT_EQ(
      std::distance(std::sregex_iterator(row.begin(), row.end(), time), std::sregex_iterator()), 2)
      << "the next try is not an RFC 3339 time beside the message's receipt: " << row;
  EXPECT_THAT(row, HasSubstr("refused")) << "the receiver's refusal is the last error: " << row;
}

}  // namespace
}  // namespace ductus::test
