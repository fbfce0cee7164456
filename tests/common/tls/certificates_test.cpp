#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/tls/certificate.h"
#include "common/tls/certificates.h"
#include "tests/common/tls/tls_fixture.h"

namespace ductus::tls::test {
namespace {

using ductus::test::TestCa;

class Certificates : public TlsFixture {};

TEST_F(Certificates, APairFromFilesAndOneFromPemTextLoad) {
  TestCa ca(dir_ / "ca");
  auto leaf = ca.issue("server", "/CN=ductus.hospital.org/O=Hospital", {"ductus.hospital.org"});
  CertificateSource text;
  text.name = "text";
  text.certPem = read(leaf.chain);
  text.keyPem = read(leaf.key);
  auto c = tls::Certificates::load({pairOf("server", leaf), text, caOf("analyzers", ca)});
  ASSERT_TRUE(c) << c.error().message;
  auto server = (*c)->entry("server");
  ASSERT_TRUE(server);
  EXPECT_EQ(server->subject, "O=Hospital,CN=ductus.hospital.org");
  EXPECT_EQ(server->chain.size(), 1u);
  EXPECT_EQ((*c)->entry("text")->chain.size(), 2u);  // the leaf and its CA
  EXPECT_EQ((*c)->entry("analyzers")->cas.size(), 1u);
  EXPECT_GT(server->notAfter, Clock::now() + std::chrono::hours(24 * 29));
}

TEST_F(Certificates, AKeyOfAnotherCertificateIsRefusedNamingTheEntry) {
  TestCa ca(dir_ / "ca");
  auto a = ca.issue("a", "/CN=a"), b = ca.issue("b", "/CN=b");
  auto s = pairOf("server", a);
  s.keyFile = b.key;
  auto c = tls::Certificates::load({s});
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("certificates.server (resources.yaml:3)"), std::string::npos)
      << c.error().message;
  EXPECT_NE(c.error().message.find("does not belong to the certificate"), std::string::npos)
      << c.error().message;
}

TEST_F(Certificates, AnExpiredCertificateIsRefusedNamingTheEntryAndTheDate) {
  TestCa ca(dir_ / "ca");
  auto old = ca.issue("old", "/CN=old", {"localhost"}, {}, -3);
  auto c = tls::Certificates::load({pairOf("server", old)});
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("certificates.server"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("expired on 20"), std::string::npos) << c.error().message;
  EXPECT_EQ(c.error().kind, ErrorKind::Config);
}

TEST_F(Certificates, WhatIsNotACertificateIsRefusedSayingWhatWasExpected) {
  std::ofstream(dir_ / "junk.pem") << "hello\n";
  CertificateSource s;
  s.name = "junk";
  s.caFile = dir_ / "junk.pem";
  auto c = tls::Certificates::load({s});
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("BEGIN CERTIFICATE"), std::string::npos) << c.error().message;
  s.caFile = dir_ / "missing.pem";
  c = tls::Certificates::load({s});
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("missing.pem"), std::string::npos) << c.error().message;
}

TEST_F(Certificates, ARenewedPairOnDiskReplacesTheOldAndABrokenOneKeepsIt) {
  TestCa ca(dir_ / "ca");
  auto first = ca.issue("server", "/CN=first");
  auto c = tls::Certificates::load({pairOf("server", first)});
  ASSERT_TRUE(c) << c.error().message;
  uint64_t gen = (*c)->generation();
  EXPECT_TRUE((*c)->reload().empty());  // nothing changed
  EXPECT_EQ((*c)->generation(), gen);

  // The same files, rewritten with a new pair: same names, other content.
  ca.issue("server", "/CN=second");
  EXPECT_EQ((*c)->reload(), std::vector<std::string>{"server"});
  EXPECT_EQ((*c)->entry("server")->subject, "CN=second");
  EXPECT_GT((*c)->generation(), gen);

  // A half-written renewal (the certificate without its key) is not used.
  auto other = ca.issue("other", "/CN=third");
  std::filesystem::copy_file(other.cert, first.cert, std::filesystem::copy_options::overwrite_existing);
  EXPECT_TRUE((*c)->reload().empty());
  EXPECT_EQ((*c)->entry("server")->subject, "CN=second");
}

TEST_F(Certificates, SubjectPatternsMatchTheSubjectsAttributesOrItsDnsNames) {
  TestCa ca(dir_ / "ca");
  auto leaf = ca.issue("lab", "/CN=lab-analyzer/O=Hospital/OU=Lab", {"lab-gw.hospital.org"}, {});
  auto c = tls::Certificates::load({pairOf("lab", leaf)});
  ASSERT_TRUE(c) << c.error().message;
  X509* x = (*c)->entry("lab")->chain[0].get();
  EXPECT_TRUE(subjectMatches(x, "CN=lab-analyzer"));
  EXPECT_TRUE(subjectMatches(x, "cn=lab-analyzer, O=Hospital"));
  EXPECT_TRUE(subjectMatches(x, "OU=Lab"));
  EXPECT_FALSE(subjectMatches(x, "CN=lab-analyzer,O=Other"));
  EXPECT_FALSE(subjectMatches(x, "CN=Lab-Analyzer"));  // values as written
  EXPECT_TRUE(subjectMatches(x, "lab-gw.hospital.org"));
  EXPECT_TRUE(subjectMatches(x, "*.hospital.org"));
  EXPECT_FALSE(subjectMatches(x, "*.org"));
  EXPECT_FALSE(subjectMatches(x, "lab-analyzer"));  // a CN is not a DNS name

  EXPECT_TRUE(checkSubjectPattern("CN=x,O=y"));
  EXPECT_TRUE(checkSubjectPattern("*.lab.hospital.org"));
  EXPECT_FALSE(checkSubjectPattern("XX=y"));
  EXPECT_FALSE(checkSubjectPattern("CN="));
  EXPECT_FALSE(checkSubjectPattern("CN=x,nothing"));
  EXPECT_FALSE(checkSubjectPattern("not a name"));
  EXPECT_FALSE(checkSubjectPattern(""));
}

}  // namespace
}  // namespace ductus::tls::test
