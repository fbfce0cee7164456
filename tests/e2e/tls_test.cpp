// TLS and allow: on a real engine (issue #30), with a throwaway CA and
// clients we did not write: Python's ssl module as the MLLP sender
// (tests/support/tls_mllp_send.py) and curl for the API.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/mllp_project.h"
#include "tests/support/ports.h"
#include "tests/support/test_ca.h"
#include "tests/support/test_database.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const char* kAdt = "MSH|^~\\&|LAB|HOSP|DUCTUS|ENGINE|20260101120000||ADT^A01|%ID%|P|2.5\\rPID|1||42^^^HOSP^MR\\r";

std::string adt(const std::string& id) {
  std::string s = kAdt;
  s.replace(s.find("%ID%"), 4, id);
  return s;
}

// The project: one MLLP interface whose source has `sourceExtra` in its map
// (tls:, allow:), certificates: from a CA made in the project's tls/ folder.
class EngineTls : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = freePort();
    char tmpl[] = "/tmp/ductus-e2e-tls-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    caDir_ = tmpl;
    ca_.emplace(caDir_);
    server_ = ca_->issue("server", "/CN=ductus", {"localhost"}, {"127.0.0.1"});
    lab_ = ca_->issue("lab", "/CN=lab-analyzer/O=Hospital");
    stranger_ = ca_->issue("stranger", "/CN=pharmacy");
  }
  void TearDown() override { fs::remove_all(caDir_); }

  std::map<std::string, std::string> files(const std::string& sourceExtra,
                                           const std::string& engineExtra = "") {
    MllpProject p{.port = port_};
    p.engine = engineYaml() + engineExtra;
    auto f = p.files();
    f[p.interfacePath()] = "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(port_) +
                           sourceExtra + " }\nformat: hl7v2\n" + p.destination;
    f["resources.yaml"] = "certificates:\n"
                          "  server: { cert_file: " + server_.cert.string() +
                          ", key_file: " + server_.key.string() + " }\n"
                          "  analyzers: { ca_file: " + ca_->cert().string() + " }\n";
    return f;
  }

  SplitOutput send(const std::string& id, std::vector<std::string> extra) {
    std::vector<std::string> argv = {"python3",
                                     std::string(DUCTUS_SOURCE_DIR) + "/tests/support/tls_mllp_send.py",
                                     "--port", std::to_string(port_), "--ca", ca_->cert().string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(adt(id));
    return runSplit(argv);
  }
  std::vector<std::string> as(const Issued& who) {
    return {"--cert", who.cert.string(), "--key", who.key.string()};
  }

  uint16_t port_ = 0;
  fs::path caDir_;
  std::optional<TestCa> ca_;
  Issued server_, lab_, stranger_;
};

TEST_F(EngineTls, AnAnalyzerGetsAaOverTls12And13AndOtherCertificatesAreRefused) {
  TestDatabase db;
  TempProject project(files(", tls: { certificate: server, clients: { ca: analyzers, subjects: "
                            "[\"CN=lab-analyzer\"] } }"));
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start()) << engine.log();
  for (const char* v : {"1.2", "1.3"}) {
    auto lab = as(lab_);
    lab.insert(lab.end(), {"--tls", v});
    auto r = send(std::string("TLS") + v, lab);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("MSA|AA|TLS" + std::string(v)), std::string::npos) << r.out;
  }
  // No certificate, one of the same CA with another subject, TLS 1.1, plain.
  for (auto extra : {std::vector<std::string>{}, as(stranger_), std::vector<std::string>{"--tls", "1.1"},
                     std::vector<std::string>{"--plain", "--timeout", "3"}}) {
    auto r = send("REFUSED", extra);
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_EQ(r.out.find("MSA|"), std::string::npos) << r.out;
  }
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "2");
  EXPECT_NE(engine.log().find("adt: refused 127.0.0.1:"), std::string::npos) << engine.log();
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

TEST_F(EngineTls, TheApiAnswersHttpsWithHstsAndCurlVerifiesIt) {
  TestDatabase db;
  uint16_t api = freePort();
  TempProject project(files("", ""));
  // api: on a port of its own, with TLS (engineYaml() turns it off first).
  auto yaml = engineYaml();
  yaml.replace(yaml.find("api: { listen: off }"), 20,
               "api: { listen: 127.0.0.1:" + std::to_string(api) + ", tls: { certificate: server } }");
  {
    std::ofstream(project.root() / "ductus.yaml") << yaml;
  }
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start()) << engine.log();
  std::string url = "https://localhost:" + std::to_string(api) + "/api/v1/health";
  auto ok = runSplit({"curl", "-sS", "-i", "--cacert", ca_->cert().string(), "--resolve",
                      "localhost:" + std::to_string(api) + ":127.0.0.1", url});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("HTTP/1.1 200"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("Strict-Transport-Security: max-age=31536000"), std::string::npos) << ok.out;
  // curl without our CA refuses it; plain HTTP on the TLS port gets no answer.
  auto unknown = runSplit({"curl", "-sS", "--resolve",
                           "localhost:" + std::to_string(api) + ":127.0.0.1", url});
  EXPECT_NE(unknown.code, 0) << unknown.out;
  auto plain = runSplit({"curl", "-sS", "-m", "5", "http://127.0.0.1:" + std::to_string(api) +
                                                       "/api/v1/health"});
  EXPECT_NE(plain.code, 0) << plain.out;
  EXPECT_EQ(plain.out.find("200"), std::string::npos) << plain.out;
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

TEST_F(EngineTls, APairRenewedOnDiskIsServedWithin90sWithoutARestart) {
  TestDatabase db;
  TempProject project(files(", tls: { certificate: server }"));
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start()) << engine.log();
  auto served = [&] {
    auto r = runSplit({"openssl", "s_client", "-connect", "127.0.0.1:" + std::to_string(port_),
                       "-CAfile", ca_->cert().string(), "-brief"});
    return r.err + r.out;
  };
  // s_client -brief prints the peer's subject.
  EXPECT_NE(served().find("CN = ductus"), std::string::npos) << served();
  pid_t pid = engine.pid();
  ca_->issue("server", "/CN=ductus-renewed", {"localhost"}, {"127.0.0.1"});
  EXPECT_TRUE(waitFor([&] { return served().find("CN = ductus-renewed") != std::string::npos; }, 90s))
      << served() << engine.log();
  EXPECT_EQ(engine.pid(), pid);
  EXPECT_NE(engine.log().find("certificates.server"), std::string::npos) << engine.log();
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

TEST_F(EngineTls, AnExpiredCertificateStopsTheStartBeforeTheDatabaseNamingTheEntry) {
  TestDatabase db;
  auto expired = ca_->issue("server", "/CN=ductus", {"localhost"}, {"127.0.0.1"}, -2);
  TempProject project(files(", tls: { certificate: server }"));
  auto validate = runSplit({ductusBinary(), "validate", project.root().string()});
  EXPECT_EQ(validate.code, 1) << validate.out << validate.err;
  EXPECT_NE((validate.out + validate.err).find("certificates.server"), std::string::npos)
      << validate.out << validate.err;
  EXPECT_NE((validate.out + validate.err).find("expired"), std::string::npos)
      << validate.out << validate.err;
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.spawn());
  int status = engine.wait(30s);
  EXPECT_NE(status, 0) << engine.log();
  EXPECT_NE(engine.log().find("expired"), std::string::npos) << engine.log();
  // Nothing was done to the database: not even the migrations.
  EXPECT_EQ(db.value("SELECT count(*) FROM pg_tables WHERE tablename = 'messages'"), "0");
}

TEST_F(EngineTls, WithAllowOnlyTheListedAddressGetsAnAckAndOthersAreDroppedUnread) {
  TestDatabase db;
  TempProject project(files(", allow: [127.0.0.2]"));
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start()) << engine.log();
  auto refused = send("FROM-1", {"--plain", "--timeout", "3"});
  EXPECT_NE(refused.code, 0) << refused.out;
  EXPECT_EQ(refused.out.find("MSA|"), std::string::npos) << refused.out;
  auto allowed = send("FROM-2", {"--plain", "--source", "127.0.0.2"});
  EXPECT_EQ(allowed.code, 0) << allowed.out << allowed.err;
  EXPECT_NE(allowed.out.find("MSA|AA|FROM-2"), std::string::npos) << allowed.out;
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "1");
  EXPECT_NE(engine.log().find("not in allow:"), std::string::npos) << engine.log();
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

TEST_F(EngineTls, AHostNameInAllowIsResolvedBeforeTheListenerOpens) {
  TestDatabase db;
  TempProject project(files(", allow: [localhost]"));
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start()) << engine.log();
  auto allowed = send("BY-NAME", {"--plain"});
  EXPECT_EQ(allowed.code, 0) << allowed.out << allowed.err << engine.log();
  auto other = send("OTHER", {"--plain", "--source", "127.0.0.2", "--timeout", "3"});
  EXPECT_NE(other.code, 0) << other.out;
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

}  // namespace
}  // namespace ductus::test
