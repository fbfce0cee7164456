// The alert e-mail sender against a real SMTP server we did not write
// (Debian's aiosmtpd: tests/support/smtp_server.py): what arrives, STARTTLS
// offered, required and verified, implicit TLS, AUTH and a password that
// never goes in the clear, hostile subjects and addresses, refusals and
// timeouts named with the server.
#include "supervisor/alerts/smtp_sender.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <uv.h>

#include <optional>

#include "common/net/curl_easy.h"
#include "common/net/curl_multi_uv.h"
#include "common/text.h"
#include "tests/support/outbound_tls.h"
#include "tests/support/receivers.h"
#include "tests/support/run_until.h"
#include "tests/support/smtp_receiver.h"

namespace ductus::supervisor::alerts {
namespace {

using namespace std::chrono_literals;
using Tls = monitor::SmtpServer::Tls;

std::string unbase64(const std::string& text) {
  std::string out(text.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return "";
  // EVP_DecodeBlock counts the padding's bytes too.
  size_t pad = text.size() - std::min(text.size(), text.find_last_not_of('=') + 1);
  out.resize(static_cast<size_t>(n) - std::min(pad, static_cast<size_t>(n)));
  return out;
}

// The text of a header made of "=?UTF-8?B?...?=" words (folding removed).
std::string decodeWords(const std::string& value) {
  std::string out;
  size_t at = 0;
  while ((at = value.find("=?UTF-8?B?", at)) != std::string::npos) {
    size_t end = value.find("?=", at + 10);
    if (end == std::string::npos) break;
    out += unbase64(value.substr(at + 10, end - at - 10));
    at = end + 2;
  }
  return out;
}

class SmtpSenderTest : public ::testing::Test {
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

  SmtpSender& sender(const std::string& host, uint16_t port, Tls tls,
                     std::shared_ptr<const net::CurlTls> ca = nullptr, std::string user = "",
                     std::string password = "", std::chrono::milliseconds timeout = 10s) {
    monitor::SmtpServer s;
    s.host = host;
    s.port = port;
    s.from = "ductus@hospital.example";
    s.tls = tls;
    s.user = std::move(user);
    s.password = std::move(password);
    senders_.push_back(std::make_unique<SmtpSender>(*multi_, s, std::move(ca), timeout));
    return *senders_.back();
  }

  Status sendOne(SmtpSender& s, Email email) {
    std::optional<Status> out;
    int calls = 0;
    s.send(std::move(email), [&](Status st) {
      ++calls;
      out = std::move(st);
    });
    EXPECT_FALSE(out.has_value()) << "the callback ran inside send()";
    EXPECT_TRUE(test::runUntil(&loop_, [&] { return out.has_value(); }, 20s));
    EXPECT_EQ(calls, 1);
    return out.value_or(Status(Error{"no answer"}));
  }

  static Email mail(std::string subject = "adt-in/lab is stalled",
                    std::string text = "20 messages wait.\n") {
    return Email{.from = {}, .to = {"oncall@hospital.example"}, .subject = std::move(subject),
                 .text = std::move(text)};
  }

  std::shared_ptr<const net::CurlTls> trusting(const test::TestCa& ca) {
    return std::make_shared<net::CurlTls>(files_.client(ca, false));
  }

  test::SmtpReceiver::Options starttls(const test::TestCa& ca) {
    auto leaf = ca.issue("smtp", "/CN=mail", {"localhost"}, {"127.0.0.1"});
    test::SmtpReceiver::Options o;
    o.starttlsCert = leaf.cert.string();
    o.starttlsKey = leaf.key.string();
    return o;
  }

  uv_loop_t loop_;
  std::unique_ptr<net::CurlMulti> multi_;
  std::vector<std::unique_ptr<SmtpSender>> senders_;
  test::OutboundTlsFiles files_;
};

TEST_F(SmtpSenderTest, APlainEmailArrivesWithItsSubjectBodyAndHeaders) {
  test::SmtpReceiver server;
  Email m = mail("adt-in/lab is stalled", "Line one\n.\n..two dots\nlast line");
  m.to = {"oncall@hospital.example", "second@hospital.example"};
  auto st = sendOne(sender("127.0.0.1", server.port(), Tls::Off), m);
  ASSERT_TRUE(st) << st.error().message;
  auto got = server.messages();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].from, "ductus@hospital.example");
  EXPECT_EQ(got[0].to, (std::vector<std::string>{"oncall@hospital.example", "second@hospital.example"}));
  EXPECT_FALSE(got[0].tls);
  EXPECT_EQ(got[0].header("Subject"), "adt-in/lab is stalled");
  EXPECT_EQ(got[0].header("From"), "ductus@hospital.example");
  EXPECT_EQ(got[0].header("To"), "oncall@hospital.example, second@hospital.example");
  EXPECT_EQ(got[0].header("MIME-Version"), "1.0");
  EXPECT_EQ(got[0].header("Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(got[0].header("Content-Transfer-Encoding"), "8bit");
  EXPECT_NE(got[0].header("Date").find(" +0000"), std::string::npos);
  EXPECT_EQ(got[0].header("Message-ID").back(), '>');
  EXPECT_NE(got[0].header("Message-ID").find("@hospital.example>"), std::string::npos);
  // CRLF line ends, and a line of one '.' did not end the message early.
  EXPECT_EQ(got[0].body(), "Line one\r\n.\r\n..two dots\r\nlast line\r\n");
}

TEST_F(SmtpSenderTest, ASubjectThatIsNotAsciiArrivesAsEncodedWords) {
  test::SmtpReceiver server;
  std::string subject = "Störung: Labor-Empfänger antwortet nicht seit 10 Minuten — ↯ " +
                        std::string(40, 'x');
  auto st = sendOne(sender("127.0.0.1", server.port(), Tls::Off), mail(subject, "Grüße\n"));
  ASSERT_TRUE(st) << st.error().message;
  auto got = server.messages();
  ASSERT_EQ(got.size(), 1u);
  std::string header = got[0].data.substr(0, got[0].data.find("\r\n\r\n"));
  for (unsigned char c : header) EXPECT_LT(c, 0x80) << "8-bit byte in the header";
  EXPECT_EQ(got[0].header("Subject").rfind("=?UTF-8?B?", 0), 0u);
  EXPECT_EQ(decodeWords(got[0].header("Subject")), subject);
  EXPECT_EQ(got[0].body(), "Grüße\r\n");  // 8bit body, UTF-8 as it is
}

TEST_F(SmtpSenderTest, ASubjectWithLineBreaksCannotAddAHeaderOrARecipient) {
  test::SmtpReceiver server;
  auto st = sendOne(sender("127.0.0.1", server.port(), Tls::Off),
                    mail("down\r\nBcc: evil@attacker.example\r\n\r\nfake body\nX-Evil: 1",
                         "the real body\n"));
  ASSERT_TRUE(st) << st.error().message;
  auto got = server.messages();
  ASSERT_EQ(got.size(), 1u);
  auto names = got[0].headerNames();
  EXPECT_EQ(std::count(names.begin(), names.end(), "Bcc"), 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "X-Evil"), 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "Subject"), 1);
  EXPECT_EQ(got[0].to, std::vector<std::string>{"oncall@hospital.example"});
  EXPECT_EQ(got[0].body(), "the real body\r\n");
}

TEST_F(SmtpSenderTest, AddressesThatCouldAddACommandAreRefusedBeforeConnecting) {
  test::SmtpReceiver server;
  auto& s = sender("127.0.0.1", server.port(), Tls::Off);
  for (std::string bad : {"a@b.example>\r\nRCPT TO:<evil@x.example", "a@b.example> x",
                          "two words@x.example", "<a@b.example>", "a@b.example,c@d.example",
                          ""}) {
    Email m = mail();
    m.to = {"oncall@hospital.example", bad};
    auto st = sendOne(s, m);
    ASSERT_FALSE(st) << bad;
    EXPECT_EQ(st.error().kind, ErrorKind::Invalid);
    EXPECT_EQ(st.error().message.rfind("smtp 127.0.0.1:" + std::to_string(server.port()) + ": ", 0),
              0u)
        << st.error().message;
    if (bad.empty()) continue;  // an empty from: is the server's from:
    Email f = mail();
    f.from = bad;
    EXPECT_FALSE(sendOne(s, f)) << bad;
  }
  EXPECT_TRUE(server.messages().empty());
}

TEST_F(SmtpSenderTest, StartTlsIsUsedWhenOfferedAndTheServerIsVerified) {
  test::SmtpReceiver server(starttls(files_.ca()));
  auto st = sendOne(sender("localhost", server.port(), Tls::StartTlsIfOffered, trusting(files_.ca())),
                    mail());
  ASSERT_TRUE(st) << st.error().message;
  auto got = server.messages();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].tls);
}

TEST_F(SmtpSenderTest, StartTlsToAServerOfAnotherCaIsRefused) {
  test::SmtpReceiver server(starttls(files_.other()));
  auto st = sendOne(sender("localhost", server.port(), Tls::StartTlsIfOffered, trusting(files_.ca())),
                    mail());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message.rfind("smtp localhost:" + std::to_string(server.port()) + ": ", 0), 0u)
      << st.error().message;
  EXPECT_NE(st.error().message.find("certificate"), std::string::npos) << st.error().message;
  EXPECT_TRUE(server.messages().empty());
}

TEST_F(SmtpSenderTest, StartTlsIfOfferedSendsPlainToAServerThatDoesNotOfferIt) {
  test::SmtpReceiver server;
  auto st = sendOne(sender("127.0.0.1", server.port(), Tls::StartTlsIfOffered), mail());
  ASSERT_TRUE(st) << st.error().message;
  ASSERT_EQ(server.messages().size(), 1u);
  EXPECT_FALSE(server.messages()[0].tls);
}

TEST_F(SmtpSenderTest, RequiredStartTlsRefusesAServerThatDoesNotOfferIt) {
  test::SmtpReceiver server;
  auto st = sendOne(sender("127.0.0.1", server.port(), Tls::StartTlsRequired), mail());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message.rfind("smtp 127.0.0.1:" + std::to_string(server.port()) + ": ", 0),
            0u)
      << st.error().message;
  EXPECT_NE(st.error().message.find("STARTTLS"), std::string::npos) << st.error().message;
  EXPECT_TRUE(server.messages().empty());
}

TEST_F(SmtpSenderTest, ImplicitTlsIsSmtps) {
  auto leaf = files_.ca().issue("smtps", "/CN=mail", {"localhost"}, {"127.0.0.1"});
  test::SmtpReceiver::Options o;
  o.implicitCert = leaf.cert.string();
  o.implicitKey = leaf.key.string();
  test::SmtpReceiver server(o);
  auto st = sendOne(sender("localhost", server.port(), Tls::Implicit, trusting(files_.ca())), mail());
  ASSERT_TRUE(st) << st.error().message;
  ASSERT_EQ(server.messages().size(), 1u);
  EXPECT_TRUE(server.messages()[0].tls);
}

TEST_F(SmtpSenderTest, AuthSignsInOverStartTls) {
  auto o = starttls(files_.ca());
  o.auth = "alerts:s3cret";
  test::SmtpReceiver server(o);
  auto st = sendOne(sender("localhost", server.port(), Tls::StartTlsIfOffered, trusting(files_.ca()),
                           "alerts", "s3cret"),
                    mail());
  ASSERT_TRUE(st) << st.error().message;
  auto got = server.messages();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].auth, "alerts");
  EXPECT_TRUE(got[0].tls);
}

TEST_F(SmtpSenderTest, AWrongPasswordOrNoneIsTheServersRefusalNamed) {
  auto o = starttls(files_.ca());
  o.auth = "alerts:s3cret";
  test::SmtpReceiver server(o);
  auto wrong = sendOne(sender("localhost", server.port(), Tls::StartTlsIfOffered,
                              trusting(files_.ca()), "alerts", "guess"),
                       mail());
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("535"), std::string::npos) << wrong.error().message;
  EXPECT_EQ(wrong.error().message.find("guess"), std::string::npos) << "the password was shown";
  auto none = sendOne(sender("localhost", server.port(), Tls::StartTlsIfOffered, trusting(files_.ca())),
                      mail());
  ASSERT_FALSE(none);
  // The server's own words: "530 5.7.0 Authentication required".
  EXPECT_NE(none.error().message.find("(530 "), std::string::npos) << none.error().message;
  EXPECT_EQ(none.error().message.rfind("smtp localhost:" + std::to_string(server.port()) + ": ", 0),
            0u);
  EXPECT_TRUE(server.messages().empty());
}

TEST_F(SmtpSenderTest, APasswordIsNeverSentWhereStartTlsIsNotOffered) {
  test::SmtpReceiver::Options o;
  o.auth = "alerts:s3cret";
  test::SmtpReceiver server(o);
  auto st = sendOne(sender("127.0.0.1", server.port(), Tls::StartTlsIfOffered, nullptr, "alerts",
                           "s3cret"),
                    mail());
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("STARTTLS"), std::string::npos) << st.error().message;
  EXPECT_TRUE(server.messages().empty());
  // tls: off is the operator's word that plain is fine (a loopback server).
  auto plain = sendOne(sender("127.0.0.1", server.port(), Tls::Off, nullptr, "alerts", "s3cret"),
                       mail());
  ASSERT_TRUE(plain) << plain.error().message;
  ASSERT_EQ(server.messages().size(), 1u);
  EXPECT_EQ(server.messages()[0].auth, "alerts");
}

TEST_F(SmtpSenderTest, AServerThatNeverAnswersTimesOutNamed) {
  // Listens but never accepts: the greeting never comes.
  uint16_t port = 0;
  Fd silent = senders::test::listenOn(0, &port);
  auto st = sendOne(sender("127.0.0.1", port, Tls::Off, nullptr, "", "", 500ms), mail());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "smtp 127.0.0.1:" + std::to_string(port) + ": no answer within 500 ms");
}

TEST_F(SmtpSenderTest, DestroyedWhileSendingItNeverCallsBackNorBlocksTheLoop) {
  uint16_t port = 0;
  Fd silent = senders::test::listenOn(0, &port);
  bool called = false;
  sender("127.0.0.1", port, Tls::Off).send(mail(), [&](Status) { called = true; });
  test::runUntil(&loop_, [] { return false; }, 200ms);  // connected, waiting for the greeting
  // libcurl would wait here for the answer to its QUIT, as long as the
  // transfer's 10 s timeout allows, with the loop blocked.
  auto before = std::chrono::steady_clock::now();
  senders_.clear();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 1s);
  EXPECT_EQ(multi_->running(), 0u);
  test::runUntil(&loop_, [] { return false; }, 200ms);
  EXPECT_FALSE(called);
}

TEST(SmtpMessage, HeaderValuesLoseLineBreaksAndLongOrForeignTextIsEncoded) {
  EXPECT_EQ(headerValue("a\r\nBcc: x"), "a  Bcc: x");
  EXPECT_EQ(headerValue("tab\there\x7f"), "tab here ");
  // Something that reads as an encoded-word is encoded, not passed on.
  EXPECT_EQ(headerValue("=?UTF-8?B?ZXZpbA==?=").rfind("=?UTF-8?B?", 0), 0u);
  EXPECT_NE(headerValue("=?UTF-8?B?ZXZpbA==?="), "=?UTF-8?B?ZXZpbA==?=");
  // Every word at most 75 characters, no character split between two.
  std::string text;
  for (int i = 0; i < 100; ++i) text += "äö€";
  std::string v = headerValue(text);
  size_t start = 0;
  std::string decoded;
  while (start < v.size()) {
    size_t end = v.find("\r\n ", start);
    if (end == std::string::npos) end = v.size();
    std::string word = v.substr(start, end - start);
    EXPECT_LE(word.size(), 75u);
    std::string part = decodeWords(word);
    EXPECT_TRUE(isUtf8(part)) << word;
    decoded += part;
    start = end + 3;
  }
  EXPECT_EQ(decoded, text);
  // ISO-8859-1 from a receiver's error comes out as UTF-8.
  EXPECT_EQ(decodeWords(headerValue("M\xfcller")), "Müller");
}

TEST(SmtpMessage, TheBodyHasCrlfLinesNoNulAndNoLineOver998Octets) {
  Email e{.from = "a@b.example", .to = {"c@d.example"}, .subject = "s", .text = {}};
  e.text = std::string("one\rtwo\nthree\r\nnul") + '\0' + "here" + std::string(2500, 'y');
  std::string m = buildMessage(e, std::chrono::system_clock::from_time_t(1'800'000'000), "<id@x>");
  EXPECT_NE(m.find("Date: Fri, 15 Jan 2027 08:00:00 +0000\r\n"), std::string::npos) << m.substr(0, 60);
  std::string body = m.substr(m.find("\r\n\r\n") + 4);
  EXPECT_EQ(body.substr(0, 27), "one\r\ntwo\r\nthree\r\nnulhereyyy");
  EXPECT_EQ(body.find('\0'), std::string::npos);
  size_t start = 0;
  while (start < body.size()) {
    size_t end = body.find("\r\n", start);
    ASSERT_NE(end, std::string::npos) << "the body does not end with CRLF";
    EXPECT_LE(end - start, 998u);
    start = end + 2;
  }
}

TEST(SmtpMessage, ATextOverTheLimitIsCutSayingSo) {
  Email e{.from = "a@b.example", .to = {"c@d.example"}, .subject = "s", .text = {}};
  e.text = std::string(kMaxTextBytes - 1, 'x') + "\xc3\xa9" + std::string(5000, 'z');
  std::string body = buildMessage(e, {}, "<id@x>");
  body = body.substr(body.find("\r\n\r\n") + 4);
  EXPECT_LT(body.size(), kMaxTextBytes + kMaxTextBytes / 990 * 2 + 100);
  EXPECT_EQ(body.find('z'), std::string::npos);
  EXPECT_EQ(body.find("\xc3"), std::string::npos) << "a character was split";
  EXPECT_NE(body.find("[cut at 1048576 bytes]\r\n"), std::string::npos);
}

}  // namespace
}  // namespace ductus::supervisor::alerts
