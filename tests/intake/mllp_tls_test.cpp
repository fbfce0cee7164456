// The MLLP listener with tls: and allow: (common/net/listener_guard.h),
// tried with a sender we did not write: Python's ssl module
// (tests/support/tls_mllp_send.py), certificates from a throwaway CA.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "common/fd.h"
#include "common/tls/certificates.h"
#include "intake/mllp_listener.h"
#include "tests/support/log_capture.h"
#include "tests/support/loop_thread.h"
#include "tests/support/test_ca.h"
#include "tests/support/test_env.h"

namespace ductus::intake {
namespace {

using hl7::AckCode;
using test::LoopThread;
using test::TestCa;

const char* kAdt = "MSH|^~\\&|LAB|HOSP|DUCTUS|ENGINE|20260101120000||ADT^A01|TLS1|P|2.5\\rPID|1||42^^^HOSP^MR\\r";

class MllpTls : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ductus-mllp-tls-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ca_.emplace(dir_ / "ca");
    other_.emplace(dir_ / "other", "Another CA");
    server_ = ca_->issue("server", "/CN=ductus", {"localhost"}, {"127.0.0.1"});
    lab_ = ca_->issue("lab", "/CN=lab-analyzer/O=Hospital");
    stranger_ = ca_->issue("stranger", "/CN=pharmacy");
    foreign_ = other_->issue("foreign", "/CN=lab-analyzer/O=Hospital");
    std::vector<tls::CertificateSource> sources(2);
    sources[0].name = "server";
    sources[0].certFile = server_.cert;
    sources[0].keyFile = server_.key;
    sources[1].name = "analyzers";
    sources[1].caFile = ca_->cert();
    auto c = tls::Certificates::load(sources);
    ASSERT_TRUE(c) << c.error().message;
    certs_ = *c;
  }
  void TearDown() override {
    loop_.run([&] { listener_.reset(); });
    std::filesystem::remove_all(dir_);
  }

  void start(net::ListenerGuard guard) {
    guard_ = guard;
    loop_.run([&] {
      MllpSettings settings;
      settings.name = "lab";
      settings.guard = guard_;
      listener_ = std::make_unique<MllpListener>(
          loop_.loop(), settings,
          [](const MllpPeer&, std::string, MllpAnswer a) { a(AckCode::Accept); });
      auto s = listener_->listen("127.0.0.1", 0);
      ASSERT_TRUE(s) << s.error().message;
      port_ = listener_->port();
    });
  }
  net::ListenerGuard tlsGuard(bool clients) {
    tls::ListenerTls l;
    l.certificate = "server";
    if (clients) {
      l.clientCa = "analyzers";
      l.subjects = {"CN=lab-analyzer"};
    }
    auto s = certs_->server(l);
    EXPECT_TRUE(s) << s.error().message;
    net::ListenerGuard g;
    g.tls = *s;
    return g;
  }

  // The sender's exit code and what it printed.
  test::SplitOutput send(std::vector<std::string> extra) {
    std::vector<std::string> argv = {"python3", std::string(DUCTUS_SOURCE_DIR) + "/tests/support/tls_mllp_send.py",
                                     "--port", std::to_string(port_), "--ca", ca_->cert().string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(kAdt);
    return test::runSplit(argv);
  }
  std::vector<std::string> as(const test::Issued& who) {
    return {"--cert", who.cert.string(), "--key", who.key.string()};
  }

  std::filesystem::path dir_;
  std::optional<TestCa> ca_, other_;
  test::Issued server_, lab_, stranger_, foreign_;
  std::shared_ptr<tls::Certificates> certs_;
  LoopThread loop_;
  net::ListenerGuard guard_;
  std::unique_ptr<MllpListener> listener_;
  uint16_t port_ = 0;
};

TEST_F(MllpTls, AnAnalyzerCertificateGetsAaOverTls12AndTls13) {
  start(tlsGuard(true));
  for (const char* v : {"1.2", "1.3"}) {
    SCOPED_TRACE(v);
    auto lab = as(lab_);
    lab.insert(lab.end(), {"--tls", v});
    auto r = send(lab);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("MSA|AA|TLS1"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find(std::string("TLSv") + v), std::string::npos) << r.err;
  }
  EXPECT_EQ(guard_.counts->handshakes.load(), 2u);
  EXPECT_EQ(guard_.counts->handshakeFailures.load(), 0u);
}

TEST_F(MllpTls, NoCertificateAnotherSubjectAndAnotherCaGetNoAckAndAreLoggedOncePerAddress) {
  test::LogCapture log;
  start(tlsGuard(true));
  for (auto who : {std::vector<std::string>{}, as(stranger_), as(foreign_)}) {
    auto r = send(who);
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_EQ(r.out.find("MSA|"), std::string::npos) << r.out;
  }
  EXPECT_TRUE(test::eventually([&] { return guard_.counts->handshakeFailures.load() == 3; }))
      << guard_.counts->handshakeFailures.load();
  EXPECT_EQ(guard_.counts->handshakes.load(), 0u);
  // Three refusals from 127.0.0.1 in a minute: one line (the rest counted).
  EXPECT_EQ(log.count("lab: refused 127.0.0.1:"), 1u) << log.all();
  EXPECT_EQ(log.count("TLS: no certificate from the client"), 1u) << log.all();
}

TEST_F(MllpTls, TheSubjectRefusedIsNamedInTheLog) {
  test::LogCapture log;
  start(tlsGuard(true));
  auto r = send(as(stranger_));
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(test::eventually([&] { return log.count("CN=pharmacy") == 1; })) << log.all();
  EXPECT_NE(log.all().find("matches none of tls.clients.subjects"), std::string::npos) << log.all();
}

TEST_F(MllpTls, Tls11AndPlainMllpOnTheTlsPortGetNoAck) {
  start(tlsGuard(false));
  auto old = send({"--tls", "1.1"});
  EXPECT_EQ(old.code, 2) << old.out << old.err;
  auto plain = send({"--plain", "--timeout", "3"});
  EXPECT_NE(plain.code, 0) << plain.out;
  EXPECT_EQ(plain.out.find("MSA|"), std::string::npos) << plain.out;
  auto fine = send({});
  EXPECT_EQ(fine.code, 0) << fine.out << fine.err;
  EXPECT_EQ(guard_.counts->handshakes.load(), 1u);
  EXPECT_EQ(guard_.counts->handshakeFailures.load(), 2u);
}

TEST_F(MllpTls, AHandshakeNotFinishedInTimeIsCutAndCounted) {
  auto g = tlsGuard(false);
  g.handshakeTimeout = std::chrono::milliseconds(300);
  start(g);
  Fd s(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port_);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ASSERT_EQ(::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::write(s.get(), "\x16\x03\x01", 3), 3);  // a handshake record begun, never finished
  char buf[64];
  timeval tv{5, 0};
  setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(::read(s.get(), buf, sizeof buf), 0);  // closed by the listener
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
  EXPECT_TRUE(test::eventually([&] { return guard_.counts->handshakeFailures.load() == 1; }));
}

TEST_F(MllpTls, AnAddressNotAllowedIsDroppedUnreadAndCounted) {
  net::ListenerGuard g;
  // 127.0.0.2 only: the sender below comes from 127.0.0.1.
  g.admits = [](const sockaddr_storage& ss) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    return ss.ss_family == AF_INET && ntohl(in->sin_addr.s_addr) == 0x7f000002;
  };
  start(g);
  auto refused = send({"--plain", "--timeout", "3"});
  EXPECT_NE(refused.code, 0) << refused.out;
  EXPECT_EQ(refused.out.find("MSA|"), std::string::npos) << refused.out;
  auto allowed = send({"--plain", "--source", "127.0.0.2"});
  EXPECT_EQ(allowed.code, 0) << allowed.out << allowed.err;
  EXPECT_NE(allowed.out.find("MSA|AA|TLS1"), std::string::npos) << allowed.out;
  EXPECT_EQ(guard_.counts->refused.load(), 1u);
}

}  // namespace
}  // namespace ductus::intake
