#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <string>

#include "common/tls/certificates.h"
#include "common/tls/session.h"
#include "tests/common/tls/tls_fixture.h"

namespace ductus::tls::test {
namespace {

using ductus::test::TestCa;

// Moves ciphertext between two sessions until neither has any to send.
void pump(Session& a, Session& b, std::string& plainA, std::string& plainB) {
  for (int i = 0; i < 20; ++i) {
    std::string ab = a.takeOutput(), ba = b.takeOutput();
    if (ab.empty() && ba.empty()) return;
    if (!ab.empty()) b.receive(ab, plainB);
    if (!ba.empty()) a.receive(ba, plainA);
  }
}

class Sessions : public TlsFixture {
 protected:
  void SetUp() override {
    TlsFixture::SetUp();
    ca_.emplace(dir_ / "ca");
    other_.emplace(dir_ / "other", "Another CA");
    auto server = ca_->issue("server", "/CN=ductus", {"localhost"}, {"127.0.0.1"});
    auto lab = ca_->issue("lab", "/CN=lab-analyzer/O=Hospital");
    auto stranger = ca_->issue("stranger", "/CN=someone-else");
    auto foreign = other_->issue("foreign", "/CN=lab-analyzer/O=Hospital");
    CertificateSource otherCa;
    otherCa.name = "other-ca";
    otherCa.caFile = other_->cert();
    auto c = tls::Certificates::load({pairOf("server", server), pairOf("lab", lab),
                                      pairOf("stranger", stranger), pairOf("foreign", foreign),
                                      caOf("analyzers", *ca_), otherCa});
    ASSERT_TRUE(c) << c.error().message;
    certs_ = *c;
  }

  std::shared_ptr<ServerTls> server(bool clients) {
    ListenerTls l;
    l.certificate = "server";
    if (clients) {
      l.clientCa = "analyzers";
      l.subjects = {"CN=lab-analyzer"};
    }
    auto s = certs_->server(l);
    EXPECT_TRUE(s) << s.error().message;
    return *s;
  }
  std::shared_ptr<ClientTls> client(const std::string& certificate, const std::string& ca = "analyzers") {
    ConnectTls c;
    c.enabled = true;
    c.ca = ca;
    c.certificate = certificate;
    auto t = certs_->client(c);
    EXPECT_TRUE(t) << t.error().message;
    return *t;
  }

  std::optional<TestCa> ca_, other_;
  std::shared_ptr<tls::Certificates> certs_;
};

TEST_F(Sessions, AClientAndAServerShakeHandsAndCarryBytesBothWays) {
  auto srv = server(false);
  Session s(srv->session());
  Session c(client("")->session("localhost"));
  c.start();
  std::string atServer, atClient;
  pump(c, s, atClient, atServer);
  ASSERT_EQ(c.state(), Session::State::Open) << c.reason();
  ASSERT_EQ(s.state(), Session::State::Open) << s.reason();
  EXPECT_EQ(s.version(), "TLSv1.3");
  c.send("\x0bMSH|^~\\&|LAB\r\x1c\r");
  s.send(std::string(100000, 'a'));
  pump(c, s, atClient, atServer);
  EXPECT_EQ(atServer, "\x0bMSH|^~\\&|LAB\r\x1c\r");
  EXPECT_EQ(atClient.size(), 100000u);
  c.close();
  pump(c, s, atClient, atServer);
  EXPECT_EQ(s.state(), Session::State::Closed);
}

TEST_F(Sessions, Tls12IsSpokenAndTls11IsRefused) {
  auto srv = server(false);
  for (int version : {TLS1_2_VERSION, TLS1_1_VERSION}) {
    SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
    SSL_CTX_set_security_level(ctx.get(), 0);  // let the old client exist at all
    SSL_CTX_set_min_proto_version(ctx.get(), version);
    SSL_CTX_set_max_proto_version(ctx.get(), version);
    SslPtr ssl(SSL_new(ctx.get()));
    SSL_set_connect_state(ssl.get());
    Session c(std::move(ssl));
    Session s(srv->session());
    c.start();
    std::string a, b;
    pump(c, s, a, b);
    if (version == TLS1_2_VERSION) {
      EXPECT_EQ(s.state(), Session::State::Open) << s.reason();
      EXPECT_EQ(s.version(), "TLSv1.2");
    } else {
      EXPECT_EQ(s.state(), Session::State::Failed);
      EXPECT_NE(s.reason().find("TLS 1.2 and 1.3 only"), std::string::npos) << s.reason();
    }
  }
}

TEST_F(Sessions, PlainTextOnATlsListenerFails) {
  Session s(server(false)->session());
  std::string plain;
  EXPECT_EQ(s.receive("\x0bMSH|^~\\&|LAB|HOSP|||20260101||ADT^A01|1|P|2.5\r\x1c\r", plain),
            Session::State::Failed);
  EXPECT_TRUE(plain.empty());
  EXPECT_FALSE(s.reason().empty());
}

TEST_F(Sessions, AListenerAsksForAClientCertificateOfItsCaWithAnAllowedSubject) {
  auto srv = server(true);
  struct Case {
    std::string certificate;
    bool handshake;  // the handshake completes
    bool allowed;    // and the subject is allowed
  };
  for (const Case& k : {Case{"lab", true, true}, Case{"", false, false},
                        Case{"foreign", false, false}, Case{"stranger", true, false}}) {
    SCOPED_TRACE(k.certificate.empty() ? "no certificate" : k.certificate);
    Session s(srv->session());
    Session c(client(k.certificate)->session("localhost"));
    c.start();
    std::string a, b;
    pump(c, s, a, b);
    EXPECT_EQ(s.state() == Session::State::Open, k.handshake) << s.reason();
    if (!k.handshake) {
      EXPECT_FALSE(s.reason().empty());
      continue;
    }
    auto refusal = srv->refusal(s.peerCertificate());
    EXPECT_EQ(!refusal.has_value(), k.allowed);
    if (refusal) {
      EXPECT_NE(refusal->find("CN=someone-else"), std::string::npos) << *refusal;
    }
  }
}

TEST_F(Sessions, AClientChecksTheServersNameAndItsCa) {
  auto srv = server(false);
  struct Case {
    std::string host, ca;
    bool ok;
    std::string why;
  };
  for (const Case& k : {Case{"localhost", "analyzers", true, ""}, Case{"127.0.0.1", "analyzers", true, ""},
                        Case{"lab.example.org", "analyzers", false, "hostname mismatch"},
                        Case{"127.0.0.2", "analyzers", false, "IP address mismatch"},
                        Case{"localhost", "other-ca", false, "unable to get local issuer"}}) {
    SCOPED_TRACE(k.host + " with " + k.ca);
    Session s(srv->session());
    Session c(client("", k.ca)->session(k.host));
    c.start();
    std::string a, b;
    pump(c, s, a, b);
    EXPECT_EQ(c.state() == Session::State::Open, k.ok) << c.reason();
    if (!k.ok) {
      EXPECT_NE(c.reason().find(k.why), std::string::npos) << c.reason();
    }
  }
}

TEST_F(Sessions, ARenewedPairIsWhatTheNextSessionGets) {
  auto srv = server(false);
  auto subjectServed = [&] {
    Session s(srv->session());
    Session c(client("")->session("localhost"));
    c.start();
    std::string a, b;
    pump(c, s, a, b);
    X509* peer = c.peerCertificate();
    return peer ? subjectOf(peer) : std::string("none: ") + c.reason();
  };
  EXPECT_EQ(subjectServed(), "CN=ductus");
  ca_->issue("server", "/CN=ductus-renewed", {"localhost"}, {"127.0.0.1"});
  ASSERT_EQ(certs_->reload(), std::vector<std::string>{"server"});
  EXPECT_EQ(subjectServed(), "CN=ductus-renewed");
}

}  // namespace
}  // namespace ductus::tls::test
