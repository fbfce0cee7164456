// The operator's actions on a real `ductus run` through its REST API: a
// paused destination delivers nothing, stays paused across a restart and
// delivers everything in order once resumed; an interface runaways stopped
// holds up no drain, runs its fixed code after a restart and delivers what
// waited; a drain closes the gates (/health 503) and the MLLP listeners
// (connections refused, so senders fail over), says drained once the queues
// are empty, opens them again on the same port when ended, and with stop
// ends the engine. A stopped intake closes the MLLP listener (connections
// refused) while what was stored is delivered, stays stopped across a
// restart and listens again on the same port when started; the
// configuration view shows none of interface.yaml's secrets.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cerrno>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/e2e.h"
#include "tests/support/engine_api.h"
#include "tests/support/engine_process.h"
#include "tests/support/exit_status.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
#include "tests/support/mllp_receiver.h"
#include "tests/support/test_database.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using json = nlohmann::json;

using Api = EngineApi;

// MLLP in, to an MLLP receiver of the test's.
std::string ackOf(MllpClient& c, const std::string& msg) {
  auto ack = c.exchange(msg, 10000ms);
  return ack ? readAck(*ack).code : "no answer: " + ack.error().message;
}

// What connecting to 127.0.0.1:port says: 0 when it connects, else errno.
int connectError(uint16_t port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? 0 : errno;
}

json bodyOfJson(const HttpReply& r) {
  auto j = json::parse(r.body, nullptr, false);
  return j.is_discarded() ? json() : j;
}

json destinationOf(Api& api, const std::string& interface) {
  json list = api.get("/api/v1/interfaces");
  for (auto& f : list["interfaces"])
    if (f["name"] == interface) return f["destinations"][0];
  return nullptr;
}

TEST(EngineActions, APausedDestinationWaitsAcrossARestartAndDeliversInOrderWhenResumed) {
  TestDatabase db;
  MllpReceiver receiver;
  uint16_t port = freePort(), apiPort = freePort();
  TempProject project(MllpProject{.port = port, .destination = mllpDestination(receiver.port())});
  EngineProcess engine(project.root(), db.url());
  engine.setExtraArgs({"--api-listen", "127.0.0.1:" + std::to_string(apiPort)});
  ASSERT_TRUE(engine.start()) << engine.log();
  Api api{apiPort, tokenFor(db.url(), "ops", "operator")};

  auto r = api.call("POST", "/api/v1/interfaces/adt/destinations/default/pause",
                    {{"reason", "receiver upgrade"}});
  ASSERT_EQ(r.status, 200) << r.body;
  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok());
  for (const char* id : {"P1", "P2", "P3"}) EXPECT_EQ(ackOf(*c, hl7(id)), "AA");
  std::this_thread::sleep_for(1500ms);
  EXPECT_TRUE(receiver.accepted().empty()) << "a paused destination delivered";
  EXPECT_EQ(db.value("SELECT count(*) FROM deliveries WHERE status = 0"), "3");
  auto dest = destinationOf(api, "adt");
  ASSERT_TRUE(dest["paused"].is_object()) << dest.dump();
  EXPECT_EQ(dest["paused"]["by"], "ops");
  std::string since = dest["paused"]["since"];

  // Another engine start: still paused, by whom and since when it was.
  c = Error{"closed"};
  EXPECT_TRUE(exitedWith(engine.terminate(), 0)) << engine.log();
  ASSERT_TRUE(engine.start()) << engine.log();
  std::this_thread::sleep_for(1500ms);
  EXPECT_TRUE(receiver.accepted().empty()) << "the pause did not outlive the restart";
  dest = destinationOf(api, "adt");
  ASSERT_TRUE(dest["paused"].is_object()) << dest.dump();
  EXPECT_EQ(dest["paused"]["since"], since);
  EXPECT_EQ(dest["paused"]["reasons"][0]["reason"], "receiver upgrade");

  r = api.call("POST", "/api/v1/interfaces/adt/destinations/default/resume");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(waitFor([&] { return receiver.accepted().size() == 3; }, 20s)) << engine.log();
  EXPECT_EQ(receiver.accepted(), (std::vector<std::string>{"P1", "P2", "P3"}));
  EXPECT_TRUE(destinationOf(api, "adt")["paused"].is_null());
}

TEST(EngineActions, ARestartRunsTheFixedCodeOfAStoppedInterfaceAndDeliversWhatWaited) {
  TestDatabase db;
  MllpReceiver receiver;
  uint16_t port = freePort(), apiPort = freePort();
  TempProject project(MllpProject{.port = port,
                                  .settings = "timeout: 200ms\n",
                                  .destination = mllpDestination(receiver.port()),
                                  .transform = "export function transform(msg) {\n"
                                               "  if (msg.get('MSH.10').startsWith('SPIN')) { "
                                               "while (true) {} }\n"
                                               "  return msg;\n}\n"});
  EngineProcess engine(project.root(), db.url());
  engine.setExtraArgs({"--api-listen", "127.0.0.1:" + std::to_string(apiPort)});
  ASSERT_TRUE(engine.start()) << engine.log();
  Api api{apiPort, tokenFor(db.url(), "ops", "operator")};
  auto r = api.call("POST", "/api/v1/interfaces/adt/restart");
  EXPECT_EQ(r.status, 409) << r.body;

  // Three runaways in a row stop the interface; the message after them waits.
  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok());
  for (const char* id : {"SPIN1", "SPIN2", "SPIN3"}) EXPECT_EQ(ackOf(*c, hl7(id)), "AA");
  ASSERT_TRUE(waitFor(
      [&] {
        json list = api.get("/api/v1/interfaces");
        for (auto& f : list["interfaces"])
          if (f["name"] == "adt" && f["state"] == "stopped") return true;
        return false;
      },
      60s))
      << engine.log();
  EXPECT_EQ(ackOf(*c, hl7("AFTER")), "AA");
  std::this_thread::sleep_for(1000ms);
  EXPECT_TRUE(receiver.accepted().empty());
  EXPECT_EQ(db.value("SELECT count(*) FROM deliveries WHERE status = 0"), "1");

  // A drain does not wait for what the stopped interface holds: nothing
  // moves there until an operator restarts it.
  r = api.call("POST", "/api/v1/engine/drain", {{"stop", false}});
  ASSERT_EQ(r.status, 200) << r.body;
  json drain = api.get("/api/v1/engine/drain");
  EXPECT_EQ(drain["pending"], 0) << drain.dump();
  EXPECT_EQ(drain["drained"], true) << drain.dump();
  EXPECT_EQ(api.call("DELETE", "/api/v1/engine/drain").status, 200);
  c = MllpClient::connect("127.0.0.1", port);  // the drain closed the last one
  ASSERT_TRUE(c.ok());

  // The operator fixes the code on disk, then restarts the interface.
  std::ofstream(project.root() / "interfaces/adt/transform.js")
      << "export function transform(msg) { return msg; }\n";
  r = api.call("POST", "/api/v1/interfaces/adt/restart");
  ASSERT_EQ(r.status, 200) << r.body << engine.log();
  EXPECT_TRUE(waitFor([&] { return receiver.accepted().size() == 1; }, 20s)) << engine.log();
  EXPECT_EQ(receiver.accepted(), (std::vector<std::string>{"AFTER"}));
  EXPECT_EQ(ackOf(*c, hl7("SPIN4")), "AA");  // the new code runs: no runaway now
  EXPECT_TRUE(waitFor([&] { return receiver.accepted().size() == 2; }, 20s)) << engine.log();
  EXPECT_EQ(db.value("SELECT count(*) FROM audit_log WHERE action = 'interface.restart'"), "1");
}

TEST(EngineActions, ADrainClosesTheGatesUntilEndedAndWithStopEndsTheEngineOnceDrained) {
  TestDatabase db;
  std::atomic<bool> down{true};
  MllpReceiver receiver([&](const std::string&, int) { return down ? "AE" : "AA"; });
  uint16_t port = freePort(), apiPort = freePort();
  TempProject project(MllpProject{.port = port, .destination = mllpDestination(receiver.port())});
  EngineProcess engine(project.root(), db.url());
  engine.setExtraArgs({"--api-listen", "127.0.0.1:" + std::to_string(apiPort)});
  ASSERT_TRUE(engine.start()) << engine.log();
  Api api{apiPort, tokenFor(db.url(), "ops", "operator")};
  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(ackOf(*c, hl7("BEFORE")), "AA");  // the receiver refuses it: it stays pending

  auto r = api.call("POST", "/api/v1/engine/drain", {{"stop", false}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(api.health(), 503);
  EXPECT_EQ(api.get("/api/v1/health")["status"], "draining");
  // The MLLP listener is closed, not answering AE: the idle connection is
  // closed and a new one refused, so a sender fails over to another engine.
  EXPECT_TRUE(c->closedByPeer(5000ms));
  EXPECT_EQ(connectError(port), ECONNREFUSED);
  auto status = api.get("/api/v1/engine/drain");
  EXPECT_EQ(status["draining"], true);
  EXPECT_EQ(status["pending"], 1) << status.dump();
  EXPECT_EQ(status["drained"], false);
  EXPECT_NE(api.call("GET", "/api/v1/metrics").body.find("ductus_draining 1"), std::string::npos);

  // Ended: the listener is back on the same port and the gate takes
  // messages again.
  r = api.call("DELETE", "/api/v1/engine/drain");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(api.health(), 200);
  c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok()) << c.error().message << engine.log();
  EXPECT_EQ(ackOf(*c, hl7("AGAIN")), "AA");

  // With stop: the engine ends once the receiver took what was queued.
  r = api.call("POST", "/api/v1/engine/drain", {{"stop", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  std::this_thread::sleep_for(1000ms);
  EXPECT_EQ(api.get("/api/v1/engine/drain")["drained"], false);
  EXPECT_EQ(engine.wait(1s), -1) << "the engine stopped before it was drained";
  down = false;
  EXPECT_TRUE(waitFor([&] { return receiver.accepted().size() == 2; }, 30s)) << engine.log();
  int exit = engine.wait(40s);
  EXPECT_TRUE(exitedWith(exit, 0)) << engine.log();
  EXPECT_EQ(receiver.accepted(), (std::vector<std::string>{"BEFORE", "AGAIN"}));
  EXPECT_EQ(db.value("SELECT count(*) FROM deliveries WHERE status = 0"), "0");
  EXPECT_EQ(db.value("SELECT string_agg(action, ',' ORDER BY id) FROM audit_log WHERE action "
                     "LIKE 'engine.%drain'"),
            "engine.drain,engine.undrain,engine.drain");
  EXPECT_NE(engine.log().find("drained"), std::string::npos) << engine.log();
}

json interfaceOf(Api& api, const std::string& name) {
  json list = api.get("/api/v1/interfaces");
  for (auto& f : list["interfaces"])
    if (f["name"] == name) return f;
  return nullptr;
}

TEST(EngineActions, AStoppedIntakeRefusesSendersAcrossARestartWhileWhatItStoredIsDelivered) {
  TestDatabase db;
  std::atomic<bool> down{true};
  MllpReceiver receiver([&](const std::string&, int) { return down ? "AE" : "AA"; });
  uint16_t port = freePort(), apiPort = freePort();
  TempProject project(MllpProject{.port = port, .destination = mllpDestination(receiver.port())});
  EngineProcess engine(project.root(), db.url());
  engine.setExtraArgs({"--api-listen", "127.0.0.1:" + std::to_string(apiPort)});
  ASSERT_TRUE(engine.start()) << engine.log();
  Api api{apiPort, tokenFor(db.url(), "ops", "operator")};
  Api viewer{apiPort, tokenFor(db.url(), "watcher", "viewer")};
  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(ackOf(*c, hl7("STORED")), "AA");  // the receiver refuses it: it stays pending
  EXPECT_TRUE(interfaceOf(api, "adt")["intakeStopped"].is_null());

  EXPECT_EQ(viewer.call("POST", "/api/v1/interfaces/adt/stop").status, 403);
  EXPECT_EQ(api.call("POST", "/api/v1/interfaces/nosuch/stop").status, 404);
  auto r = api.call("POST", "/api/v1/interfaces/adt/stop", {{"reason", "sender misconfigured"}});
  ASSERT_EQ(r.status, 200) << r.body;
  // The listener is closed: the idle connection goes, a new one is refused.
  EXPECT_TRUE(c->closedByPeer(5000ms));
  EXPECT_EQ(connectError(port), ECONNREFUSED);
  EXPECT_EQ(api.call("POST", "/api/v1/interfaces/adt/stop").status, 409);
  json f = interfaceOf(api, "adt");
  ASSERT_TRUE(f["intakeStopped"].is_object()) << f.dump();
  EXPECT_EQ(f["intakeStopped"]["by"], "ops");
  EXPECT_EQ(f["intakeStopped"]["reason"], "sender misconfigured");
  std::string since = f["intakeStopped"]["since"];
  // Only intake stops: what was stored is delivered meanwhile.
  down = false;
  EXPECT_TRUE(waitFor([&] { return receiver.accepted().size() == 1; }, 30s)) << engine.log();

  // Another engine start: the listener never opens, and the log says why.
  EXPECT_TRUE(exitedWith(engine.terminate(), 0)) << engine.log();
  ASSERT_TRUE(engine.start()) << engine.log();
  EXPECT_EQ(connectError(port), ECONNREFUSED);
  EXPECT_NE(engine.log().find("interface adt: intake stopped by ops since " + since),
            std::string::npos)
      << engine.log();
  f = interfaceOf(api, "adt");
  ASSERT_TRUE(f["intakeStopped"].is_object()) << f.dump();
  EXPECT_EQ(f["intakeStopped"]["since"], since);

  // Started: the same port takes messages again.
  r = api.call("POST", "/api/v1/interfaces/adt/start");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(bodyOfJson(r)["intakeStopped"].is_null()) << r.body;
  EXPECT_EQ(api.call("POST", "/api/v1/interfaces/adt/start").status, 409);
  c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok()) << c.error().message << engine.log();
  EXPECT_EQ(ackOf(*c, hl7("AFTER")), "AA");
  EXPECT_TRUE(waitFor([&] { return receiver.accepted().size() == 2; }, 30s)) << engine.log();
  EXPECT_EQ(receiver.accepted(), (std::vector<std::string>{"STORED", "AFTER"}));
  EXPECT_TRUE(interfaceOf(api, "adt")["intakeStopped"].is_null());
  EXPECT_EQ(
      db.value("SELECT string_agg(action || ' ' || actor || ' ' || coalesce(detail->>'reason', "
               "'-'), ',' ORDER BY id) FROM audit_log WHERE action LIKE 'interface.%'"),
      "interface.stop ops sender misconfigured,interface.start ops sender misconfigured");
  EXPECT_EQ(db.value("SELECT count(*) FROM interface_stops"), "0");
}

TEST(EngineActions, TheConfigurationIsTheRunningInterfacesWithoutItsSecrets) {
  TestDatabase db;
  uint16_t port = freePort(), apiPort = freePort();
  // Nothing is sent: the receiver at port 9 is never called.
  TempProject project(MllpProject{
      .port = port,
      .settings = "ordering: { key: PID.3.1 }\n",
      .destination = "destination:\n"
                     "  http:\n"
                     "    url: \"http://ductus:Secret-Pa55@127.0.0.1:9/in?token=Secret-T0ken\"\n"
                     "    headers: { Authorization: \"Bearer Secret-Header\" }\n"});
  EngineProcess engine(project.root(), db.url());
  engine.setExtraArgs({"--api-listen", "127.0.0.1:" + std::to_string(apiPort)});
  ASSERT_TRUE(engine.start()) << engine.log();
  Api viewer{apiPort, tokenFor(db.url(), "watcher", "viewer")};
  auto r = viewer.call("GET", "/api/v1/interfaces/adt/configuration");
  ASSERT_EQ(r.status, 200) << r.body;
  for (const char* secret : {"Secret-Pa55", "Secret-T0ken", "Secret-Header"})
    EXPECT_EQ(r.body.find(secret), std::string::npos) << secret << " in " << r.body;
  json b = bodyOfJson(r);
  EXPECT_EQ(b["source"]["kind"], "mllp");
  EXPECT_EQ(b["source"]["listen"], "127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(b["ordering"]["key"], "PID.3.1");
  EXPECT_EQ(b["destinations"][0]["target"], "http://***@127.0.0.1:9/in?***");
  EXPECT_EQ(b["destinations"][0]["headers"]["Authorization"], "***");
  EXPECT_EQ(viewer.call("GET", "/api/v1/interfaces/nosuch/configuration").status, 404);
  // In the document the console's types are made from.
  json spec = viewer.get("/api/v1/openapi.json");
  EXPECT_TRUE(spec["paths"].contains("/api/v1/interfaces/{name}/configuration"));
  EXPECT_TRUE(spec["paths"].contains("/api/v1/interfaces/{name}/stop"));
  EXPECT_TRUE(spec["paths"].contains("/api/v1/interfaces/{name}/start"));
}

}  // namespace
}  // namespace ductus::test
