#include "intake/mllp_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/sinks/base_sink.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "common/fd.h"
#include "common/log.h"
#include "tests/support/log_capture.h"
#include "tests/support/loop_thread.h"
#include "tests/support/mllp_client.h"

namespace ductus::intake {
namespace {

using hl7::AckCode;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using test::LoopThread;
using test::MllpClient;
using test::readAck;

using test::LogCapture;
using test::eventually;

// A plain blocking connection to 127.0.0.1:port. A small receive buffer
// (set before connecting, so the window stays small) makes the server's
// answers pile up in its own write queue after a few KB instead of in the
// kernels' buffers.
Fd connectRaw(uint16_t port, int receiveBuffer = 0) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (receiveBuffer > 0)
    setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &receiveBuffer, sizeof receiveBuffer);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return Fd();
  return fd;
}

// Whether the server closed fd within the timeout; what it sent before
// goes to *got.
bool closedByServer(int fd, std::string* got, milliseconds timeout = milliseconds(3000)) {
  auto until = steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<milliseconds>(until - steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char b[4096];
    ssize_t n = ::recv(fd, b, sizeof b, 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    if (n < 0) return false;
    got->append(b, static_cast<size_t>(n));
  }
}

struct Flood {
  size_t sent = 0;
  bool heldBack = false;  // the server stopped taking bytes for `stall`
};

// Sends `unit` over and over, never reading, until the server stops taking
// bytes for `stall` or maxBytes have gone.
Flood floodWithoutReading(int fd, const std::string& unit, size_t maxBytes, milliseconds stall) {
  std::string chunk;
  while (chunk.size() < 64 * 1024) chunk += unit;
  Flood f;
  while (f.sent < maxBytes) {
    ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      f.sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(stall.count())) == 0) {
      f.heldBack = true;
      break;
    }
  }
  return f;
}

struct KeepAlive {
  int on = -1, idle = -1, interval = -1, probes = -1;
};

// The options of the server's end of a connection: in this process, the
// socket whose peer is the client's own address.
KeepAlive serverKeepAlive(int clientFd) {
  sockaddr_in mine{};
  socklen_t len = sizeof mine;
  getsockname(clientFd, reinterpret_cast<sockaddr*>(&mine), &len);
  KeepAlive k;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = std::atoi(e.path().filename().c_str());
    sockaddr_in peer{};
    len = sizeof peer;
    if (fd == clientFd || getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0 ||
        peer.sin_family != AF_INET || peer.sin_port != mine.sin_port ||
        peer.sin_addr.s_addr != mine.sin_addr.s_addr)
      continue;
    socklen_t n = sizeof(int);
    getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &k.on, &n);
    getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &k.idle, &n);
    getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &k.interval, &n);
    getsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &k.probes, &n);
  }
  return k;
}

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

TEST_F(MllpListenerTest, ANestedStartBlockIsAnsweredArWithTheReasonWithoutReachingTheHandler) {
  start(acceptAll());
  auto c = connect();
  // Two messages in one frame: stored as one, it would leave as two.
  ASSERT_TRUE(c.sendRaw("\x0b" + adt("NEST1") + "\x0b" + adt("NEST2") + "\x1c\r"));
  auto ack = c.readFrame();
  ASSERT_TRUE(ack) << ack.error().message;
  auto f = readAck(*ack);
  EXPECT_EQ(f.code, "AR") << *ack;
  EXPECT_EQ(f.controlId, "NEST1") << *ack;
  EXPECT_NE(f.text.find("contains MLLP framing bytes (0x0B, start block at byte " +
                        std::to_string(adt("NEST1").size()) + ")"),
            std::string::npos)
      << *ack;
  EXPECT_TRUE(received().empty());
  // The connection is still in sync.
  auto next = c.exchange(adt("OK"));
  ASSERT_TRUE(next);
  EXPECT_EQ(readAck(*next).code, "AA");
  EXPECT_EQ(received().size(), 1u);
}

// hl7apy's test message with custom encoding characters ('!' fields, '$'
// components, 'r' repetitions, '?' escape, '@' subcomponents): a letter is
// legal as any delimiter but the field separator.
TEST_F(MllpListenerTest, Hl7apysCustomDelimitersAreAcceptedAndHandedOverByteForByte) {
  start(acceptAll());
  auto c = connect();
  const std::string msg =
      "MSH!$r?@!LIP!LIP!LB!LB!20111207121030!!RSP^SLI^RSP_K11!430102!D!2.5!!!!!IT!!EN\r"
      "PID!1!!566-554$$$GHH$MRr777$$$GHH$MR!!SURNAME$NAME\r";
  auto ack = c.exchange(msg);
  ASSERT_TRUE(ack) << ack.error().message;
  EXPECT_EQ(ack->rfind("MSH!$r?@!LB!LB!LIP!LIP!", 0), 0u) << *ack;
  EXPECT_NE(ack->find("\rMSA!AA!430102"), std::string::npos) << *ack;
  ASSERT_EQ(received().size(), 1u);
  EXPECT_EQ(received()[0], msg);
}

TEST_F(MllpListenerTest, ALetterAsFieldSeparatorIsArAndAnUnusableMsh2StillEchoesMsh10) {
  start(acceptAll());
  auto c = connect();
  auto ack = c.exchange("MSHX^~\\&XLABXHOSPXMEXHEREX2026XXADT^A01XC8XPX2.5\r");
  ASSERT_TRUE(ack) << ack.error().message;
  auto f = readAck(*ack);
  EXPECT_EQ(f.code, "AR") << *ack;
  EXPECT_EQ(f.controlId, "") << *ack;  // a letter splits "MSH" itself: nothing to read
  // MSH-2 declares '^' twice: the header can't be used, MSH-10 can be read.
  ack = c.exchange("MSH|^^\\&|LAB|HOSP|ME|HERE|2026||ADT^A01|C9|P|2.5\rPID|1\r");
  ASSERT_TRUE(ack) << ack.error().message;
  f = readAck(*ack);
  EXPECT_EQ(f.code, "AR") << *ack;
  EXPECT_EQ(f.controlId, "C9") << *ack;
  EXPECT_TRUE(received().empty());
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
  auto ack = c.readFrame(milliseconds(5000));
  ASSERT_TRUE(ack) << ack.error().message;
  // The flag, not the clock, proves the order: libuv's timer counts from the
  // loop's cached time, which can be a little older than the send, and a
  // test thread held up past the 200 ms would see an ACK in any window.
  EXPECT_TRUE(answered.load()) << "an ACK arrived before the answer";
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

// ---- limits: what one peer may hold ----

TEST_F(MllpListenerTest, PastTheConnectionLimitANewConnectionIsClosedUnansweredAndLoggedOnce) {
  LogCapture log;
  MllpSettings s;
  s.limits.maxConnections = 2;
  s.limits.logEvery = milliseconds(1500);
  start(acceptAll(), s);
  auto a = connect();
  auto b = connect();
  ASSERT_TRUE(a.exchange(adt("A1")));
  ASSERT_TRUE(b.exchange(adt("B1")));
  for (int i = 0; i < 5; ++i) {
    Fd refused = connectRaw(port_);
    ASSERT_TRUE(refused.valid());
    std::string got;
    EXPECT_TRUE(closedByServer(refused.get(), &got)) << "connection " << i << " past the limit";
    EXPECT_EQ(got, "") << "MLLP has nothing to say to a refused connection";
  }
  loop_.run([&] { EXPECT_EQ(listener_->connectionCount(), 2u); });
  // One line at once; the other four are said together when the interval
  // is over.
  EXPECT_EQ(log.count("refused a connection from 127.0.0.1:"), 1u) << log.all();
  // Said when the 1.5 s are over; waited for up to 10 s.
  EXPECT_TRUE(eventually([&] { return log.count("refused 4 more connection(s)") == 1; },
                         milliseconds(10000)))
      << log.all();
  EXPECT_EQ(log.count("refused"), 2u) << log.all();
  // The two admitted still work, and a place freed is taken again.
  ASSERT_TRUE(b.exchange(adt("B2")));
  { MllpClient gone = std::move(a); }
  ASSERT_TRUE(eventually([&] {
    size_t n = 0;
    loop_.run([&] { n = listener_->connectionCount(); });
    return n == 1;
  }));
  auto c = connect();
  auto ack = c.exchange(adt("C1"));
  ASSERT_TRUE(ack) << ack.error().message;
  EXPECT_EQ(readAck(*ack).code, "AA");
}

TEST_F(MllpListenerTest, AnIdleConnectionIsClosedAfterTheIdleTimeoutButNotWhileAMessageIsInFlight) {
  MllpSettings s;
  s.limits.idleTimeout = milliseconds(300);
  start(
      [&](const std::string& bytes, MllpAnswer a) {
        // Answered three idle timeouts later, as a slow commit would be.
        if (bytes.find("|SLOW|") != std::string::npos)
          LoopThread::after(loop_.loop(), 900, [a] { a(AckCode::Accept); });
        else
          a(AckCode::Accept);
      },
      s);

  auto idle = connect();
  ASSERT_TRUE(idle.exchange(adt("FIRST")));
  auto t0 = steady_clock::now();
  EXPECT_TRUE(idle.closedByPeer(milliseconds(3000))) << "an idle connection stays open";
  EXPECT_GE(steady_clock::now() - t0, milliseconds(200));

  auto busy = connect();
  auto ack = busy.exchange(adt("SLOW"), milliseconds(5000));
  ASSERT_TRUE(ack) << "closed while its message was in flight: " << ack.error().message;
  EXPECT_EQ(readAck(*ack).code, "AA");

  // A message every 50 ms keeps a connection open past the timeout (a
  // sixth of it: a busy machine may hold the sender up a while).
  auto steady = connect();
  for (int i = 0; i < 20; ++i) {
    auto a = steady.exchange(adt("S" + std::to_string(i)));
    ASSERT_TRUE(a) << i << ": " << a.error().message;
    std::this_thread::sleep_for(milliseconds(50));
  }

  // Bytes outside any frame do not: they are not a message. Counted as
  // activity, a line every 100 ms would keep the connection open for the
  // whole 5 s (no clock needed to tell).
  auto stray = connect();
  bool closed = false;
  for (int i = 0; i < 50 && !closed; ++i) {
    (void)stray.sendRaw("\r\n");
    closed = stray.closedByPeer(milliseconds(100));
  }
  EXPECT_TRUE(closed) << "stray bytes kept an idle connection open";
}

TEST_F(MllpListenerTest, AFrameNotCompleteWithinTheDeadlineClosesItsConnectionWithALogLine) {
  LogCapture log;
  MllpSettings s;
  s.limits.frameDeadline = milliseconds(400);
  start(acceptAll(), s);

  // In two pieces within the deadline: answered.
  auto ok = connect();
  std::string framed = MllpClient::frame(adt("INTIME"));
  ASSERT_TRUE(ok.sendRaw(framed.substr(0, 20)));
  std::this_thread::sleep_for(milliseconds(50));
  ASSERT_TRUE(ok.sendRaw(framed.substr(20)));
  auto ack = ok.readFrame();
  ASSERT_TRUE(ack) << ack.error().message;
  EXPECT_EQ(readAck(*ack).code, "AA");

  // Begun, then trickled a byte every 50 ms: closed at the deadline,
  // however busy the trickle (the upper bound is ten deadlines: for a
  // busy machine, not for the listener).
  auto slow = connect();
  ASSERT_TRUE(slow.sendRaw("\x0b" + adt("NEVER")));
  auto t0 = steady_clock::now();
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i) {
    (void)slow.sendRaw("x");
    closed = slow.closedByPeer(milliseconds(50));
  }
  EXPECT_TRUE(closed) << "a frame that never ends keeps its connection";
  EXPECT_GE(steady_clock::now() - t0, milliseconds(300));
  EXPECT_LT(steady_clock::now() - t0, milliseconds(4000));
  EXPECT_EQ(received().size(), 1u);
  EXPECT_EQ(log.count("is still not complete"), 1u) << log.all();
}

TEST_F(MllpListenerTest, EveryAcceptedConnectionHasTcpKeepalive) {
  start(acceptAll());
  auto c = connect();
  ASSERT_TRUE(c.exchange(adt("KA")));  // accepted and running on the loop
  KeepAlive k = serverKeepAlive(c.fd());
  EXPECT_EQ(k.on, 1);
  EXPECT_EQ(k.idle, 15);
  EXPECT_EQ(k.interval, 5);
  EXPECT_EQ(k.probes, 3);
}

// A peer that sends frames without MSH, each answered AR by the listener
// itself, and never reads: without a bound its ARs pile up in the write
// queue and its refusals in the log, as fast as it can send.
TEST_F(MllpListenerTest, APeerSendingGarbageThatNeverReadsIsHeldBackThenClosedLoggingLittle) {
  LogCapture log(spdlog::level::info);
  MllpSettings s;
  s.limits.unreadAnswers = 64 * 1024;
  s.limits.unreadGrace = milliseconds(3000);
  start(acceptAll(), s);
  Fd peer = connectRaw(port_, 4096);
  ASSERT_TRUE(peer.valid());
  // 16 bytes in, a ~100-byte AR out: 32 MB would be 200 MB of answers.
  Flood f = floodWithoutReading(peer.get(), "\x0bNOT HL7 AT ALL\x1c\r", size_t{32} << 20,
                                milliseconds(1000));
  EXPECT_TRUE(f.heldBack) << "still reading after " << f.sent << " bytes";
  EXPECT_LT(f.sent, size_t{16} << 20);
  // Over the limit past the 3 s grace: closed (waited for up to 20 s).
  EXPECT_TRUE(eventually(
      [&] {
        size_t n = 1;
        loop_.run([&] { n = listener_->connectionCount(); });
        return n == 0;
      },
      milliseconds(20000)));
  EXPECT_EQ(log.count("answers unread for"), 1u) << log.all();
  EXPECT_TRUE(received().empty());
  // Thousands of refusals, two lines: the first, and the count at the close.
  EXPECT_EQ(log.count("message refused"), 1u) << log.all();
  EXPECT_EQ(log.count("more message(s) refused since the last line"), 1u) << log.all();
  EXPECT_LE(log.count(""), 4u) << log.all();
}

// Sends n messages without reading (on a thread: it blocks once the
// listener stops reading), then reads every ACK; the control ids in the
// order they came.
std::vector<std::string> pipelineThenReadLate(uint16_t port, int n,
                                              const std::function<void()>& whileNotReading) {
  Fd peer = connectRaw(port, 4096);
  if (!peer.valid()) return {};
  std::string all;
  for (int i = 0; i < n; ++i) all += MllpClient::frame(adt("P" + std::to_string(i)));
  std::thread writer([&] {
    size_t off = 0;
    while (off < all.size()) {
      ssize_t w = ::send(peer.get(), all.data() + off, all.size() - off, MSG_NOSIGNAL);
      if (w <= 0) return;
      off += static_cast<size_t>(w);
    }
  });
  struct Joiner {
    int fd;
    std::thread& t;
    ~Joiner() {
      ::shutdown(fd, SHUT_RDWR);  // a writer still blocked gives up
      t.join();
    }
  } joiner{peer.get(), writer};
  whileNotReading();
  std::vector<std::string> ids;
  std::string buf;
  auto until = steady_clock::now() + milliseconds(30000);
  while (static_cast<int>(ids.size()) < n && steady_clock::now() < until) {
    pollfd p{peer.get(), POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    char b[65536];
    ssize_t r = ::recv(peer.get(), b, sizeof b, 0);
    if (r <= 0) break;
    buf.append(b, static_cast<size_t>(r));
    for (size_t end; (end = buf.find("\x1c\r")) != std::string::npos;) {
      auto f = readAck(buf.substr(1, end - 1));
      ids.push_back(f.code == "AA" ? f.controlId : f.code);
      buf.erase(0, end + 2);
    }
  }
  return ids;
}

// "" when ids are P0 ... P(n-1); else what differs first.
std::string outOfOrder(const std::vector<std::string>& ids, int n) {
  for (int i = 0; i < n; ++i) {
    std::string want = "P" + std::to_string(i);
    if (i >= static_cast<int>(ids.size())) return "only " + std::to_string(ids.size()) + " ACKs";
    if (ids[i] != want) return "ACK " + std::to_string(i) + " is " + ids[i] + ", not " + want;
  }
  return ids.size() == static_cast<size_t>(n) ? "" : std::to_string(ids.size()) + " ACKs";
}

// Held back is not refused: a sender that pipelines far more than the limit
// of ACKs and reads them late gets every one, in order. Answered after a
// loop turn, as a commit is: the ACKs pile up past the limit.
TEST_F(MllpListenerTest, ASenderHeldBackForUnreadAcksGetsEveryAckOnceItReads) {
  LogCapture log;
  MllpSettings s;
  s.limits.unreadAnswers = 16 * 1024;
  start([&](const std::string&,
            MllpAnswer a) { LoopThread::after(loop_.loop(), 0, [a] { a(AckCode::Accept); }); },
        s);
  const int n = 20000;  // ~2.4 MB of ACKs
  auto ids = pipelineThenReadLate(port_, n, [&] {
    EXPECT_TRUE(eventually([&] { return log.count("reading from it stops") > 0; }))
        << "never held back: " << log.all();
  });
  EXPECT_EQ(outOfOrder(ids, n), "");
  EXPECT_EQ(received().size(), static_cast<size_t>(n));
}

// The same with answers given at once, inside the parse: each waits for
// the one before to be written, and none is lost while the sender does not
// read.
TEST_F(MllpListenerTest, ASenderAnsweredAtOnceWhileNotReadingGetsEveryAckOnceItReads) {
  MllpSettings s;
  s.limits.unreadAnswers = 16 * 1024;
  start(acceptAll(), s);
  const int n = 20000;
  auto ids = pipelineThenReadLate(port_, n, [] { std::this_thread::sleep_for(milliseconds(500)); });
  EXPECT_EQ(outOfOrder(ids, n), "");
  EXPECT_EQ(received().size(), static_cast<size_t>(n));
}

}  // namespace
}  // namespace ductus::intake
