// Outbound TLS on a real engine (issue #30): an MLLP destination with
// tls: { ca, certificate } delivers to a receiver we did not write
// (Python's ssl module, tests/support/tls_mllp_receiver.py) that requires
// the engine's client certificate; with the wrong client certificate the
// delivery waits, retried, with the refusal as its last error. The
// engine's own database: { url, ca } is verify-full.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
#include "tests/support/pg_cluster.h"
#include "tests/support/ports.h"
#include "tests/support/script_server.h"
#include "tests/support/test_ca.h"
#include "tests/support/test_database.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kAdt =
    "MSH|^~\\&|LAB|HOSP|DUCTUS|ENGINE|20260101120000||ADT^A01|OUT1|P|2.5\rPID|1||42^^^HOSP^MR\r";

class OutboundTls : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ductus-e2e-out-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ca_.emplace(dir_ / "ca");
    other_.emplace(dir_ / "other", "Another CA");
    server_ = ca_->issue("lab", "/CN=lab", {"localhost"}, {"127.0.0.1"});
    engine_ = ca_->issue("engine", "/CN=ductus-engine", {"ductus.example"}, {});
    stranger_ = other_->issue("stranger", "/CN=ductus-engine", {"ductus.example"}, {});
    record_ = dir_ / "received";
    receiver_.emplace(std::vector<std::string>{
        "python3", supportScript("tls_mllp_receiver.py"), "--cert", server_.cert.string(), "--key",
        server_.key.string(), "--client-ca", ca_->cert().string(), "--record", record_.string()});
    ASSERT_NE(receiver_->port(), 0);
    port_ = freePort();
  }
  void TearDown() override {
    receiver_.reset();
    fs::remove_all(dir_);
  }

  std::map<std::string, std::string> files(const Issued& client) {
    MllpProject p{.port = port_};
    p.destination = "destination:\n  mllp: { host: localhost, port: " +
                    std::to_string(receiver_->port()) +
                    ", tls: { ca: lab-ca, certificate: engine } }\n";
    auto f = p.files();
    f["resources.yaml"] = "certificates:\n"
                          "  lab-ca: { ca_file: " + ca_->cert().string() + " }\n"
                          "  engine: { cert_file: " + client.cert.string() +
                          ", key_file: " + client.key.string() + " }\n";
    return f;
  }

  std::string received() const {
    std::ifstream in(record_, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  fs::path dir_, record_;
  std::optional<TestCa> ca_, other_;
  Issued server_, engine_, stranger_;
  std::optional<ScriptServer> receiver_;
  uint16_t port_ = 0;
};

TEST_F(OutboundTls, AnMllpDestinationInTlsDeliversPresentingTheEnginesClientCertificate) {
  TestDatabase db;
  TempProject project(files(engine_));
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start()) << engine.log();
  auto c = MllpClient::connect("127.0.0.1", port_);
  ASSERT_TRUE(c) << c.error().message;
  auto ack = c->exchange(kAdt);
  ASSERT_TRUE(ack) << ack.error().message;
  EXPECT_EQ(readAck(*ack).code, "AA");
  EXPECT_TRUE(waitFor([&] { return received() == kAdt + "\x1c"; }, 20s))
      << received() << engine.log();
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

TEST_F(OutboundTls, AClientCertificateTheReceiverRefusesLeavesTheDeliveryRetryingWithTheReason) {
  TestDatabase db;
  TempProject project(files(stranger_));
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start()) << engine.log();
  auto c = MllpClient::connect("127.0.0.1", port_);
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_TRUE(c->exchange(kAdt));
  EXPECT_TRUE(waitFor(
      [&] {
        return db.value("SELECT count(*) FROM deliveries WHERE last_error LIKE "
                        "'TLS handshake with localhost:%failed: %'") == "1";
      },
      20s))
      << db.value("SELECT string_agg(coalesce(last_error, '-'), ' | ') FROM deliveries")
      << engine.log();
  EXPECT_EQ(received(), "");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

// database: { url, ca } in ductus.yaml: every connection of the engine
// verifies a PostgreSQL with ssl=on against the CA named; another CA stops
// the start, saying it is the database.
TEST_F(OutboundTls, TheEnginesDatabaseWithCaIsVerifyFullAndAnotherCaStopsTheStartNamingIt) {
  uint16_t pgPort = freePort();
  PgCluster cluster;
  ASSERT_TRUE(cluster.start(pgPort));
  Issued pg = ca_->issue("pg", "/CN=localhost", {"localhost"}, {"127.0.0.1"});
  ASSERT_TRUE(cluster.serveTls(pg.chain, pg.key, pgPort));
  const std::string url =
      "host=localhost port=" + std::to_string(pgPort) + " user=postgres dbname=postgres";
  for (const TestCa* trusted : {&*ca_, &*other_}) {
    auto f = files(engine_);
    f["ductus.yaml"] = engineYaml() + "database: { url: \"" + url + "\", ca: pg-ca }\n";
    f["resources.yaml"] += "  pg-ca: { ca_file: " + trusted->cert().string() + " }\n";
    TempProject project(f);
    EngineProcess engine(project.root(), url);
    if (trusted == &*ca_) {
      ASSERT_TRUE(engine.start()) << engine.log();
      // Every TCP connection (the engine's; ours is on the Unix socket) is TLS.
      const std::string tcp = "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a "
                              "USING (pid) WHERE a.client_addr IS NOT NULL";
      EXPECT_NE(cluster.value(tcp), "0");
      EXPECT_EQ(cluster.value(tcp + " AND NOT s.ssl"), "0");
      EXPECT_EQ(engine.terminate(), 0) << engine.log();
    } else {
      ASSERT_TRUE(engine.spawn());
      EXPECT_NE(engine.wait(60s), 0);
      EXPECT_NE(engine.log().find("the database"), std::string::npos) << engine.log();
      EXPECT_NE(engine.log().find("certificate verify failed"), std::string::npos) << engine.log();
    }
  }
}

}  // namespace
}  // namespace ductus::test
