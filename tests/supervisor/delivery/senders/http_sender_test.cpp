// The HTTP sender against a real HTTP server on 127.0.0.1: status codes map
// to outcomes, failures are Transient, many requests share one curl multi,
// and the loop keeps running while a receiver is slow.
#include "supervisor/delivery/senders/http_sender.h"

#include <gtest/gtest.h>
#include <uv.h>

#include <optional>

#include "tests/support/outbound_tls.h"
#include "tests/support/receivers.h"
#include "tests/support/script_server.h"

namespace ductus::senders {
namespace {

using namespace std::chrono_literals;

class HttpSenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    multi_ = std::make_unique<net::CurlMulti>(&loop_);
  }
  void TearDown() override {
    senders_.clear();
    multi_.reset();
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  HttpSender& makeSender(std::string url, std::chrono::milliseconds timeout = 5s) {
    HttpSenderSettings s;
    s.url = std::move(url);
    s.timeout = timeout;
    s.headers = {{"X-Destination", "lab"}, {"Content-Type", "application/hl7-v2"}};
    senders_.push_back(std::make_unique<HttpSender>(*multi_, s));
    return *senders_.back();
  }

  SendOutcome sendOne(HttpSender& sender, SendRequest req = {1, "adt", "lab", "MSH|body", {}, {}}) {
    std::optional<SendOutcome> out;
    int calls = 0;
    sender.send(std::move(req), [&](SendOutcome o) {
      ++calls;
      out = std::move(o);
    });
    EXPECT_FALSE(out.has_value()) << "the callback ran inside send()";
    EXPECT_TRUE(test::runUntil(&loop_, [&] { return out.has_value(); }));
    EXPECT_EQ(calls, 1);
    return out.value_or(SendOutcome::transient("no outcome"));
  }

  uv_loop_t loop_;
  std::unique_ptr<net::CurlMulti> multi_;
  std::vector<std::unique_ptr<HttpSender>> senders_;
};

TEST_F(HttpSenderTest, A200IsSentAndTheServerGetsTheBodyAndHeaders) {
  test::HttpReceiver server;
  std::string body = "MSH|^~\\&|A|B\rPID|1||M\xfcller\r";
  auto out = sendOne(makeSender(server.url("/in")), {7, "adt", "lab", body, {}, {}});
  EXPECT_EQ(out.kind, SendOutcomeKind::Sent) << out.detail;
  auto seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].path, "/in");
  EXPECT_EQ(seen[0].body, body);  // byte for byte, ISO-8859-1 included
  EXPECT_EQ(seen[0].header("X-Destination"), "lab");
  EXPECT_EQ(seen[0].header("Content-Type"), "application/hl7-v2");
}

TEST_F(HttpSenderTest, A202IsSent) {
  test::HttpReceiver server;
  EXPECT_EQ(sendOne(makeSender(server.url("/status/202"))).kind, SendOutcomeKind::Sent);
}

TEST_F(HttpSenderTest, A404IsPermanentWithTheStatusAndTheStartOfTheBodyInTheDetail) {
  test::HttpReceiver server;
  auto out = sendOne(makeSender(server.url("/status/404")));
  EXPECT_EQ(out.kind, SendOutcomeKind::Permanent);
  EXPECT_EQ(out.detail.rfind("HTTP 404 Not Found: body of 404", 0), 0u) << out.detail;
  // Only the first 200 bytes of the body.
  EXPECT_EQ(out.detail.size(), std::string("HTTP 404 Not Found: ").size() + 200);
}

TEST_F(HttpSenderTest, A400AndAnUnfollowedRedirectArePermanent) {
  test::HttpReceiver server;
  EXPECT_EQ(sendOne(makeSender(server.url("/status/400"))).kind, SendOutcomeKind::Permanent);
  EXPECT_EQ(sendOne(makeSender(server.url("/status/301"))).kind, SendOutcomeKind::Permanent);
}

TEST_F(HttpSenderTest, A503A429AndA408AreTransient) {
  test::HttpReceiver server;
  for (int status : {503, 429, 408, 500}) {
    auto out = sendOne(makeSender(server.url("/status/" + std::to_string(status))));
    EXPECT_EQ(out.kind, SendOutcomeKind::Transient) << status;
    EXPECT_NE(out.detail.find("HTTP " + std::to_string(status)), std::string::npos) << out.detail;
  }
}

TEST_F(HttpSenderTest, ARefusedConnectionIsTransient) {
  uint16_t port = 0;
  Fd bound = test::closedPort(&port);  // held: nobody listens there meanwhile
  ASSERT_TRUE(bound.valid());
  auto out = sendOne(makeSender("http://127.0.0.1:" + std::to_string(port) + "/in"));
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_NE(out.detail.find(std::to_string(port)), std::string::npos) << out.detail;
}

TEST_F(HttpSenderTest, AResponseSlowerThanTheTimeoutIsTransient) {
  test::HttpReceiver server;
  auto out = sendOne(makeSender(server.url("/slow/2000"), 200ms));
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_NE(out.detail.find("timed out"), std::string::npos) << out.detail;
}

TEST_F(HttpSenderTest, TheLoopKeepsTurningWhileAResponseIsSlow) {
  test::HttpReceiver server;
  HttpSender& sender = makeSender(server.url("/slow/300"));
  // Ticks that came while the server held the request and the send was
  // still open: a blocking transfer would leave the loop no turn there.
  struct Watch {
    test::HttpReceiver* server;
    HttpSender* sender;
    int ticks = 0;
  } watch{&server, &sender};
  uv_timer_t ticker;
  uv_timer_init(&loop_, &ticker);
  ticker.data = &watch;
  uv_timer_start(
      &ticker,
      [](uv_timer_t* t) {
        auto* w = static_cast<Watch*>(t->data);
        if (w->server->requests().size() == 1 && w->sender->inFlight() == 1) ++w->ticks;
      },
      10, 10);
  auto out = sendOne(sender);
  uv_close(reinterpret_cast<uv_handle_t*>(&ticker), nullptr);
  uv_run(&loop_, UV_RUN_NOWAIT);  // the close finishes while `ticker` lives
  EXPECT_EQ(out.kind, SendOutcomeKind::Sent) << out.detail;
  // Some 30 at 10 ms a tick; a few are proof enough on a busy machine.
  EXPECT_GE(watch.ticks, 3);
}

TEST_F(HttpSenderTest, FiftyRequestsRunConcurrentlyThroughOneMultiAndAllComplete) {
  test::HttpReceiver server;
  HttpSender& sender = makeSender(server.url("/slow/200"));
  std::vector<std::optional<SendOutcome>> outcomes(50);
  for (int i = 0; i < 50; ++i) {
    sender.send({i, "adt", "lab", "message " + std::to_string(i), {}, {}},
                [&outcomes, i](SendOutcome o) { outcomes[i] = std::move(o); });
  }
  EXPECT_EQ(sender.inFlight(), 50u);
  ASSERT_TRUE(test::runUntil(&loop_, [&] {
    return std::all_of(outcomes.begin(), outcomes.end(), [](auto& o) { return o.has_value(); });
  }));
  for (auto& o : outcomes) EXPECT_EQ(o->kind, SendOutcomeKind::Sent) << o->detail;
  EXPECT_EQ(server.requests().size(), 50u);
  // They overlapped at the server rather than queueing one behind another.
  EXPECT_GT(server.peakConcurrent(), 10);
  EXPECT_EQ(multi_->running(), 0u);
}

TEST_F(HttpSenderTest, TheMessageCanChooseTheMethodAndReplaceAHeader) {
  test::HttpReceiver server;
  SendRequest req{1, "adt", "lab", "{}", std::string("put"), {{"content-type", "application/json"},
                                                              {"X-Message", "1"}}};
  auto out = sendOne(makeSender(server.url("/in")), req);
  EXPECT_EQ(out.kind, SendOutcomeKind::Sent) << out.detail;
  auto seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "PUT");
  EXPECT_EQ(seen[0].body, "{}");
  EXPECT_EQ(seen[0].header("Content-Type"), "application/json");
  EXPECT_EQ(seen[0].header("X-Message"), "1");
  EXPECT_EQ(seen[0].header("X-Destination"), "lab");
}

TEST_F(HttpSenderTest, AHeaderValueWithANewlineIsRefusedPermanentlyAndNothingIsSent) {
  test::HttpReceiver server;
  SendRequest req{1, "adt", "lab", "{}", {}, {{"X-Evil", "a\r\nX-Injected: 1"}}};
  auto out = sendOne(makeSender(server.url("/in")), req);
  EXPECT_EQ(out.kind, SendOutcomeKind::Permanent);
  EXPECT_TRUE(server.requests().empty());
}

TEST_F(HttpSenderTest, ClosingStopsRunningRequestsWithTransientAndCallsDone) {
  test::HttpReceiver server;
  HttpSender& sender = makeSender(server.url("/slow/5000"));
  std::vector<SendOutcome> outcomes;
  for (int i = 0; i < 3; ++i) {
    sender.send({i, "adt", "lab", "x", {}, {}},
                [&](SendOutcome o) { outcomes.push_back(std::move(o)); });
  }
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return server.requests().size() == 3; }));
  bool done = false;
  sender.close([&] { done = true; });
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return done; }));
  ASSERT_EQ(outcomes.size(), 3u);
  for (auto& o : outcomes) EXPECT_EQ(o.detail, "sender closed");
  EXPECT_EQ(multi_->running(), 0u);
}

TEST(HttpStatus, EachStatusClassMapsToItsOutcome) {
  EXPECT_EQ(outcomeOfHttpStatus(204, "", "").kind, SendOutcomeKind::Sent);
  EXPECT_EQ(outcomeOfHttpStatus(302, "Found", "").kind, SendOutcomeKind::Permanent);
  EXPECT_EQ(outcomeOfHttpStatus(422, "", "").kind, SendOutcomeKind::Permanent);
  EXPECT_EQ(outcomeOfHttpStatus(429, "", "").kind, SendOutcomeKind::Transient);
  EXPECT_EQ(outcomeOfHttpStatus(599, "", "").kind, SendOutcomeKind::Transient);
  EXPECT_EQ(outcomeOfHttpStatus(404, "Not Found", "gone").detail, "HTTP 404 Not Found: gone");
}

// ---- https with a ConnectTls: against Python's http.server wrapped in its
// ssl module (tests/support/https_receiver.py), requiring a client
// certificate from our test CA.

class HttpSenderTlsTest : public HttpSenderTest {
 protected:
  void TearDown() override {
    HttpSenderTest::TearDown();
    server_.reset();
  }

  uint16_t startServer(const ::ductus::test::Issued& server) {
    server_.emplace(std::vector<std::string>{
        "python3", ::ductus::test::supportScript("https_receiver.py"), "--cert",
        server.cert.string(), "--key", server.key.string(), "--client-ca",
        files_.ca().cert().string(), "--record", files_.record().string()});
    EXPECT_NE(server_->port(), 0) << "the server did not start";
    return server_->port();
  }

  std::shared_ptr<tls::ClientTls> clientTls(const ::ductus::test::TestCa& trusted,
                                            bool clientCertificate) {
    return files_.client(trusted, clientCertificate);
  }

  HttpSender& makeTlsSender(const std::string& url, std::shared_ptr<const net::CurlTls> tls) {
    HttpSenderSettings s;
    s.url = url;
    s.timeout = 5s;
    s.tls = std::move(tls);
    senders_.push_back(std::make_unique<HttpSender>(*multi_, s));
    return *senders_.back();
  }

  std::string received() const { return files_.recorded(); }
  const ::ductus::test::TestCa& ca() const { return files_.ca(); }
  const ::ductus::test::TestCa& other() const { return files_.other(); }

  ::ductus::test::OutboundTlsFiles files_;
  std::optional<::ductus::test::ScriptServer> server_;
};

TEST_F(HttpSenderTlsTest, DeliversOverHttpsPresentingItsClientCertificate) {
  uint16_t port = startServer(ca().issue("server", "/CN=lab", {"localhost"}, {"127.0.0.1"}));
  auto tls = std::make_shared<net::CurlTls>(clientTls(ca(), true));
  auto out = sendOne(makeTlsSender("https://localhost:" + std::to_string(port) + "/in", tls),
                     {1, "adt", "lab", "MSH|tls", {}, {}});
  EXPECT_EQ(out.kind, SendOutcomeKind::Sent) << out.detail;
  EXPECT_EQ(received(), "POST /in ductus-engine\nMSH|tls\n");
}

TEST_F(HttpSenderTlsTest, TheSystemsRootsStillCountBesideTheCaNamed) {
  // The "system's roots" here are the other CA: a server it signed is
  // trusted though the connection names ca().
  uint16_t port = startServer(other().issue("server", "/CN=lab", {"localhost"}, {"127.0.0.1"}));
  auto tls = std::make_shared<net::CurlTls>(clientTls(ca(), true), other().cert().string());
  auto out = sendOne(makeTlsSender("https://localhost:" + std::to_string(port) + "/in", tls));
  EXPECT_EQ(out.kind, SendOutcomeKind::Sent) << out.detail;
}

TEST_F(HttpSenderTlsTest, WithoutAClientCertificateItIsTransient) {
  uint16_t port = startServer(ca().issue("server", "/CN=lab", {"localhost"}, {"127.0.0.1"}));
  auto tls = std::make_shared<net::CurlTls>(clientTls(ca(), false));
  const std::string url = "https://localhost:" + std::to_string(port) + "/in";
  auto out = sendOne(makeTlsSender(url, tls));
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient) << out.detail;
  EXPECT_EQ(out.detail.rfind("POST " + url + ": ", 0), 0u) << out.detail;
  EXPECT_EQ(received(), "");
}

TEST_F(HttpSenderTlsTest, AServerOfAnotherCaIsRefusedTransient) {
  uint16_t port = startServer(other().issue("server", "/CN=lab", {"localhost"}, {"127.0.0.1"}));
  auto tls = std::make_shared<net::CurlTls>(clientTls(ca(), true));
  auto out = sendOne(makeTlsSender("https://localhost:" + std::to_string(port) + "/in", tls));
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_NE(out.detail.find("SSL certificate problem: unable to get local issuer certificate"),
            std::string::npos)
      << out.detail;
  EXPECT_EQ(received(), "");
}

TEST_F(HttpSenderTlsTest, AHostNameTheCertificateDoesNotNameIsRefusedTransient) {
  uint16_t port = startServer(ca().issue("server", "/CN=lab", {"lab.example"}, {"127.0.0.1"}));
  auto tls = std::make_shared<net::CurlTls>(clientTls(ca(), true));
  auto out = sendOne(makeTlsSender("https://localhost:" + std::to_string(port) + "/in", tls));
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_NE(out.detail.find("localhost"), std::string::npos) << out.detail;
  EXPECT_NE(out.detail.find("SSL"), std::string::npos) << out.detail;
  EXPECT_EQ(received(), "");
}

}  // namespace
}  // namespace ductus::senders
