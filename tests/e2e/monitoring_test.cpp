// Monitoring against real engines and real servers (issue #31): an
// interface whose MLLP receiver is down is judged behind (then stalled)
// in GET /interfaces, /metrics and ductusctl status; an e-mail (Debian's
// aiosmtpd) and a webhook naming it arrive within 150 s of the start; the
// heartbeat URL is called; a second engine on the same database sends no
// notification twice; an acknowledged alert stops reminding while one not
// acknowledged reminds; when the receiver comes back every message is
// delivered and a recovery goes out; last activity survives a restart.
// An interface whose intake an operator stopped is judged intake_stopped,
// not quiet, and raises no alert.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "tests/support/e2e.h"
#include "tests/support/engine_api.h"
#include "tests/support/engine_process.h"
#include "tests/support/exit_status.h"
#include "tests/support/mllp_client.h"
#include "tests/support/ports.h"
#include "tests/support/receivers.h"
#include "tests/support/smtp_receiver.h"
#include "tests/support/test_database.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using json = nlohmann::json;
using ::testing::HasSubstr;
using senders::test::HttpReceiver;
using senders::test::MllpReply;
using senders::test::hl7Ack;
using senders::test::mllpFrame;
using Receiver = senders::test::MllpReceiver;

using Api = EngineApi;

// The alerts: section both engines run.
std::string alertsYaml(uint16_t smtpPort, const std::string& hook, const std::string& beat) {
  return "alerts:\n"
         "  smtp: { host: 127.0.0.1, port: " +
         std::to_string(smtpPort) +
         ", from: ductus@hospital.test, tls: off }\n"
         "  channels:\n"
         "    oncall: { email: [oncall@hospital.test] }\n"
         "    hook: { webhook: \"" +
         hook +
         "\", format: json }\n"
         "  rules:\n"
         "    - { when: [stalled, behind, error, stopped], severity: critical, notify: [oncall, "
         "hook] }\n"
         "  heartbeat: { url: \"" +
         beat +
         "\", every: 10s }\n"
         "  remind: 20s\n"
         "  settle: 5s\n";
}

// The destination's health in GET /interfaces.
json healthOf(const json& list, const std::string& interface, const std::string& destination) {
  for (auto& i : list.value("interfaces", json::array()))
    if (i.value("name", "") == interface)
      for (auto& d : i.value("destinations", json::array()))
        if (d.value("name", "") == destination && d.contains("health")) return d["health"];
  return json::object();
}

int mailsAbout(const SmtpReceiver& smtp, const std::string& subjectPart) {
  int n = 0;
  for (auto& m : smtp.messages())
    if (m.header("Subject").find(subjectPart) != std::string::npos) ++n;
  return n;
}

class Monitoring : public ::testing::Test {
 protected:
  TestDatabase db_;
};

TEST_F(Monitoring, AFeedWhoseReceiverIsDownIsAlertedOnceAndRecovers) {
  SmtpReceiver smtp;
  ASSERT_NE(smtp.port(), 0);
  HttpReceiver hook;
  // Two receivers, both down: a bound socket that does not listen refuses.
  uint16_t labPort = 0, billingPort = 0;
  Fd labBound = closedPort(&labPort), billingBound = closedPort(&billingPort);
  uint16_t mllpPort = freePort(), apiPort = freePort(), otherPort = freePort();

  std::string alerts = alertsYaml(smtp.port(), hook.url("/hooks/x"), hook.url("/ping/beat"));
  TempProject project(std::map<std::string, std::string>{
      {"ductus.yaml", "api: { listen: 127.0.0.1:" + std::to_string(apiPort) +
                          " }\nisolates: { workers: 1, heap_mb: 256 }\n" + alerts},
      {"interfaces/adt/interface.yaml",
       "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(mllpPort) +
           " }\nformat: hl7v2\n"
           "monitor:\n  behind: { waiting: 5 }\n"
           "destinations:\n"
           "  lab:\n    mllp: { host: 127.0.0.1, port: " +
           std::to_string(labPort) +
           " }\n"
           "  billing:\n    mllp: { host: 127.0.0.1, port: " +
           std::to_string(billingPort) + " }\n"},
      {"interfaces/adt/transform.js", kPassThrough}});
  // A second engine on the same database, with an interface of its own
  // and the same alerts: its outbox claims from the same table.
  TempProject other(std::map<std::string, std::string>{
      {"ductus.yaml", engineYaml() + alerts},
      {"interfaces/orders/interface.yaml",
       "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(otherPort) +
           " }\nformat: hl7v2\ndestination:\n  file: { path: out/ }\n"},
      {"interfaces/orders/transform.js", kPassThrough}});

  char tmpl[] = "/tmp/ductus-monitoring-XXXXXX";
  fs::path dir = mkdtemp(tmpl);
  std::string control = (dir / "control").string();
  auto started = std::chrono::steady_clock::now();
  EngineProcess a(project.root(), db_.url());
  a.setExtraArgs({"--control", control});
  ASSERT_TRUE(a.start()) << a.log();
  EngineProcess b(other.root(), db_.url());
  b.setExtraArgs({"--control", (dir / "control-b").string()});
  ASSERT_TRUE(b.start()) << b.log();
  Api api{apiPort, tokenFor(db_.url(), "monitor-operator", "operator")};

  {
    auto c = MllpClient::connect("127.0.0.1", mllpPort, 5000ms);
    ASSERT_TRUE(c);
    for (int i = 0; i < 20; ++i) {
      auto ack = c->exchange(hl7("M" + std::to_string(i), "P" + std::to_string(i % 3)), 10000ms);
      ASSERT_TRUE(ack);
      ASSERT_EQ(readAck(*ack).code, "AA");
    }
  }

  // Judged behind at once (20 waiting, more than 5), stalled past a minute.
  json h;
  ASSERT_TRUE(waitFor(
      [&] {
        h = healthOf(api.get("/api/v1/interfaces"), "adt", "lab");
        auto s = h.value("state", "");
        return s == "behind" || s == "stalled";
      },
      30s))
      << h.dump();
  EXPECT_EQ(h.value("waiting", 0), 20);
  EXPECT_THAT(h.value("reason", ""), HasSubstr("20 waiting"));
  auto metrics = api.call("GET", "/api/v1/metrics").body;
  EXPECT_TRUE(metrics.find("ductus_destination_state{interface=\"adt\",destination=\"lab\","
                           "state=\"behind\"} 1") != std::string::npos ||
              metrics.find("ductus_destination_state{interface=\"adt\",destination=\"lab\","
                           "state=\"stalled\"} 1") != std::string::npos)
      << metrics.substr(0, 4000);
  EXPECT_THAT(metrics, HasSubstr("ductus_queue_oldest_seconds{interface=\"adt\","
                                 "destination=\"lab\"}"));
  auto status = runSplit({(fs::path(ductusBinary()).parent_path() / "ductusctl").string(),
                          "status", "--control", control});
  EXPECT_EQ(status.code, 0) << status.err;
  EXPECT_TRUE(status.out.find("behind") != std::string::npos ||
              status.out.find("stalled") != std::string::npos)
      << status.out;

  // An e-mail and a webhook naming it within 150 s of the start.
  bool mailed = waitFor([&] { return mailsAbout(smtp, "adt/lab") >= 1; },
                        150s - (std::chrono::steady_clock::now() - started));
  ASSERT_TRUE(mailed) << smtp.messages().size() << " e-mails; the engine's log:\n" << a.log();
  ASSERT_TRUE(waitFor(
      [&] {
        for (auto& r : hook.requests())
          if (r.path == "/hooks/x" && r.body.find("adt/lab") != std::string::npos) return true;
        return false;
      },
      20s));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 150s);
  auto mail = smtp.messages().front();
  EXPECT_EQ(mail.to, std::vector<std::string>{"oncall@hospital.test"});
  // The heartbeat, every 10 s.
  int beats = 0;
  for (auto& r : hook.requests()) beats += r.path == "/ping/beat";
  EXPECT_GE(beats, 2);

  // Acknowledge lab's alert; billing's is left to remind.
  json list = api.get("/api/v1/alerts");
  int64_t labAlert = 0;
  for (auto& al : list.value("alerts", json::array()))
    if (al.value("interface", "") == "adt" && al.value("destination", "") == "lab")
      labAlert = al.value("id", int64_t{0});
  ASSERT_NE(labAlert, 0) << list.dump();
  auto acked = api.call("POST", "/api/v1/alerts/" + std::to_string(labAlert) + "/acknowledge");
  ASSERT_EQ(acked.status, 200) << acked.body;

  // A reminder for billing (remind: 20s), none for lab.
  ASSERT_TRUE(waitFor([&] { return mailsAbout(smtp, "adt/billing") >= 2; }, 60s))
      << "no reminder for the alert nobody acknowledged";
  EXPECT_EQ(mailsAbout(smtp, "adt/lab"), 1) << "the acknowledged alert reminded";
  // Two engines claim from the same outbox: lab's one e-mail above, and
  // its one webhook.
  int labHooks = 0;
  for (auto& r : hook.requests())
    labHooks += r.path == "/hooks/x" && r.body.find("adt/lab") != std::string::npos;
  EXPECT_EQ(labHooks, 1);

  // The receivers come back: everything is delivered, then a recovery.
  Receiver lab([](const std::string&) { return MllpReply{mllpFrame(hl7Ack("AA"))}; },
               std::move(labBound));
  Receiver billing([](const std::string&) { return MllpReply{mllpFrame(hl7Ack("AA"))}; },
                   std::move(billingBound));
  // An operator's pause and resume ends the loops' back-off at once.
  for (const char* d : {"lab", "billing"}) {
    std::string base = std::string("/api/v1/interfaces/adt/destinations/") + d;
    ASSERT_EQ(api.call("POST", base + "/pause", {{"reason", "receiver back"}}).status, 200);
    ASSERT_EQ(api.call("POST", base + "/resume").status, 200);
  }
  ASSERT_TRUE(waitFor([&] { return lab.messages().size() == 20 && billing.messages().size() == 20; },
                      90s))
      << lab.messages().size() << " " << billing.messages().size();
  ASSERT_TRUE(waitFor(
      [&] {
        for (auto& m : smtp.messages())
          if (m.header("Subject").find("adt/lab") != std::string::npos &&
              m.header("Subject").find("RECOVERED") != std::string::npos)
            return true;
        return false;
      },
      60s))
      << a.log();
  EXPECT_EQ(healthOf(api.get("/api/v1/interfaces"), "adt", "lab").value("state", ""), "ok");

  // Last activity survives a restart.
  json before = api.get("/api/v1/interfaces");
  std::string lastReceived;
  for (auto& i : before["interfaces"])
    if (i["name"] == "adt") lastReceived = i["health"].value("lastReceived", "");
  ASSERT_FALSE(lastReceived.empty());
  ASSERT_EQ(a.terminate(), 0);
  ASSERT_TRUE(a.start()) << a.log();
  json after = api.get("/api/v1/interfaces");
  for (auto& i : after["interfaces"])
    if (i["name"] == "adt") {
      EXPECT_EQ(i["health"].value("lastReceived", ""), lastReceived);
    }
  fs::remove_all(dir);
}

// An operator's stop of an interface's intake is on purpose: with
// monitor: { active_within: 1m } and a rule for late and quiet, the
// stopped interface is judged intake_stopped (GET /interfaces, /metrics),
// never quiet, and no alert row is written for it, while an interface
// left running with the same expectation goes quiet and fires. Its
// destinations keep their own health: one whose receiver is down is
// behind, as ever. After the start, quiet counts from the start.
TEST_F(Monitoring, AStoppedIntakeIsNotQuietAndRaisesNoAlert) {
  HttpReceiver hook;
  uint16_t downPort = 0;
  Fd downBound = closedPort(&downPort);  // bound, not listening: refuses
  uint16_t adtPort = freePort(), ordersPort = freePort(), idlePort = freePort(),
           apiPort = freePort();
  auto mllpInterface = [](uint16_t port, const std::string& monitor,
                          const std::string& destination) {
    return "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(port) +
           " }\nformat: hl7v2\nmonitor: " + monitor + "\ndestination:\n  " + destination + "\n";
  };
  TempProject project(std::map<std::string, std::string>{
      {"ductus.yaml", "api: { listen: 127.0.0.1:" + std::to_string(apiPort) +
                          " }\nisolates: { workers: 1, heap_mb: 256 }\n"
                          "alerts:\n"
                          "  channels:\n"
                          "    hook: { webhook: \"" +
                          hook.url("/hooks/x") +
                          "\", format: json }\n"
                          "  rules:\n"
                          "    - { when: [late, quiet], severity: critical, notify: [hook] }\n"},
      {"interfaces/adt/interface.yaml",
       mllpInterface(adtPort, "{ active_within: 1m }", "file: { path: out/ }")},
      {"interfaces/adt/transform.js", kPassThrough},
      {"interfaces/orders/interface.yaml",
       mllpInterface(ordersPort, "{ active_within: 1m, behind: { waiting: 1 } }",
                     "mllp: { host: 127.0.0.1, port: " + std::to_string(downPort) + " }")},
      {"interfaces/orders/transform.js", kPassThrough},
      {"interfaces/idle/interface.yaml",
       mllpInterface(idlePort, "{ active_within: 1m }", "file: { path: out/ }")},
      {"interfaces/idle/transform.js", kPassThrough}});
  EngineProcess engine(project.root(), db_.url());
  ASSERT_TRUE(engine.start()) << engine.log();
  Api api{apiPort, tokenFor(db_.url(), "ops", "operator")};
  {
    auto c = MllpClient::connect("127.0.0.1", ordersPort, 5000ms);
    ASSERT_TRUE(c);
    for (const char* id : {"O1", "O2"}) {
      auto ack = c->exchange(hl7(id), 10000ms);
      ASSERT_TRUE(ack);
      ASSERT_EQ(readAck(*ack).code, "AA");
    }
  }
  for (const char* name : {"adt", "orders"}) {
    auto r = api.call("POST", std::string("/api/v1/interfaces/") + name + "/stop",
                      {{"reason", "sender misconfigured"}});
    ASSERT_EQ(r.status, 200) << r.body;
  }
  auto interfaceOf = [&](const std::string& name) {
    for (auto& i : api.get("/api/v1/interfaces").value("interfaces", json::array()))
      if (i.value("name", "") == name) return i;
    return json::object();
  };
  auto alertRows = [&](const std::string& name) {
    return db_.value(
        "SELECT count(*) FROM alert_state WHERE interface_name = $1 AND destination_name = ''",
        {name});
  };

  // The interface left running goes quiet past its minute (and the
  // engine's first minute) and fires: the rounds ran long enough to have
  // fired for the stopped ones too, had they been quiet.
  ASSERT_TRUE(waitFor([&] { return alertRows("idle") == "1"; }, 120s)) << engine.log();
  EXPECT_EQ(db_.value("SELECT state FROM alert_state WHERE interface_name = 'idle'"), "quiet");
  ASSERT_TRUE(waitFor(
      [&] {
        for (auto& r : hook.requests())
          if (r.path == "/hooks/x" && r.body.find("idle") != std::string::npos) return true;
        return false;
      },
      30s));

  json adt = interfaceOf("adt");
  ASSERT_TRUE(adt.contains("health")) << adt.dump();
  EXPECT_EQ(adt["health"].value("state", ""), "intake_stopped") << adt.dump();
  std::string reason = adt["health"].value("reason", "");
  EXPECT_EQ(reason.rfind("intake stopped by ops ", 0), 0u) << reason;
  EXPECT_THAT(reason, HasSubstr(" ago: sender misconfigured (POST /api/v1/interfaces/adt/start "
                                "opens it)"));
  EXPECT_EQ(adt["destinations"][0]["health"].value("state", ""), "ok") << adt.dump();
  // Its destination, whose receiver is down, is behind as ever; the
  // interface shows that, and says the stop.
  json orders = interfaceOf("orders");
  std::string ordersDest = orders["destinations"][0]["health"].value("state", "");
  EXPECT_TRUE(ordersDest == "behind" || ordersDest == "stalled") << orders.dump();
  EXPECT_EQ(orders["health"].value("state", ""), ordersDest) << orders.dump();
  EXPECT_THAT(orders["health"].value("reason", ""), HasSubstr("intake stopped by ops"));

  auto metrics = api.call("GET", "/api/v1/metrics").body;
  EXPECT_THAT(metrics,
              HasSubstr("ductus_interface_state{interface=\"adt\",state=\"intake_stopped\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("ductus_interface_state{interface=\"adt\",state=\"quiet\"} 0"));
  EXPECT_THAT(metrics, HasSubstr("ductus_interface_state{interface=\"idle\",state=\"quiet\"} 1"));

  EXPECT_EQ(alertRows("adt"), "0") << "a deliberate stop raised an alert";
  EXPECT_EQ(alertRows("orders"), "0") << "a deliberate stop raised an alert";
  for (auto& r : hook.requests()) {
    EXPECT_EQ(r.body.find("\"adt"), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("orders"), std::string::npos) << r.body;
  }

  // Started: quiet counts from the start, not from the engine's start over
  // a minute ago (nothing was ever received).
  ASSERT_EQ(api.call("POST", "/api/v1/interfaces/adt/start").status, 200);
  adt = interfaceOf("adt");
  EXPECT_EQ(adt["health"].value("state", ""), "ok") << adt.dump();
  // A round (every 15 s) after the start writes nothing for it either.
  std::this_thread::sleep_for(20s);
  EXPECT_EQ(alertRows("adt"), "0");
  EXPECT_EQ(interfaceOf("adt")["health"].value("state", ""), "ok");
}

}  // namespace
}  // namespace ductus::test
