// `ductus cert` as an operator runs it: the real binary making keys,
// certificates and requests in a folder of the test's, the request checked
// by the openssl CLI, and `show` judging good, expiring, expired, mismatched
// and misordered certificates from tests/support/test_ca.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/tls/certificates.h"
#include "common/tls/session.h"
#include "tests/common/config/project_dir.h"
#include "tests/support/test_ca.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

mode_t modeOf(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

class CertCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ductus-cert-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  SplitOutput cert(std::vector<std::string> args) {
    args.insert(args.begin(), {ductusBinary(), "cert"});
    return runSplit(args);
  }
  fs::path dir_;
};

TEST_F(CertCommand, SelfSignedThenShow) {
  fs::path out = dir_ / "tls";
  auto made = cert({"self-signed", "--name", "engine", "--dns", "localhost,engine.hospital.org",
                    "--ip", "127.0.0.1", "--days", "90", "--out", out.string()});
  ASSERT_EQ(made.code, 0) << made.out << made.err;
  // The entry to paste.
  EXPECT_THAT(made.out,
              HasSubstr("certificates:\n  engine: { cert_file: " + (out / "engine.pem").string() +
                        ", key_file: " + (out / "engine.key").string() + " }"));
  EXPECT_EQ(modeOf(out / "engine.key"), 0600u);
  EXPECT_THAT(slurp(out / "engine.key"), HasSubstr("-----BEGIN PRIVATE KEY-----"));

  auto shown =
      cert({"show", (out / "engine.pem").string(), "--key", (out / "engine.key").string()});
  EXPECT_EQ(shown.code, 0) << shown.out << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("subject:      CN=engine\n"));
  EXPECT_THAT(shown.out, HasSubstr("issuer:       CN=engine\n"));
  EXPECT_THAT(shown.out, HasSubstr("DNS names:    localhost, engine.hospital.org\n"));
  EXPECT_THAT(shown.out, HasSubstr("IP addresses: 127.0.0.1\n"));
  EXPECT_THAT(shown.out, HasSubstr("(89 days left)"));
  EXPECT_THAT(shown.out, HasSubstr("key: belongs to certificate 1"));
  EXPECT_THAT(shown.out, HasSubstr("ok\n"));
  EXPECT_EQ(shown.err, "");

  // Both uses, and openssl itself takes it as its own trust anchor.
  auto text =
      runSplit({"openssl", "x509", "-noout", "-text", "-in", (out / "engine.pem").string()});
  EXPECT_THAT(text.out, HasSubstr("TLS Web Server Authentication, TLS Web Client Authentication"));
  auto verify = runSplit({"openssl", "verify", "-CAfile", (out / "engine.pem").string(), "-purpose",
                          "sslserver", (out / "engine.pem").string()});
  EXPECT_EQ(verify.code, 0) << verify.out << verify.err;
}

// Moves ciphertext between two sessions until neither has any to send.
void pump(tls::Session& a, tls::Session& b) {
  std::string plainA, plainB;
  for (int i = 0; i < 20; ++i) {
    std::string ab = a.takeOutput(), ba = b.takeOutput();
    if (ab.empty() && ba.empty()) return;
    if (!ab.empty()) b.receive(ab, plainB);
    if (!ba.empty()) a.receive(ba, plainA);
  }
}

// What self-signed makes is what the engine serves and presents: a
// listener asking for a client certificate, and a client checking the
// server's name, each trusting the other's certificate as its CA.
TEST_F(CertCommand, SelfSignedPairsShakeHandsThroughTheEnginesTls) {
  for (const char* keyType : {"ec", "rsa"}) {
    SCOPED_TRACE(keyType);
    fs::path out = dir_ / keyType;
    ASSERT_EQ(cert({"self-signed", "--name", "engine", "--dns", "localhost", "--key-type", keyType,
                    "--out", out.string()})
                  .code,
              0);
    ASSERT_EQ(
        cert({"self-signed", "--name", "analyzer", "--key-type", keyType, "--out", out.string()})
            .code,
        0);
    auto entry = [&](const std::string& name, const std::string& base, bool pair) {
      tls::CertificateSource s;
      s.name = name;
      if (pair) {
        s.certFile = out / (base + ".pem");
        s.keyFile = out / (base + ".key");
      } else {
        s.caFile = out / (base + ".pem");
      }
      return s;
    };
    auto certs = tls::Certificates::load(
        {entry("server", "engine", true), entry("client", "analyzer", true),
         entry("engine-ca", "engine", false), entry("analyzers", "analyzer", false)});
    ASSERT_TRUE(certs) << certs.error().message;
    auto server = (*certs)->server(tls::ListenerTls{"server", "analyzers", {"CN=analyzer"}, ""});
    ASSERT_TRUE(server) << server.error().message;
    auto client = (*certs)->client(tls::ConnectTls{true, "engine-ca", "client", ""});
    ASSERT_TRUE(client) << client.error().message;
    tls::Session s((*server)->session());
    tls::Session c((*client)->session("localhost"));
    c.start();
    pump(c, s);
    EXPECT_EQ(c.state(), tls::Session::State::Open) << c.reason();
    EXPECT_EQ(s.state(), tls::Session::State::Open) << s.reason();
    EXPECT_FALSE((*server)->refusal(s.peerCertificate()).has_value());
  }
}

TEST_F(CertCommand, RsaKeysOnRequest) {
  auto made =
      cert({"self-signed", "--name", "engine", "--key-type", "rsa", "--out", dir_.string()});
  ASSERT_EQ(made.code, 0) << made.err;
  auto text =
      runSplit({"openssl", "x509", "-noout", "-text", "-in", (dir_ / "engine.pem").string()});
  EXPECT_THAT(text.out, HasSubstr("Public-Key: (2048 bit)"));
  EXPECT_THAT(text.out, HasSubstr("rsaEncryption"));
  // Without --dns or --ip the name is the DNS name.
  EXPECT_THAT(text.out, HasSubstr("DNS:engine"));
}

TEST_F(CertCommand, NeverOverwritesAKeyOrCertificate) {
  ASSERT_EQ(cert({"self-signed", "--name", "engine", "--out", dir_.string()}).code, 0);
  std::string key = slurp(dir_ / "engine.key");
  std::string pem = slurp(dir_ / "engine.pem");
  auto again = cert({"self-signed", "--name", "engine", "--out", dir_.string()});
  EXPECT_EQ(again.code, 1);
  EXPECT_THAT(again.err, HasSubstr("engine.key already exists; it is never overwritten"));
  EXPECT_EQ(slurp(dir_ / "engine.key"), key);
  EXPECT_EQ(slurp(dir_ / "engine.pem"), pem);

  // A certificate alone in the way: no key is left behind either.
  fs::remove(dir_ / "engine.key");
  auto req = cert({"self-signed", "--name", "engine", "--out", dir_.string()});
  EXPECT_EQ(req.code, 1);
  EXPECT_THAT(req.err, HasSubstr("engine.pem already exists"));
  EXPECT_FALSE(fs::exists(dir_ / "engine.key"));
  EXPECT_EQ(slurp(dir_ / "engine.pem"), pem);
}

TEST_F(CertCommand, RequestIsAValidCsrWithTheNames) {
  auto made = cert({"request", "--name", "lab-engine", "--subject", "/O=Hospital/OU=Lab", "--dns",
                    "lab-engine.hospital.org,lab", "--ip", "10.1.2.3", "--out", dir_.string()});
  ASSERT_EQ(made.code, 0) << made.out << made.err;
  EXPECT_EQ(modeOf(dir_ / "lab-engine.key"), 0600u);
  auto csr = runSplit(
      {"openssl", "req", "-verify", "-noout", "-text", "-in", (dir_ / "lab-engine.csr").string()});
  ASSERT_EQ(csr.code, 0) << csr.out << csr.err;
  EXPECT_THAT(csr.out + csr.err, HasSubstr("verify OK"));
  EXPECT_THAT(csr.out, HasSubstr("Subject: O = Hospital, OU = Lab, CN = lab-engine"));
  EXPECT_THAT(csr.out, HasSubstr("DNS:lab-engine.hospital.org, DNS:lab, IP Address:10.1.2.3"));
  EXPECT_THAT(csr.out, HasSubstr("TLS Web Server Authentication, TLS Web Client Authentication"));
  EXPECT_THAT(csr.out, HasSubstr("ASN1 OID: prime256v1"));
  // The key is the request's.
  auto pub1 =
      runSplit({"openssl", "req", "-noout", "-pubkey", "-in", (dir_ / "lab-engine.csr").string()});
  auto pub2 = runSplit({"openssl", "pkey", "-pubout", "-in", (dir_ / "lab-engine.key").string()});
  EXPECT_EQ(pub1.out, pub2.out);
}

TEST_F(CertCommand, ABadSubjectIsAUsageErrorAndWritesNothing) {
  auto made =
      cert({"request", "--name", "x", "--subject", "/Q=1", "--out", (dir_ / "out").string()});
  EXPECT_EQ(made.code, 2);
  EXPECT_THAT(made.err, HasSubstr("`Q` is not an attribute"));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "x.key"));
  EXPECT_EQ(cert({"self-signed", "--name", "a/b", "--out", dir_.string()}).code, 2);
  EXPECT_EQ(cert({"self-signed", "--name", "a", "--ip", "10.1.2", "--out", dir_.string()}).code, 2);
}

TEST_F(CertCommand, ShowAnExpiredCertificateExitsOne) {
  TestCa ca(dir_ / "ca");
  auto leaf = ca.issue("old", "/CN=old-analyzer", {"localhost"}, {"127.0.0.1"}, -2);
  auto shown = cert({"show", leaf.cert.string(), "--key", leaf.key.string()});
  EXPECT_EQ(shown.code, 1) << shown.out;
  EXPECT_THAT(shown.err, HasSubstr("error: certificate 1 (CN=old-analyzer) expired on "));
  EXPECT_THAT(shown.out, HasSubstr("(0 days left)"));
}

TEST_F(CertCommand, ShowWarnsUnderThirtyDays) {
  TestCa ca(dir_ / "ca");
  auto leaf = ca.issue("soon", "/CN=soon", {"localhost"}, {"127.0.0.1"}, 10);
  auto shown = cert({"show", leaf.cert.string()});
  EXPECT_EQ(shown.code, 0) << shown.out << shown.err;
  EXPECT_THAT(shown.err, HasSubstr("warning: certificate 1 (CN=soon) expires in "));
  EXPECT_THAT(shown.out, HasSubstr("usable, with 1 warning"));
}

TEST_F(CertCommand, ShowChecksTheKeyAndTheChainOrder) {
  TestCa ca(dir_ / "ca");
  auto leaf = ca.issue("server", "/CN=server/O=Hospital");
  auto other = ca.issue("other", "/CN=other");

  auto good = cert({"show", leaf.chain.string(), "--key", leaf.key.string()});
  EXPECT_EQ(good.code, 0) << good.out << good.err;
  EXPECT_THAT(good.out, HasSubstr("2 certificates"));
  EXPECT_THAT(good.out, HasSubstr("certificate 2 (a CA)"));
  EXPECT_THAT(good.out, HasSubstr("chain: in order, each certificate issued by the next"));

  auto wrongKey = cert({"show", leaf.chain.string(), "--key", other.key.string()});
  EXPECT_EQ(wrongKey.code, 1);
  EXPECT_THAT(wrongKey.err, HasSubstr("error: "));
  EXPECT_THAT(wrongKey.out, Not(HasSubstr("key: belongs")));

  // The CA first, then the leaf: not a chain a server can send.
  fs::path reversed = dir_ / "reversed.pem";
  std::ofstream(reversed) << slurp(ca.cert()) << slurp(leaf.cert);
  auto bad = cert({"show", reversed.string(), "--key", leaf.key.string()});
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_THAT(bad.err, HasSubstr("the chain is out of order"));
}

TEST_F(CertCommand, ShowAProjectEntry) {
  TestCa ca(dir_ / "ca");
  auto leaf = ca.issue("server", "/CN=server");
  config::test::ProjectDir project;
  project.write("resources.yaml",
                "certificates:\n"
                "  server: { cert_file: " +
                    leaf.chain.string() + ", key_file: " + leaf.key.string() +
                    " }\n"
                    "  analyzers: { ca_file: " +
                    ca.cert().string() + " }\n");
  auto shown = cert({"show", "--project", project.root().string(), "--entry", "server"});
  EXPECT_EQ(shown.code, 0) << shown.out << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("certificates.server: 2 certificates"));
  EXPECT_THAT(shown.out, HasSubstr("key: belongs to certificate 1"));

  auto cas = cert({"show", "--project", project.root().string(), "--entry", "analyzers"});
  EXPECT_EQ(cas.code, 0) << cas.out << cas.err;
  EXPECT_THAT(cas.out, HasSubstr("subject:      CN=Ductus Test CA"));

  auto missing = cert({"show", "--project", project.root().string(), "--entry", "nope"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_THAT(missing.err, HasSubstr("no certificates entry `nope` (it has analyzers, server)"));
  EXPECT_EQ(cert({"show", "--entry", "server"}).code, 2);
}

}  // namespace
}  // namespace ductus::test
