// StreamConnection's phases and backpressure, through a protocol of its own
// (one line, one request) over real sockets on 127.0.0.1: the transitions
// the HTTP and MLLP tests reach only by accident.
#include "common/net/stream_connection.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "common/fd.h"
#include "common/net/tcp_listener.h"
#include "tests/support/log_capture.h"
#include "tests/support/loop_thread.h"

namespace ductus::net {
namespace {

using std::chrono::milliseconds;
using test::eventually;
using test::LoopThread;

// What the connection saw, read by the test thread.
struct Probe {
  std::atomic<int> lines{0};
  std::atomic<bool> ended{false};
  std::atomic<bool> pacedWhenClosed{false};
  std::atomic<bool> closedPhase{false};
  std::atomic<bool> readingAfterClose{true};
  std::atomic<bool> heldWhenShutDown{false};
  std::atomic<bool> shuttingDownPhase{false};
};

// "close\n": an answer given from inside feed() (paced), then closed at
// once. "big\n": an answer far over unreadAnswers (held), then a shutdown
// that lingers. Anything else: "ok\n".
class LineConnection : public StreamConnection {
 public:
  explicit LineConnection(Probe* probe) : StreamConnection(0), probe_(probe) {}

 protected:
  size_t feed(const char* p, size_t n) override {
    std::string_view in(p, n);
    size_t eol = in.find('\n');
    if (eol == std::string_view::npos) {
      line_.append(in);
      return n;
    }
    line_.append(in.substr(0, eol));
    std::string line = std::exchange(line_, {});
    if (line == "close") {
      answerNow("closing\n");
      probe_->pacedWhenClosed = backpressure().pacedSince.has_value();
      closeNow();
      probe_->closedPhase = phase() == Phase::Closed;
      probe_->readingAfterClose = reading();
    } else if (line == "big") {
      answerNow(std::string(8 << 20, 'x') + "\n");
      probe_->heldWhenShutDown = backpressure().heldSince.has_value();
      shutdownAndClose(true);
      probe_->shuttingDownPhase = phase() == Phase::ShuttingDown;
    } else {
      answerNow("ok\n");
    }
    ++probe_->lines;  // last: the test reads the probes once it sees this
    return eol + 1;
  }
  void failed(IoStep, int) override {}
  void ended() override { probe_->ended = true; }

 private:
  Probe* probe_;
  std::string line_;
};

class StreamConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loop_.run([&] {
      ConnectionLimits limits;
      limits.unreadAnswers = 64 << 10;
      set_ = std::make_unique<ConnectionSet>("test", limits);
      TcpListen how{"test", "LINE", this, [](uv_stream_t* s, int status) {
                      auto* self = static_cast<StreamConnectionTest*>(s->data);
                      self->set_->accept<LineConnection>(s, status, &self->probe_);
                    }};
      ASSERT_TRUE(listenTcp(loop_.loop(), server_, how, "127.0.0.1", 0, 16).ok());
      port_ = boundPort(server_);
    });
  }
  void TearDown() override {
    loop_.run([&] {
      set_.reset();
      server_.reset();
    });
  }

  Fd connect(int receiveBuffer = 0) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (receiveBuffer > 0)
      setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &receiveBuffer, sizeof receiveBuffer);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
  }
  static bool send(const Fd& fd, std::string_view bytes) {
    return ::send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Everything the peer sends until it closes (or `limit` passes).
  static std::string readToEnd(const Fd& fd, milliseconds limit = milliseconds(10000)) {
    std::string got;
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd.get(), POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return got;
      char b[65536];
      ssize_t n = ::recv(fd.get(), b, sizeof b, 0);
      if (n <= 0) return got;
      got.append(b, static_cast<size_t>(n));
    }
  }

  LoopThread loop_;
  UvHandle<uv_tcp_t> server_;
  std::unique_ptr<ConnectionSet> set_;
  uint16_t port_ = 0;
  Probe probe_;
};

TEST_F(StreamConnectionTest, APacedConnectionThatIsClosedNeverReadsOrParsesAgain) {
  Fd fd = connect();
  // Pipelined: the second line is in the same read as the first, and would
  // be parsed once the paced answer is written if the close did not end it.
  ASSERT_TRUE(send(fd, "close\nnext\n"));
  ASSERT_TRUE(eventually([&] { return probe_.ended.load(); }));
  EXPECT_TRUE(probe_.pacedWhenClosed);
  EXPECT_TRUE(probe_.closedPhase);
  EXPECT_FALSE(probe_.readingAfterClose);
  EXPECT_EQ(probe_.lines, 1);
  loop_.run([&] { EXPECT_EQ(set_->size(), 0u); });
}

TEST_F(StreamConnectionTest, AHeldConnectionThatIsShutDownDeliversItsAnswerThenLetsThePeerLeave) {
  // A small window: most of the 8 MB answer waits in the server's queue,
  // far over unreadAnswers, when the shutdown comes.
  Fd fd = connect(4096);
  ASSERT_TRUE(send(fd, "big\n"));
  ASSERT_TRUE(eventually([&] { return probe_.lines.load() == 1; }));
  EXPECT_TRUE(probe_.heldWhenShutDown);
  EXPECT_TRUE(probe_.shuttingDownPhase);
  // Shut down, the answer still arrives whole and then the FIN; what the
  // peer sends afterwards is read and dropped (lingering), never parsed.
  std::string got = readToEnd(fd);
  EXPECT_EQ(got.size(), (size_t{8} << 20) + 1);
  EXPECT_FALSE(probe_.ended);
  EXPECT_TRUE(send(fd, "after\n"));
  ::shutdown(fd.get(), SHUT_WR);
  ASSERT_TRUE(eventually([&] { return probe_.ended.load(); }));
  EXPECT_EQ(probe_.lines, 1);
}

}  // namespace
}  // namespace ductus::net
