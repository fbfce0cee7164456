#include "intake/mllp_listener.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/intake/loop_thread.h"
#include "tests/support/mllp_client.h"

namespace ductus::intake {
namespace {

using hl7::AckCode;
using std::chrono::milliseconds;
using test::LoopThread;
using test::MllpClient;
using test::readAck;

std::string adt(const std::string& controlId, const std::string& extra = "") {
  return "MSH|^~\\&|LAB|HOSP|DUCTUS|ENGINE|20260101120000||ADT^A01^ADT_A01|" + controlId +
         "|P|2.5\rPID|1||" + controlId + "^^^HOSP^MR||DOE^JANE" + extra + "\r";
}

// A listener on 127.0.0.1 (free port) whose handler records every message
// and answers according to `policy`, on the loop thread.
class MllpListenerTest : public ::testing::Test {
 protected:
  using Policy = std::function<void(const std::string&, MllpAnswer)>;

  void start(Policy policy, MllpSettings settings = {}) {
    policy_ = std::move(policy);
    loop_.run([&] {
      listener_ = std::make_unique<MllpListener>(
          loop_.loop(), settings, [this](const MllpPeer& peer, std::string bytes, MllpAnswer a) {
            {
              std::lock_guard lock(mu_);
              received_.push_back(bytes);
              peers_.push_back(peer.address);
            }
            policy_(bytes, std::move(a));
          });
      auto s = listener_->listen("127.0.0.1", 0);
      ASSERT_TRUE(s) << s.error().message;
      port_ = listener_->port();
    });
    ASSERT_NE(port_, 0);
  }

  void TearDown() override {
    loop_.run([&] { listener_.reset(); });
  }

  MllpClient connect() {
    auto c = MllpClient::connect("127.0.0.1", port_);
    EXPECT_TRUE(c) << c.error().message;
    return std::move(*c);
  }

  std::vector<std::string> received() {
    std::lock_guard lock(mu_);
    return received_;
  }

  static Policy acceptAll() {
    return [](const std::string&, MllpAnswer a) { a(AckCode::Accept); };
  }

  LoopThread loop_;
  std::unique_ptr<MllpListener> listener_;
  Policy policy_;
  uint16_t port_ = 0;
  std::mutex mu_;
  std::vector<std::string> received_;
  std::vector<std::string> peers_;
};

TEST_F(MllpListenerTest, AnAcceptedMessageIsAnsweredAaWithItsControlId) {
  start(acceptAll());
  auto c = connect();
  auto ack = c.exchange(adt("MSG1"));
  ASSERT_TRUE(ack) << ack.error().message;
  auto f = readAck(*ack);
  EXPECT_EQ(f.code, "AA");
  EXPECT_EQ(f.controlId, "MSG1");
  auto r = received();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0], adt("MSG1"));
  std::lock_guard lock(mu_);
  EXPECT_EQ(peers_[0].rfind("127.0.0.1:", 0), 0u);
}

TEST_F(MllpListenerTest, AFrameSplitAcrossWritesIsReassembled) {
  start(acceptAll());
  auto c = connect();
  std::string framed = MllpClient::frame(adt("SPLIT"));
  // Cut inside the start block's neighbourhood, the body, and between 0x1C and 0x0D.
  std::vector<size_t> cuts = {1, 4, 30, framed.size() - 2, framed.size() - 1};
  size_t from = 0;
  for (size_t cut : cuts) {
    ASSERT_TRUE(c.sendRaw(std::string_view(framed).substr(from, cut - from)));
    from = cut;
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_TRUE(c.sendRaw(std::string_view(framed).substr(from)));
  auto ack = c.readFrame();
  ASSERT_TRUE(ack) << ack.error().message;
  EXPECT_EQ(readAck(*ack).controlId, "SPLIT");
  ASSERT_EQ(received().size(), 1u);
  EXPECT_EQ(received()[0], adt("SPLIT"));
}

TEST_F(MllpListenerTest, TwoMessagesInOneWriteAreHandledOneAtATimeAndAnsweredInOrder) {
  std::atomic<int> inFlight{0}, maxInFlight{0};
  start([&](const std::string&, MllpAnswer a) {
    int now = ++inFlight;
    maxInFlight = std::max(maxInFlight.load(), now);
    // Answer the first one late: the second must wait for it.
    LoopThread::after(loop_.loop(), 100, [&, a] {
      --inFlight;
      a(AckCode::Accept);
    });
  });
  auto c = connect();
  ASSERT_TRUE(c.sendRaw(MllpClient::frame(adt("FIRST")) + MllpClient::frame(adt("SECOND"))));
  auto a1 = c.readFrame();
  auto a2 = c.readFrame();
  ASSERT_TRUE(a1 && a2);
  EXPECT_EQ(readAck(*a1).controlId, "FIRST");
  EXPECT_EQ(readAck(*a2).controlId, "SECOND");
  EXPECT_EQ(maxInFlight.load(), 1);
  EXPECT_EQ(received().size(), 2u);
}

TEST_F(MllpListenerTest, AnOversizedFrameIsAnsweredArAndTheNextFrameStillWorks) {
  MllpSettings s;
  s.maxMessageBytes = 1000;
  start(acceptAll(), s);
  auto c = connect();
  std::string big = adt("BIG", std::string(5000, 'x'));
  auto ack = c.exchange(big);
  ASSERT_TRUE(ack) << ack.error().message;
  auto f = readAck(*ack);
  EXPECT_EQ(f.code, "AR");
  EXPECT_EQ(f.controlId, "BIG");
  EXPECT_EQ(f.text, "message too large");
  EXPECT_TRUE(received().empty());

  auto next = c.exchange(adt("SMALL"));
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_EQ(readAck(*next).code, "AA");
  EXPECT_EQ(readAck(*next).controlId, "SMALL");
  ASSERT_EQ(received().size(), 1u);
}

TEST_F(MllpListenerTest, BytesBeforeTheStartBlockAreSkipped) {
  start(acceptAll());
  auto c = connect();
  ASSERT_TRUE(c.sendRaw("garbage\r\n\x1c\r" + MllpClient::frame(adt("AFTER"))));
  auto ack = c.readFrame();
  ASSERT_TRUE(ack) << ack.error().message;
  EXPECT_EQ(readAck(*ack).controlId, "AFTER");
  ASSERT_EQ(received().size(), 1u);
  EXPECT_EQ(received()[0], adt("AFTER"));
}

TEST_F(MllpListenerTest, AFrameWithoutMshIsAnsweredArWithoutReachingTheHandler) {
  start(acceptAll());
  auto c = connect();
  auto ack = c.exchange("PID|1||123\rPV1|1|I\r");
  ASSERT_TRUE(ack) << ack.error().message;
  EXPECT_EQ(readAck(*ack).code, "AR");
  EXPECT_TRUE(received().empty());
  // The connection is still in sync.
  auto next = c.exchange(adt("OK"));
  ASSERT_TRUE(next);
  EXPECT_EQ(readAck(*next).code, "AA");
}

TEST_F(MllpListenerTest, TheAckUsesTheSendersCustomDelimiters) {
  start(acceptAll());
  auto c = connect();
  auto ack = c.exchange("MSH#@!*&#LAB#HOSP#ME#HERE#2026##ORU@R01#C7#P#2.3\rPID#1##1\r");
  ASSERT_TRUE(ack) << ack.error().message;
  EXPECT_EQ(ack->rfind("MSH#@!*&#ME#HERE#LAB#HOSP#", 0), 0u) << *ack;
  EXPECT_NE(ack->find("\rMSA#AA#C7"), std::string::npos) << *ack;
}

TEST_F(MllpListenerTest, Iso88591BytesPassThroughUntouched) {
  start(acceptAll());
  auto c = connect();
  std::string latin1;
  for (int b = 0x80; b <= 0xff; ++b) latin1 += static_cast<char>(b);
  std::string msg = adt("LATIN", "^M\xfcller^\xe9t\xe9" + latin1 + std::string("\0nul", 4));
  auto ack = c.exchange(msg);
  ASSERT_TRUE(ack);
  EXPECT_EQ(readAck(*ack).code, "AA");
  ASSERT_EQ(received().size(), 1u);
  EXPECT_EQ(received()[0], msg);
}

TEST_F(MllpListenerTest, SixteenConcurrentConnectionsAreEachAnsweredInOrder) {
  start([&](const std::string& bytes, MllpAnswer a) {
    // Answer on a later loop turn, as a commit would.
    LoopThread::after(loop_.loop(), 1, [a] { a(AckCode::Accept); });
  });
  constexpr int kConnections = 16, kMessages = 25;
  std::atomic<int> ok{0};
  std::vector<std::thread> senders;
  for (int t = 0; t < kConnections; ++t) {
    senders.emplace_back([&, t] {
      auto c = MllpClient::connect("127.0.0.1", port_);
      if (!c) return;
      for (int i = 0; i < kMessages; ++i) {
        std::string id = "C" + std::to_string(t) + "M" + std::to_string(i);
        auto ack = c->exchange(adt(id));
        if (ack && readAck(*ack).controlId == id && readAck(*ack).code == "AA") ++ok;
      }
    });
  }
  for (auto& t : senders) t.join();
  EXPECT_EQ(ok.load(), kConnections * kMessages);
  EXPECT_EQ(received().size(), size_t{kConnections * kMessages});
}

TEST_F(MllpListenerTest, AnAnswerGivenLaterArrivesOnlyThen) {
  std::atomic<bool> answered{false};
  start([&](const std::string&, MllpAnswer a) {
    // A slow commit: the answer comes 200 ms later.
    LoopThread::after(loop_.loop(), 200, [&, a] {
      answered = true;
      a(AckCode::Accept);
    });
  });
  auto c = connect();
  ASSERT_TRUE(c.send(adt("SLOW")));
  EXPECT_FALSE(c.readFrame(milliseconds(100))) << "an ACK arrived before the answer";
  auto ack = c.readFrame(milliseconds(5000));
  ASSERT_TRUE(ack) << ack.error().message;
  // The flag, not the clock, proves the order: libuv's timer counts from the
  // loop's cached time, which can be a little older than the send.
  EXPECT_TRUE(answered.load());
  EXPECT_EQ(readAck(*ack).code, "AA");
}

TEST_F(MllpListenerTest, ErrorAndRejectAnswersCarryTheirCodeAndText) {
  start([](const std::string& bytes, MllpAnswer a) {
    if (bytes.find("|E1|") != std::string::npos) a(AckCode::Error, "storing failed: db down");
    else a(AckCode::Reject, "bad");
  });
  auto c = connect();
  auto e = c.exchange(adt("E1"));
  ASSERT_TRUE(e);
  EXPECT_EQ(readAck(*e).code, "AE");
  EXPECT_EQ(readAck(*e).text, "storing failed: db down");
  auto r = c.exchange(adt("R1"));
  ASSERT_TRUE(r);
  EXPECT_EQ(readAck(*r).code, "AR");
}

TEST_F(MllpListenerTest, OnlyTheFirstAnswerCountsAndADroppedAnswerSendsAe) {
  start([](const std::string& bytes, MllpAnswer a) {
    if (bytes.find("|DROP|") != std::string::npos) return;  // never answered
    MllpAnswer copy = a;
    a(AckCode::Accept);
    copy(AckCode::Error, "too late");
    EXPECT_TRUE(copy.answered());
  });
  auto c = connect();
  auto first = c.exchange(adt("TWICE"));
  ASSERT_TRUE(first);
  EXPECT_EQ(readAck(*first).code, "AA");
  auto dropped = c.exchange(adt("DROP"));
  ASSERT_TRUE(dropped);
  EXPECT_EQ(readAck(*dropped).code, "AE");
  auto after = c.exchange(adt("AFTER"));
  ASSERT_TRUE(after) << "a second ACK for TWICE or DROP would show up here";
  EXPECT_EQ(readAck(*after).controlId, "AFTER");
}

TEST_F(MllpListenerTest, AnAnswerAfterTheSenderLeftIsHarmless) {
  std::vector<MllpAnswer> held;
  start([&](const std::string&, MllpAnswer a) { held.push_back(std::move(a)); });
  {
    auto c = connect();
    ASSERT_TRUE(c.send(adt("GONE")));
    for (int i = 0; i < 100 && received().empty(); ++i) std::this_thread::sleep_for(milliseconds(10));
  }  // the sender disconnects without its ACK
  std::this_thread::sleep_for(milliseconds(50));
  loop_.run([&] {
    for (auto& a : held) a(AckCode::Accept);
  });
  auto c = connect();
  loop_.run([&] {
    held.clear();
    policy_ = acceptAll();
  });
  auto ack = c.exchange(adt("NEXT"));
  ASSERT_TRUE(ack) << ack.error().message;
  EXPECT_EQ(readAck(*ack).controlId, "NEXT");
}

TEST_F(MllpListenerTest, ASenderThatHalfClosesAfterItsMessageStillGetsTheAck) {
  start([&](const std::string&, MllpAnswer a) {
    LoopThread::after(loop_.loop(), 50, [a] { a(AckCode::Accept); });
  });
  auto c = connect();
  ASSERT_TRUE(c.send(adt("HALF")));
  ASSERT_EQ(::shutdown(c.fd(), SHUT_WR), 0);
  auto ack = c.readFrame();
  ASSERT_TRUE(ack) << ack.error().message;
  EXPECT_EQ(readAck(*ack).controlId, "HALF");
  EXPECT_TRUE(c.closedByPeer());
}

TEST_F(MllpListenerTest, TwoMessagesThenAHalfCloseAreBothAnsweredBeforeTheClose) {
  start([&](const std::string&, MllpAnswer a) {
    LoopThread::after(loop_.loop(), 50, [a] { a(AckCode::Accept); });
  });
  auto c = connect();
  ASSERT_TRUE(c.sendRaw(MllpClient::frame(adt("ONE")) + MllpClient::frame(adt("TWO"))));
  ASSERT_EQ(::shutdown(c.fd(), SHUT_WR), 0);
  auto a1 = c.readFrame();
  auto a2 = c.readFrame();
  ASSERT_TRUE(a1 && a2);
  EXPECT_EQ(readAck(*a1).controlId, "ONE");
  EXPECT_EQ(readAck(*a2).controlId, "TWO");
  EXPECT_TRUE(c.closedByPeer());
}

// A sender that does not wait for its ACKs: the listener buffers a bounded
// amount behind the message in flight, then stops reading (TCP holds the
// sender back), and still answers everything once, in order.
TEST_F(MllpListenerTest, ASenderThatPipelinesMegabytesIsHeldBackAndAnsweredInOrder) {
  std::atomic<bool> first{true};
  start([&](const std::string&, MllpAnswer a) {
    if (first.exchange(false)) LoopThread::after(loop_.loop(), 300, [a] { a(AckCode::Accept); });
    else a(AckCode::Accept);
  });
  auto c = connect();
  const int n = 40;
  std::string all;
  for (int i = 0; i < n; ++i)
    all += MllpClient::frame(adt("P" + std::to_string(i), std::string(100 * 1024, 'x')));
  ASSERT_TRUE(c.sendRaw(all));  // 4 MB: more than the listener buffers
  for (int i = 0; i < n; ++i) {
    auto ack = c.readFrame(milliseconds(10000));
    ASSERT_TRUE(ack) << "ACK " << i << ": " << ack.error().message;
    EXPECT_EQ(readAck(*ack).controlId, "P" + std::to_string(i));
  }
  EXPECT_EQ(received().size(), static_cast<size_t>(n));
}

TEST_F(MllpListenerTest, CloseAnswersInFlightMessagesThenClosesEverything) {
  std::vector<MllpAnswer> held;
  start([&](const std::string&, MllpAnswer a) { held.push_back(std::move(a)); });
  auto busy = connect();
  auto idle = connect();
  ASSERT_TRUE(busy.send(adt("INFLIGHT")));
  for (int i = 0; i < 100 && received().empty(); ++i) std::this_thread::sleep_for(milliseconds(10));
  ASSERT_EQ(received().size(), 1u);

  std::atomic<bool> closed{false};
  loop_.run([&] { listener_->close([&] { closed = true; }); });
  EXPECT_TRUE(idle.closedByPeer()) << "an idle connection stays open after close()";
  EXPECT_FALSE(closed.load());
  EXPECT_FALSE(MllpClient::connect("127.0.0.1", port_, milliseconds(500)))
      << "still accepting after close()";

  loop_.run([&] { held[0](AckCode::Accept); });
  auto ack = busy.readFrame();
  ASSERT_TRUE(ack) << ack.error().message;
  EXPECT_EQ(readAck(*ack).controlId, "INFLIGHT");
  EXPECT_TRUE(busy.closedByPeer());
  for (int i = 0; i < 200 && !closed; ++i) std::this_thread::sleep_for(milliseconds(5));
  EXPECT_TRUE(closed.load());
  loop_.run([&] { held.clear(); });
}

TEST_F(MllpListenerTest, AnAlreadyListeningSocketCanBeAdopted) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  loop_.run([&] {
    listener_ = std::make_unique<MllpListener>(
        loop_.loop(), MllpSettings{}, [](const MllpPeer&, std::string, MllpAnswer a) {
          a(AckCode::Accept);
        });
    auto s = listener_->adopt(fd);
    ASSERT_TRUE(s) << s.error().message;
    port_ = listener_->port();
  });
  auto c = connect();
  auto ack = c.exchange(adt("ADOPTED"));
  ASSERT_TRUE(ack);
  EXPECT_EQ(readAck(*ack).controlId, "ADOPTED");
}

TEST_F(MllpListenerTest, ASocketThatIsNotListeningIsRefused) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  loop_.run([&] {
    listener_ = std::make_unique<MllpListener>(loop_.loop(), MllpSettings{},
                                               [](const MllpPeer&, std::string, MllpAnswer) {});
    EXPECT_FALSE(listener_->adopt(fd));
  });
}

}  // namespace
}  // namespace ductus::intake
