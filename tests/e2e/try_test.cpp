// A dry run through a real `ductus run` (POST /api/v1/interfaces/{name}/try,
// issue #36 item 6): each destination's function runs on the payload in the
// engine's own workers and says what it made (an output with PID-5.1
// changed, a filter, a thrown error quarantined), while nothing is stored
// and nothing reaches a destination; the payload is checked first as intake
// checks it; a caller without `payloads` is refused; a transform that loops
// for ever answers as a runaway, stops nothing (dry runs don't count toward
// the stop rule) and the engine keeps delivering; an interface whose code
// real runaways stopped answers 409.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/support/e2e.h"
#include "tests/support/engine_api.h"
#include "tests/support/engine_process.h"
#include "tests/support/exit_status.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
#include "tests/support/test_database.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using json = nlohmann::json;
using ::testing::HasSubstr;

// ehr gets the message with PID-5.1 changed (THROW in MSH-10 throws, SPIN
// loops for ever); billing filters everything but SPIN-, where it loops too:
// a filter counts as a success, which would clear the runaways' count when
// the real runaways below stop the interface.
constexpr const char* kTransform =
    "export function transform(msg) {\n"
    "  const id = msg.get('MSH.10');\n"
    "  if (id.startsWith('THROW')) throw new Error('no patient ' + id);\n"
    "  if (id.startsWith('SPIN')) { while (true) {} }\n"
    "  msg.set('PID.5.1', 'TRIED');\n"
    "  return msg;\n"
    "}\n"
    "export function billing(msg) {\n"
    "  if (msg.get('MSH.10').startsWith('SPIN-')) { while (true) {} }\n"
    "  return null;\n"
    "}\n";

json bodyOf(const HttpReply& r) {
  auto j = json::parse(r.body, nullptr, false);
  return j.is_discarded() ? json() : j;
}

size_t filesIn(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return 0;
  size_t n = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); ++it) ++n;
  return n;
}

std::string stateOf(const EngineApi& api, const std::string& name) {
  json list = api.get("/api/v1/interfaces");
  for (auto& f : list["interfaces"])
    if (f["name"] == name) return f["state"];
  return "";
}

class TryE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = freePort();
    apiPort_ = freePort();
    project_ = std::make_unique<TempProject>(MllpProject{
        .port = port_,
        .settings = "timeout: 300ms\n",
        .destination = "destinations:\n"
                       "  ehr:\n    file: { path: out/ehr/ }\n"
                       "  billing:\n    file: { path: out/billing/ }\n    transform: billing\n",
        .transform = kTransform});
    engine_ = std::make_unique<EngineProcess>(project_->root(), db_.url());
    engine_->setExtraArgs({"--api-listen", "127.0.0.1:" + std::to_string(apiPort_)});
    ASSERT_TRUE(engine_->start()) << engine_->log();
    auto r = runChild({ductusBinary(), "token", "create", "tester", "--role", "operator",
                       "--permission", "payloads", "--database", db_.url()});
    ASSERT_TRUE(exitedWith(r.exitStatus, 0)) << r.out;
    api_ = {apiPort_, r.out.substr(0, r.out.find('\n'))};
    plain_ = {apiPort_, tokenFor(db_.url(), "plain", "operator")};
  }

  HttpReply tryIt(const EngineApi& api, const std::string& payload,
                  const std::string& iface = "adt") {
    return api.call("POST", "/api/v1/interfaces/" + iface + "/try", {{"payload", payload}});
  }
  std::string stored() {
    return db_.value(
        "SELECT (SELECT count(*) FROM messages) || '/' || "
        "(SELECT count(*) FROM deliveries)");
  }
  fs::path out(const char* dest) { return project_->root() / "out" / dest; }

  TestDatabase db_;
  uint16_t port_ = 0, apiPort_ = 0;
  std::unique_ptr<TempProject> project_;
  std::unique_ptr<EngineProcess> engine_;
  EngineApi api_, plain_;
};

TEST_F(TryE2e, EachDestinationSaysWhatItMadeAndNothingIsStoredOrSent) {
  std::string before = stored();

  auto r = tryIt(api_, hl7("T1", "MRN-9"));
  ASSERT_EQ(r.status, 200) << r.body;
  auto b = bodyOf(r);
  EXPECT_EQ(b["interface"], "adt");
  EXPECT_EQ(b["check"]["ok"], true);
  EXPECT_EQ(b["ran"], true);
  ASSERT_EQ(b["destinations"].size(), 2u) << b.dump();
  auto ehr = b["destinations"][0];
  EXPECT_EQ(ehr["destination"], "ehr");
  EXPECT_EQ(ehr["outcome"], "sent");
  EXPECT_THAT(ehr["output"].get<std::string>(), HasSubstr("PID|1||MRN-9^^^H||TRIED^John"));
  EXPECT_TRUE(ehr["error"].is_null());
  auto billing = b["destinations"][1];
  EXPECT_EQ(billing["destination"], "billing");
  EXPECT_EQ(billing["outcome"], "filtered");
  EXPECT_TRUE(billing["output"].is_null());

  // A payload the transform throws on: quarantined, with the error.
  r = tryIt(api_, hl7("THROW1"));
  ASSERT_EQ(r.status, 200) << r.body;
  b = bodyOf(r);
  EXPECT_EQ(b["destinations"][0]["outcome"], "quarantined");
  EXPECT_THAT(b["destinations"][0]["error"].get<std::string>(), HasSubstr("no patient THROW1"));
  EXPECT_TRUE(b["destinations"][0]["runaway"].is_null());
  EXPECT_EQ(b["destinations"][1]["outcome"], "filtered");

  // A payload intake would refuse: the check says where, nothing runs.
  r = tryIt(api_, "PID|1||M1\r");
  ASSERT_EQ(r.status, 200) << r.body;
  b = bodyOf(r);
  EXPECT_EQ(b["check"]["ok"], false);
  EXPECT_EQ(b["check"]["problems"][0]["text"], "no MSH segment");
  EXPECT_EQ(b["ran"], false);
  EXPECT_TRUE(b["destinations"].empty());

  // Nothing stored, nothing sent: no message or delivery row, no file.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(stored(), before);
  EXPECT_EQ(filesIn(out("ehr")), 0u);
  EXPECT_EQ(filesIn(out("billing")), 0u);
  // Each run on record, as a payload read is.
  EXPECT_EQ(db_.value("SELECT count(*) || ':' || min(actor) || ':' || min(target_name) FROM "
                      "audit_log WHERE action = 'message.try'"),
            "3:tester:adt");

  // Who may: the payloads permission; an interface this engine runs.
  r = tryIt(plain_, hl7("T2"));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(tryIt(api_, hl7("T3"), "nope").status, 404);
  EXPECT_EQ(api_.call("POST", "/api/v1/interfaces/adt/try", json::object()).status, 400);
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log WHERE action = 'message.try'"), "3");

  // The engine still delivers what it is sent, as before.
  auto c = MllpClient::connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->exchange(hl7("REAL1"), 10000ms).ok());
  EXPECT_TRUE(waitFor([&] { return filesIn(out("ehr")) == 1; }, 20s)) << engine_->log();
}

TEST_F(TryE2e, ARunawayAnswersAsSuchStopsNothingAndTheEngineKeepsRunning) {
  // Three runaways in a row would stop the interface were they real
  // messages; dry runs don't count.
  for (int i = 0; i < 3; ++i) {
    auto r = tryIt(api_, hl7("SPIN" + std::to_string(i)));
    ASSERT_EQ(r.status, 200) << r.body;
    auto ehr = bodyOf(r)["destinations"][0];
    EXPECT_EQ(ehr["outcome"], "quarantined") << ehr.dump();
    EXPECT_EQ(ehr["runaway"], "timeout") << ehr.dump();
    EXPECT_THAT(ehr["error"].get<std::string>(), HasSubstr("timeout"));
  }
  EXPECT_EQ(api_.health(), 200);
  EXPECT_EQ(stateOf(api_, "adt"), "running");
  // The killed worker's successor runs the next one.
  auto r = tryIt(api_, hl7("T9"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(bodyOf(r)["destinations"][0]["outcome"], "sent") << r.body;
  auto c = MllpClient::connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->exchange(hl7("REAL2"), 10000ms).ok());
  EXPECT_TRUE(waitFor([&] { return filesIn(out("ehr")) == 1; }, 20s)) << engine_->log();

  // Real runaways stop its code: a dry run is then 409.
  for (const char* id : {"SPIN-A", "SPIN-B", "SPIN-C"})
    ASSERT_TRUE(c->exchange(hl7(id), 10000ms).ok());
  ASSERT_TRUE(waitFor([&] { return stateOf(api_, "adt") == "stopped"; }, 30s)) << engine_->log();
  r = tryIt(api_, hl7("T10"));
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_THAT(r.body, HasSubstr("stopped"));
}

}  // namespace
}  // namespace ductus::test
