// The MLLP sender against real MLLP receivers on 127.0.0.1: the ACK code
// decides the outcome, and every way a connection can fail is Transient
// and leaves the sender able to re-open for the next message.
#include "supervisor/delivery/senders/mllp_sender.h"

#include <gtest/gtest.h>
#include <uv.h>

#include <optional>

#include "tests/support/outbound_tls.h"
#include "tests/support/receivers.h"
#include "tests/support/script_server.h"

namespace ductus::senders {
namespace {

using namespace std::chrono_literals;
using test::hl7Ack;
using test::MllpReceiver;
using test::MllpReply;
using test::mllpFrame;

const std::string kMessage =
    "MSH|^~\\&|SND|FAC|RCV|FAC|20261202120000||ADT^A01|MSG0001|P|2.5\rPID|1||42||M\xfcller^J\xf6rg\r";

class MllpSenderTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(uv_loop_init(&loop_), 0); }
  void TearDown() override {
    if (sender_) {
      bool closed = false;
      sender_->close([&] { closed = true; });
      EXPECT_TRUE(test::runUntil(&loop_, [&] { return closed; }));
      sender_.reset();
    }
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  MllpSender& makeSender(uint16_t port, std::chrono::milliseconds ackTimeout = 5s) {
    MllpSenderSettings s;
    s.host = "127.0.0.1";
    s.port = port;
    s.connectTimeout = 2s;
    s.sendTimeout = 2s;
    s.ackTimeout = ackTimeout;
    sender_ = std::make_unique<MllpSender>(&loop_, s);
    return *sender_;
  }

  // Sends one message and runs the loop until its outcome arrives.
  SendOutcome sendOne(const std::string& payload = kMessage) {
    std::optional<SendOutcome> out;
    int calls = 0;
    sender_->send({1, "adt", "lab", payload, {}, {}}, [&](SendOutcome o) {
      ++calls;
      out = std::move(o);
    });
    EXPECT_FALSE(out.has_value()) << "the callback ran inside send()";
    EXPECT_TRUE(test::runUntil(&loop_, [&] { return out.has_value(); }));
    EXPECT_EQ(calls, 1);
    return out.value_or(SendOutcome::transient("no outcome"));
  }

  uv_loop_t loop_;
  std::unique_ptr<MllpSender> sender_;
};

MllpReceiver::Handler answering(const std::string& code, const std::string& text = "") {
  return [=](const std::string&) { return MllpReply{mllpFrame(hl7Ack(code, text))}; };
}

TEST_F(MllpSenderTest, AnAaAckMeansSentAndTheReceiverGetsTheBytesUnchanged) {
  MllpReceiver receiver(answering("AA"));
  makeSender(receiver.port());
  SendOutcome out = sendOne();
  EXPECT_EQ(out.kind, SendOutcomeKind::Sent) << out.detail;
  ASSERT_EQ(receiver.messages().size(), 1u);
  EXPECT_EQ(receiver.messages()[0], kMessage);  // ISO-8859-1 bytes intact
}

TEST_F(MllpSenderTest, ACommitAcceptCaAckMeansSent) {
  MllpReceiver receiver(answering("CA"));
  makeSender(receiver.port());
  EXPECT_EQ(sendOne().kind, SendOutcomeKind::Sent);
}

TEST_F(MllpSenderTest, AnAeAckIsTransientAndCarriesTheReceiversText) {
  MllpReceiver receiver(answering("AE", "database busy"));
  makeSender(receiver.port());
  SendOutcome out = sendOne();
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_EQ(out.detail, "AE: database busy");
  // An application error is not a broken stream: the connection stays.
  EXPECT_TRUE(sender_->connected());
}

TEST_F(MllpSenderTest, AnArAckIsPermanent) {
  MllpReceiver receiver(answering("AR", "unknown patient"));
  makeSender(receiver.port());
  SendOutcome out = sendOne();
  EXPECT_EQ(out.kind, SendOutcomeKind::Permanent);
  EXPECT_EQ(out.detail, "AR: unknown patient");
}

TEST_F(MllpSenderTest, CeIsTransientAndCrIsPermanent) {
  MllpReceiver receiver(answering("CE"));
  makeSender(receiver.port());
  EXPECT_EQ(sendOne().kind, SendOutcomeKind::Transient);
  receiver.setHandler(answering("CR"));
  EXPECT_EQ(sendOne().kind, SendOutcomeKind::Permanent);
}

// What a transform could return to smuggle a second message out: an end
// block, then a start block. Framed, the receiver would read two messages.
TEST_F(MllpSenderTest, AnOutputHoldingFramingBytesIsPermanentAndNeverReachesTheReceiver) {
  MllpReceiver receiver(answering("AA"));
  makeSender(receiver.port());
  const std::string smuggled = kMessage + "\x1c\r\x0bMSH|^~\\&|EVIL|FAC|RCV|FAC|2026||ADT^A01|"
                                          "INJECTED1|P|2.5\rPID|1||VICTIM\r";
  SendOutcome out = sendOne(smuggled);
  EXPECT_EQ(out.kind, SendOutcomeKind::Permanent) << out.detail;
  EXPECT_EQ(out.detail.rfind("output contains MLLP framing bytes (0x1C, end block at byte " +
                                 std::to_string(kMessage.size()) + ")",
                             0),
            0u)
      << out.detail;
  EXPECT_EQ(sendOne(kMessage + "\x0b").kind, SendOutcomeKind::Permanent);
  // Nothing was written; the next message goes out as usual.
  EXPECT_EQ(receiver.connections(), 0);
  EXPECT_EQ(sendOne().kind, SendOutcomeKind::Sent);
  ASSERT_EQ(receiver.messages().size(), 1u);
  EXPECT_EQ(receiver.messages()[0], kMessage);
}

TEST_F(MllpSenderTest, MessagesInARowShareOneConnection) {
  MllpReceiver receiver(answering("AA"));
  makeSender(receiver.port());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(sendOne().kind, SendOutcomeKind::Sent);
  EXPECT_EQ(receiver.messages().size(), 5u);
  EXPECT_EQ(receiver.connections(), 1);
}

TEST_F(MllpSenderTest, QueuedMessagesGoOneAtATimeInOrder) {
  // The receiver holds each answer 20 ms and then looks whether the next
  // frame came before it: it never may.
  MllpReceiver receiver(answering("AA"));
  receiver.holdAnswers(20ms);
  makeSender(receiver.port());
  std::vector<int64_t> order;
  for (int64_t id = 1; id <= 10; ++id) {
    sender_->send({id, "adt", "lab", "MSH|^~\\&|A|B|C|D|||ADT^A01|" + std::to_string(id) + "|P|2.5\r",
                   {}, {}},
                  [&order, id](SendOutcome o) {
                    EXPECT_EQ(o.kind, SendOutcomeKind::Sent) << o.detail;
                    order.push_back(id);
                  });
  }
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return order.size() == 10; }));
  EXPECT_EQ(order, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(receiver.earlyFrames(), 0) << "a frame came before the previous one's ACK";
  auto seen = receiver.messages();
  ASSERT_EQ(seen.size(), 10u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_NE(seen[i].find("|" + std::to_string(i + 1) + "|P|"), std::string::npos);
  }
}

TEST_F(MllpSenderTest, AReceiverThatIsDownIsTransientAndOnceUpTheNextSendSucceeds) {
  // Bound, not listening: refused until the receiver listens on it.
  uint16_t port = 0;
  Fd bound = test::closedPort(&port);
  ASSERT_TRUE(bound.valid());
  makeSender(port);
  SendOutcome down = sendOne();
  EXPECT_EQ(down.kind, SendOutcomeKind::Transient);
  EXPECT_NE(down.detail.find("connection refused"), std::string::npos) << down.detail;
  EXPECT_NE(down.detail.find(std::to_string(port)), std::string::npos) << down.detail;

  MllpReceiver receiver(answering("AA"), std::move(bound));
  ASSERT_EQ(receiver.port(), port);
  SendOutcome up = sendOne();
  EXPECT_EQ(up.kind, SendOutcomeKind::Sent) << up.detail;
  EXPECT_EQ(receiver.messages().size(), 1u);
}

TEST_F(MllpSenderTest, AReceiverThatHangsUpBetweenMessagesIsReopenedForTheNext) {
  MllpReceiver receiver([](const std::string&) {
    return MllpReply{mllpFrame(hl7Ack("AA")), /*closeAfter=*/true};
  });
  makeSender(receiver.port());
  EXPECT_EQ(sendOne().kind, SendOutcomeKind::Sent);
  // Let the sender see the hang-up before the next message.
  test::runUntil(&loop_, [&] { return !sender_->connected(); }, 2s);
  EXPECT_EQ(sendOne().kind, SendOutcomeKind::Sent);
  EXPECT_EQ(receiver.connections(), 2);
}

TEST_F(MllpSenderTest, AReceiverThatClosesInTheMiddleOfTheAckIsTransient) {
  MllpReceiver receiver([](const std::string&) {
    std::string ack = mllpFrame(hl7Ack("AA"));
    return MllpReply{ack.substr(0, ack.size() / 2), /*closeAfter=*/true};
  });
  makeSender(receiver.port());
  SendOutcome out = sendOne();
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_NE(out.detail.find("closed the connection before the ACK"), std::string::npos)
      << out.detail;
  // The retry goes out on a fresh connection and succeeds.
  receiver.setHandler(answering("AA"));
  EXPECT_EQ(sendOne().kind, SendOutcomeKind::Sent);
  EXPECT_EQ(receiver.connections(), 2);
}

TEST_F(MllpSenderTest, AnAckThatNeverComesIsTransientAfterTheAckTimeout) {
  MllpReceiver receiver([](const std::string&) { return MllpReply{}; });
  makeSender(receiver.port(), 200ms);
  SendOutcome out = sendOne();
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_NE(out.detail.find("no ACK"), std::string::npos) << out.detail;
  // The late stream is abandoned: the retry opens a new connection, so a
  // late ACK for the first message can never be taken for the second's.
  EXPECT_FALSE(sender_->connected());
  receiver.setHandler(answering("AA"));
  EXPECT_EQ(sendOne().kind, SendOutcomeKind::Sent);
  EXPECT_EQ(receiver.connections(), 2);
}

TEST_F(MllpSenderTest, GarbageInsteadOfAnAckIsTransientAndDropsTheConnection) {
  MllpReceiver receiver(
      [](const std::string&) { return MllpReply{"HTTP/1.1 400 Bad Request\r\n\r\n"}; });
  makeSender(receiver.port());
  SendOutcome out = sendOne();
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_NE(out.detail.find("not an MLLP frame"), std::string::npos) << out.detail;
  EXPECT_FALSE(sender_->connected());
}

TEST_F(MllpSenderTest, AFramedMessageThatIsNotAnAckIsTransient) {
  MllpReceiver receiver([](const std::string&) { return MllpReply{mllpFrame("hello")}; });
  makeSender(receiver.port());
  SendOutcome out = sendOne();
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_NE(out.detail.find("unreadable ACK"), std::string::npos) << out.detail;
}

TEST_F(MllpSenderTest, ClosingAnswersQueuedMessagesTransientAndCallsDone) {
  MllpReceiver receiver([](const std::string&) { return MllpReply{}; });  // never ACKs
  makeSender(receiver.port());
  std::vector<SendOutcome> outcomes;
  for (int i = 0; i < 3; ++i) {
    sender_->send({i, "adt", "lab", kMessage, {}, {}},
                  [&](SendOutcome o) { outcomes.push_back(std::move(o)); });
  }
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return receiver.messages().size() == 1; }));
  bool done = false;
  sender_->close([&] { done = true; });
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return done; }));
  ASSERT_EQ(outcomes.size(), 3u);
  for (auto& o : outcomes) {
    EXPECT_EQ(o.kind, SendOutcomeKind::Transient);
    EXPECT_EQ(o.detail, "sender closed");
  }
  std::optional<SendOutcome> late;
  sender_->send({9, "adt", "lab", kMessage, {}, {}}, [&](SendOutcome o) { late = o; });
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return late.has_value(); }));
  EXPECT_EQ(late->kind, SendOutcomeKind::Transient);
  sender_.reset();
}

TEST(MllpAck, Msa1IsReadWithTheFieldSeparatorOfTheAcksOwnMsh) {
  // '#' as the field separator: a parser assuming '|' would find no MSA-1.
  auto out = outcomeOfAck("MSH#^~\\&#RCV#F#SND#F#20261202##ACK#1#P#2.5\rMSA#AR#MSG1#bad|pipe\r");
  EXPECT_EQ(out.kind, SendOutcomeKind::Permanent);
  EXPECT_EQ(out.detail, "AR: bad|pipe");
}

TEST(MllpAck, SegmentsEndingInNewlinesAreAccepted) {
  EXPECT_EQ(outcomeOfAck("MSH|^~\\&|R|F|S|F|1||ACK|1|P|2.5\r\nMSA|AA|1\r\n").kind,
            SendOutcomeKind::Sent);
}

TEST(MllpAck, OnlyMsh1IsNeededAndMsaFieldsAreReadWhole) {
  // MSH-2 "^~&" is malformed (no escape character); MSH-1 is all it takes.
  auto out = outcomeOfAck("MSH|^~&|R|F|S|F|1||ACK|1|P|2.5\rMSA|AE|1|retry~later^soon\r");
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_EQ(out.detail, "AE: retry~later^soon");
  EXPECT_EQ(outcomeOfAck("MSH|^~\\&|R|F|S|F|1||ACK|1|P|2.5\rMSA|AA~AR|1\r").detail,
            "unreadable ACK (MSA-1 \"AA~AR\")");
}

TEST(MllpAck, TextBeforeTheMshIsNotAnAck) {
  auto out = outcomeOfAck("hello\rMSH|^~\\&|R|F|S|F|1||ACK|1|P|2.5\rMSA|AA|1\r");
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_EQ(out.detail.rfind("unreadable ACK (no MSH)", 0), 0u) << out.detail;
}

TEST(MllpAck, AnAckWithoutMsaOrWithAnUnknownCodeIsTransient) {
  EXPECT_EQ(outcomeOfAck("MSH|^~\\&|R|F|S|F|1||ACK|1|P|2.5\r").kind, SendOutcomeKind::Transient);
  auto out = outcomeOfAck("MSH|^~\\&|R|F|S|F|1||ACK|1|P|2.5\rMSA|ZZ|1\r");
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_NE(out.detail.find("ZZ"), std::string::npos);
  EXPECT_EQ(outcomeOfAck("").kind, SendOutcomeKind::Transient);
}

// ---- TLS: against Python's ssl module (tests/support/tls_mllp_receiver.py),
// a receiver that requires a client certificate from our test CA.

class MllpSenderTlsTest : public MllpSenderTest {
 protected:
  void TearDown() override {
    MllpSenderTest::TearDown();
    receiver_.reset();
  }

  // The receiver, serving `server` and requiring a client certificate of ca().
  uint16_t startReceiver(const ::ductus::test::Issued& server, bool closeAfterAck = false) {
    std::vector<std::string> argv{
        "python3", ::ductus::test::supportScript("tls_mllp_receiver.py"), "--cert",
        server.cert.string(), "--key", server.key.string(), "--client-ca",
        files_.ca().cert().string(), "--record", files_.record().string()};
    if (closeAfterAck) argv.push_back("--close-after-ack");
    receiver_.emplace(argv);
    EXPECT_NE(receiver_->port(), 0) << "the receiver did not start";
    return receiver_->port();
  }

  // The sender with the ClientTls of { ca: <trusted>, certificate: engine
  // or none }.
  MllpSender& makeTlsSender(const std::string& host, uint16_t port,
                            const ::ductus::test::TestCa& trusted, bool clientCertificate) {
    MllpSenderSettings s;
    s.host = host;
    s.port = port;
    s.connectTimeout = 5s;
    s.sendTimeout = 5s;
    s.ackTimeout = 5s;
    s.tls = files_.client(trusted, clientCertificate);
    sender_ = std::make_unique<MllpSender>(&loop_, s);
    return *sender_;
  }

  // The messages the receiver recorded (each ends in 0x1c there).
  std::vector<std::string> received() const {
    std::vector<std::string> out;
    std::string all = files_.recorded();
    for (size_t at = 0, end; (end = all.find('\x1c', at)) != std::string::npos; at = end + 1)
      out.push_back(all.substr(at, end - at));
    return out;
  }

  const ::ductus::test::TestCa& ca() const { return files_.ca(); }
  const ::ductus::test::TestCa& other() const { return files_.other(); }

  ::ductus::test::OutboundTlsFiles files_;
  std::optional<::ductus::test::ScriptServer> receiver_;
};

TEST_F(MllpSenderTlsTest, DeliversOverTlsPresentingItsClientCertificateOnOneConnection) {
  uint16_t port = startReceiver(ca().issue("server", "/CN=lab", {"localhost"}, {"127.0.0.1"}));
  // A host name: resolved, sent as SNI and checked against the certificate.
  makeTlsSender("localhost", port, ca(), true);
  const std::string second =
      "MSH|^~\\&|SND|FAC|RCV|FAC|20261202120001||ADT^A01|MSG0002|P|2.5\rPID|1||43\r";
  SendOutcome one = sendOne();
  EXPECT_EQ(one.kind, SendOutcomeKind::Sent) << one.detail;
  EXPECT_TRUE(sender_->connected());
  SendOutcome two = sendOne(second);
  EXPECT_EQ(two.kind, SendOutcomeKind::Sent) << two.detail;
  EXPECT_EQ(received(), (std::vector<std::string>{kMessage, second}));
}

TEST_F(MllpSenderTlsTest, AReceiverClosingWithoutCloseNotifyIsAnOrdinaryCloseAndTheNextSendReopens) {
  uint16_t port =
      startReceiver(ca().issue("server", "/CN=lab", {"localhost"}, {"127.0.0.1"}), true);
  makeTlsSender("127.0.0.1", port, ca(), true);
  SendOutcome one = sendOne();
  EXPECT_EQ(one.kind, SendOutcomeKind::Sent) << one.detail;
  // The receiver hangs up after the ACK: the connection is let go quietly.
  EXPECT_TRUE(test::runUntil(&loop_, [&] { return !sender_->connected(); }));
  SendOutcome two = sendOne();
  EXPECT_EQ(two.kind, SendOutcomeKind::Sent) << two.detail;
  EXPECT_EQ(received().size(), 2u);
}

TEST_F(MllpSenderTlsTest, AnIpAddressIsCheckedAsOneAgainstTheCertificate) {
  uint16_t port = startReceiver(ca().issue("server", "/CN=lab", {"localhost"}, {"127.0.0.1"}));
  makeTlsSender("127.0.0.1", port, ca(), true);
  SendOutcome out = sendOne();
  EXPECT_EQ(out.kind, SendOutcomeKind::Sent) << out.detail;
}

TEST_F(MllpSenderTlsTest, WithoutAClientCertificateTheReceiverRefusesAndItIsTransient) {
  uint16_t port = startReceiver(ca().issue("server", "/CN=lab", {"localhost"}, {"127.0.0.1"}));
  makeTlsSender("127.0.0.1", port, ca(), false);
  SendOutcome out = sendOne();
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  const std::string prefix = "TLS handshake with 127.0.0.1:" + std::to_string(port) + " failed: ";
  EXPECT_EQ(out.detail.rfind(prefix, 0), 0u) << out.detail;
  EXPECT_NE(out.detail.find("certificate required"), std::string::npos) << out.detail;
  EXPECT_TRUE(received().empty());
  EXPECT_FALSE(sender_->connected());
}

TEST_F(MllpSenderTlsTest, AServerCertificateOfAnotherCaIsRefusedAndItIsTransient) {
  uint16_t port = startReceiver(other().issue("server", "/CN=lab", {"localhost"}, {"127.0.0.1"}));
  makeTlsSender("localhost", port, ca(), true);
  SendOutcome out = sendOne();
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_EQ(out.detail, "TLS handshake with localhost:" + std::to_string(port) +
                            " failed: certificate verify failed (unable to get local issuer "
                            "certificate)");
  EXPECT_TRUE(received().empty());
}

TEST_F(MllpSenderTlsTest, AHostNameTheCertificateDoesNotNameIsRefusedAndItIsTransient) {
  uint16_t port = startReceiver(ca().issue("server", "/CN=lab", {"lab.example"}, {"127.0.0.1"}));
  makeTlsSender("localhost", port, ca(), true);
  SendOutcome out = sendOne();
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_EQ(out.detail, "TLS handshake with localhost:" + std::to_string(port) +
                            " failed: certificate verify failed (hostname mismatch)");
  EXPECT_TRUE(received().empty());
}

TEST_F(MllpSenderTlsTest, AReceiverThatNeverAnswersTheHandshakeTimesOutWithinTheSendTimeout) {
  // Accepts (the kernel's backlog) and never speaks.
  MllpReceiver silent([](const std::string&) { return MllpReply{}; });
  makeTlsSender("127.0.0.1", silent.port(), ca(), true);
  SendOutcome out = sendOne();
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_EQ(out.detail, "TLS handshake with 127.0.0.1:" + std::to_string(silent.port()) +
                            ": not done within 5000 ms");
}

}  // namespace
}  // namespace ductus::senders
