// The heartbeat against a real HTTP server on 127.0.0.1: the first beat at
// start, then one every `every`; a receiver that is down is counted and
// logged once, not at every beat, and "answers again" once when it is back;
// destroyed mid-beat it never calls back.
#include "supervisor/alerts/heartbeat.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <atomic>
#include <thread>

#include "common/net/curl_multi_uv.h"
#include "tests/support/log_capture.h"
#include "tests/support/ports.h"
#include "tests/support/receivers.h"
#include "tests/support/run_until.h"

namespace ductus::supervisor::alerts {
namespace {

using namespace std::chrono_literals;

// An HTTP server on a socket the test holds: 200 to each request, until
// stopped (then the port refuses again).
class Pong {
 public:
  explicit Pong(int fd) : fd_(fd) {
    ::listen(fd_, 16);
    thread_ = std::thread([this] {
      while (!stop_) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) continue;
        char buf[4096];
        (void)::read(c, buf, sizeof buf);  // one small GET
        const char kOk[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        (void)::write(c, kOk, sizeof kOk - 1);
        ::close(c);
        ++served_;
      }
    });
  }
  ~Pong() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);  // wakes accept()
    thread_.join();
  }
  int served() const { return served_; }

 private:
  int fd_;
  std::atomic<bool> stop_{false};
  std::atomic<int> served_{0};
  std::thread thread_;
};

class HeartbeatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    multi_ = std::make_unique<net::CurlMulti>(&loop_);
  }
  void TearDown() override {
    beat_.reset();
    multi_.reset();
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }
  Heartbeat& make(const std::string& url, monitor::Seconds every = 1s) {
    beat_ = std::make_unique<Heartbeat>(*multi_, monitor::Heartbeat{.url = url, .every = every});
    return *beat_;
  }

  uv_loop_t loop_;
  std::unique_ptr<net::CurlMulti> multi_;
  std::unique_ptr<Heartbeat> beat_;
};

TEST_F(HeartbeatTest, CallsTheUrlAtStartAndThenEveryInterval) {
  senders::test::HttpReceiver server;
  auto& beat = make(server.url("/ping/x"));
  beat.start();
  // The first beat does not wait a whole interval.
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return server.requests().size() >= 1; }, 700ms));
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return server.requests().size() >= 3; }, 4s));
  EXPECT_GE(beat.calls(), 3u);
  EXPECT_EQ(beat.failures(), 0u);
  EXPECT_FALSE(beat.failing());
  for (auto& r : server.requests()) {
    EXPECT_EQ(r.method, "GET");
    EXPECT_EQ(r.path, "/ping/x");
  }
  beat.stop();
  size_t seen = server.requests().size();
  test::runUntil(&loop_, [] { return false; }, 1500ms);
  EXPECT_EQ(server.requests().size(), seen) << "a beat after stop()";
}

TEST_F(HeartbeatTest, ADownReceiverIsLoggedOncePerChangeAndTheBeatGoesOn) {
  test::LogCapture log;
  uint16_t port = 0;
  Fd socket = test::closedPort(&port);
  auto& beat = make("http://127.0.0.1:" + std::to_string(port) + "/ping/T0KEN");
  beat.start();
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return beat.failures() >= 3; }, 6s));
  EXPECT_TRUE(beat.failing());
  EXPECT_EQ(beat.calls(), beat.failures());
  EXPECT_EQ(log.count("fails"), 1u) << log.all();
  EXPECT_EQ(log.all().find("T0KEN"), std::string::npos) << log.all();

  auto pong = std::make_unique<Pong>(socket.get());
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return !beat.failing(); }, 4s));
  auto failuresBefore = beat.failures();
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return pong->served() >= 2; }, 4s));
  EXPECT_EQ(beat.failures(), failuresBefore);
  EXPECT_EQ(log.count("answers again"), 1u) << log.all();

  pong.reset();
  socket = Fd();  // the port refuses again
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return beat.failures() >= failuresBefore + 2; }, 6s));
  EXPECT_EQ(log.count("fails"), 2u) << log.all();
}

TEST_F(HeartbeatTest, AnIntervalOfZeroIsOneSecond) {
  senders::test::HttpReceiver server;
  auto& beat = make(server.url("/ping"), 0s);
  beat.start();
  test::runUntil(&loop_, [] { return false; }, 1500ms);
  EXPECT_GE(server.requests().size(), 1u);
  EXPECT_LE(server.requests().size(), 2u);
}

TEST_F(HeartbeatTest, DestroyedMidBeatItNeverCallsBack) {
  senders::test::HttpReceiver server;
  auto& beat = make(server.url("/slow/3000"), 10s);
  beat.start();
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return server.requests().size() >= 1; }, 2s));
  beat_.reset();
  EXPECT_EQ(multi_->running(), 0u);
  test::runUntil(&loop_, [] { return false; }, 200ms);
}

}  // namespace
}  // namespace ductus::supervisor::alerts
