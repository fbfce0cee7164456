// The alert webhook sender and the Notifier that dispatches an outbox row,
// against real servers on 127.0.0.1 (tests/support: HttpReceiver, Python's
// https server, aiosmtpd): 2xx is sent, anything else an error with the
// status and the answer's start, a slow receiver times out, https is
// verified, and a webhook's token never shows in an error.
#include "supervisor/alerts/webhook_sender.h"

#include <gtest/gtest.h>
#include <uv.h>

#include <optional>

#include "common/net/curl_easy.h"
#include "common/net/curl_multi_uv.h"
#include "supervisor/alerts/notifier.h"
#include "tests/support/outbound_tls.h"
#include "tests/support/receivers.h"
#include "tests/support/run_until.h"
#include "tests/support/script_server.h"
#include "tests/support/smtp_receiver.h"

namespace ductus::supervisor::alerts {
namespace {

using namespace std::chrono_literals;

class WebhookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    multi_ = std::make_unique<net::CurlMulti>(&loop_);
  }
  void TearDown() override {
    notifier_.reset();
    senders_.clear();
    multi_.reset();
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  WebhookSender& sender(std::chrono::milliseconds timeout = 5s,
                        std::shared_ptr<const net::CurlTls> tls = nullptr) {
    senders_.push_back(std::make_unique<WebhookSender>(*multi_, std::move(tls), timeout));
    return *senders_.back();
  }

  Status wait(const std::function<void(std::function<void(Status)>)>& start) {
    std::optional<Status> out;
    int calls = 0;
    start([&](Status st) {
      ++calls;
      out = std::move(st);
    });
    EXPECT_FALSE(out.has_value()) << "the callback ran inside the call";
    EXPECT_TRUE(test::runUntil(&loop_, [&] { return out.has_value(); }, 20s));
    EXPECT_EQ(calls, 1);
    return out.value_or(Status(Error{"no answer"}));
  }

  Status post(WebhookSender& s, const std::string& url, std::string body = R"({"state":"stalled"})") {
    return wait([&](auto done) { s.post(url, body, "", std::move(done)); });
  }

  uv_loop_t loop_;
  std::unique_ptr<net::CurlMulti> multi_;
  std::vector<std::unique_ptr<WebhookSender>> senders_;
  std::unique_ptr<Notifier> notifier_;
};

TEST_F(WebhookTest, A2xxIsSentAndTheBodyArrivesAsJson) {
  senders::test::HttpReceiver server;
  auto st = post(sender(), server.url("/hooks/abc"));
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_TRUE(post(sender(), server.url("/status/204")));
  auto seen = server.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].path, "/hooks/abc");
  EXPECT_EQ(seen[0].body, R"({"state":"stalled"})");
  EXPECT_EQ(seen[0].header("Content-Type"), "application/json");
}

TEST_F(WebhookTest, A500IsAnErrorWithTheStatusAndTheFirst200BytesOfTheAnswer) {
  senders::test::HttpReceiver server;
  auto st = post(sender(), server.url("/status/500"));
  ASSERT_FALSE(st);
  std::string origin = "http://127.0.0.1:" + std::to_string(server.port());
  // The answer is "body of 500" and 300 dots: 200 bytes of it.
  EXPECT_EQ(st.error().message, "webhook POST " + origin + ": HTTP 500 Whatever: body of 500" +
                                    std::string(200 - 11, '.'));
}

TEST_F(WebhookTest, ARedirectIsAnErrorNotFollowed) {
  senders::test::HttpReceiver server;
  auto st = post(sender(), server.url("/status/302"));
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("HTTP 302"), std::string::npos) << st.error().message;
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(WebhookTest, ASlowReceiverTimesOut) {
  senders::test::HttpReceiver server;
  auto st = post(sender(300ms), server.url("/slow/3000"));
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "webhook POST http://127.0.0.1:" + std::to_string(server.port()) +
                                    ": no answer within 300 ms");
}

TEST_F(WebhookTest, TheUrlsPathAndQueryNeverShowInAnError) {
  uint16_t port = 0;
  Fd closed = test::closedPort(&port);
  auto st = post(sender(), "http://127.0.0.1:" + std::to_string(port) + "/hooks/T0KEN?key=S3CRET");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message.find("T0KEN"), std::string::npos) << st.error().message;
  EXPECT_EQ(st.error().message.find("S3CRET"), std::string::npos) << st.error().message;
  auto bad = post(sender(), "ftp://x/T0KEN");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::Invalid);
  EXPECT_EQ(bad.error().message.find("T0KEN"), std::string::npos) << bad.error().message;
}

TEST_F(WebhookTest, HttpsIsVerified) {
  test::OutboundTlsFiles files;
  auto leaf = files.ca().issue("hook", "/CN=hook", {"localhost"}, {"127.0.0.1"});
  test::ScriptServer https({"python3", test::supportScript("https_receiver.py"), "--cert",
                            leaf.cert.string(), "--key", leaf.key.string(), "--record",
                            files.record().string()});
  ASSERT_NE(https.port(), 0);
  std::string url = "https://localhost:" + std::to_string(https.port()) + "/hooks/x";
  auto trusted = std::make_shared<net::CurlTls>(files.client(files.ca(), false));
  auto st = post(sender(5s, trusted), url);
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(files.recorded(), "POST /hooks/x \n{\"state\":\"stalled\"}\n");
  auto other = std::make_shared<net::CurlTls>(files.client(files.other(), false));
  auto refused = post(sender(5s, other), url);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("certificate"), std::string::npos)
      << refused.error().message;
}

TEST_F(WebhookTest, TheNotifierSendsAnEmailToEachAddressAndAWebhook) {
  test::SmtpReceiver smtp;
  senders::test::HttpReceiver hook;
  monitor::AlertSettings settings;
  settings.enabled = true;
  settings.smtp.emplace();
  settings.smtp->host = "127.0.0.1";
  settings.smtp->port = smtp.port();
  settings.smtp->from = "ductus@hospital.example";
  settings.smtp->tls = monitor::SmtpServer::Tls::Off;
  notifier_ = std::make_unique<Notifier>(*multi_, settings);
  auto mail = wait([&](auto done) {
    notifier_->send({.kind = "email", .target = " a@hospital.example,b@hospital.example ,",
                     .subject = "adt-in is behind", .body = "20 wait", .contentType = ""},
                    std::move(done));
  });
  ASSERT_TRUE(mail) << mail.error().message;
  auto got = smtp.messages();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].to, (std::vector<std::string>{"a@hospital.example", "b@hospital.example"}));
  EXPECT_EQ(got[0].header("Subject"), "adt-in is behind");
  auto posted = wait([&](auto done) {
    notifier_->send({.kind = "webhook", .target = hook.url("/hooks/x"), .subject = "",
                     .body = "{\"text\":\"behind\"}", .contentType = "application/json"},
                    std::move(done));
  });
  ASSERT_TRUE(posted) << posted.error().message;
  ASSERT_EQ(hook.requests().size(), 1u);
  EXPECT_EQ(hook.requests()[0].body, "{\"text\":\"behind\"}");
  auto odd = wait([&](auto done) {
    notifier_->send({.kind = "pager", .target = "x", .subject = "", .body = "", .contentType = ""},
                    std::move(done));
  });
  EXPECT_FALSE(odd);
}

TEST_F(WebhookTest, AnEmailWithoutAnSmtpServerIsAConfigError) {
  monitor::AlertSettings settings;
  notifier_ = std::make_unique<Notifier>(*multi_, settings);
  auto st = wait([&](auto done) {
    notifier_->send({.kind = "email", .target = "a@x.example", .subject = "s", .body = "b",
                     .contentType = ""},
                    std::move(done));
  });
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().kind, ErrorKind::Config);
}

TEST(SplitAddresses, CommasSpacesAndEmptyOnes) {
  EXPECT_EQ(splitAddresses(" a@x , b@y,,c@z "), (std::vector<std::string>{"a@x", "b@y", "c@z"}));
  EXPECT_TRUE(splitAddresses(" , ").empty());
}

}  // namespace
}  // namespace ductus::supervisor::alerts
