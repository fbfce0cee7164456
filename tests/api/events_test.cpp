// GET /api/v1/events over real HTTP on a fake EngineView: who may listen
// (a token or a browser's session cookie), the first snapshot at once, an
// event per change and none without one, heartbeats, one counting task
// that runs only while someone listens, the limit on streams, a client
// that never reads dropped, and the server's close ending the streams.
#include "api/events.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "api/routes.h"
#include "common/fd.h"
#include "tests/api/api_harness.h"
#include "tests/support/log_capture.h"

namespace ductus::api::test {
namespace {

using ductus::test::eventually;
using nlohmann::json;
using std::chrono::milliseconds;

class FakeEngine : public EngineView {
 public:
  EngineState state() const override { return state_; }
  EngineInfo engine() const override {
    EngineInfo e;
    e.state = state_;
    e.workers.push_back({"shared", 0, 4242, "running", 2, 3});
    return e;
  }
  void interfaces(std::function<void(Result<std::vector<InterfaceInfo>>)> done) override {
    InterfaceInfo adt;
    adt.name = "adt";
    adt.source = "mllp";
    adt.state = "running";
    adt.gateOpen = true;
    adt.received = received;
    DestinationInfo out;
    out.name = "lab";
    out.sent = 7;
    out.quarantined = 1;
    adt.destinations.push_back(out);
    std::vector<InterfaceInfo> list{adt};
    // A configuration of many interfaces: a snapshot of ~200 bytes each.
    for (int i = 0; i < padding; ++i) {
      InterfaceInfo f;
      f.name = "feed-" + std::to_string(i) + "-" + std::string(200, 'x');
      f.source = "mllp";
      f.state = "running";
      list.push_back(std::move(f));
    }
    done(std::move(list));
  }
  // As the store does: the pending counts come on a later turn of the loop.
  void interfacesWithPending(
      std::function<void(Result<std::vector<InterfaceInfo>>)> done) override {
    ++queries;
    if (changeEveryQuery) ++received;
    interfaces([this, done](Result<std::vector<InterfaceInfo>> r) {
      auto list = *r;
      list[0].destinations[0].pending = pending;
      list[0].destinations[0].quarantinedNow = 2;
      if (health) {
        list[0].destinations[0].health = *health;
        list[0].health = InterfaceHealthInfo{health->state, "lab: " + health->reason, "", ""};
      }
      ductus::test::LoopThread::after(loop, 1, [done, list] { done(list); });
    });
  }

  // On the loop thread.
  uv_loop_t* loop = nullptr;
  EngineState state_ = EngineState::Serving;
  int64_t received = 10;
  int64_t pending = 3;
  int padding = 0;
  bool changeEveryQuery = false;
  std::optional<DestinationHealthInfo> health;  // nullopt: not judged
  std::atomic<int> queries{0};
};

// A client as a browser's EventSource is: one GET, then reading events.
class SseClient {
 public:
  SseClient(uint16_t port, const std::map<std::string, std::string>& headers,
            int receiveBuffer = 0) {
    fd_ = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (receiveBuffer > 0)
      setsockopt(fd_.get(), SOL_SOCKET, SO_RCVBUF, &receiveBuffer, sizeof receiveBuffer);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
    std::string req = "GET /api/v1/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n";
    for (auto& [k, v] : headers) req += k + ": " + v + "\r\n";
    req += "\r\n";
    sent_ =
        ::send(fd_.get(), req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  }

  // The response's head, lowercased; "" on timeout.
  std::string head(milliseconds timeout = milliseconds(5000)) {
    if (!readUntil("\r\n\r\n", timeout)) return {};
    headRead_ = true;
    size_t end = buf_.find("\r\n\r\n");
    std::string h = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return h;
  }
  // The next event or comment, up to its blank line; "" on timeout or EOF.
  // The head first, if nobody read it.
  std::string next(milliseconds timeout = milliseconds(5000)) {
    if (!headRead_ && head(timeout).empty()) return {};
    if (!readUntil("\n\n", timeout)) return {};
    size_t end = buf_.find("\n\n");
    std::string e = buf_.substr(0, end + 2);
    buf_.erase(0, end + 2);
    return e;
  }
  // The next event that is not a heartbeat.
  std::string nextEvent(milliseconds timeout = milliseconds(5000)) {
    auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto left =
          std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return {};
      std::string e = next(left);
      if (e.empty() || e[0] != ':') return e;
    }
  }
  bool closedByPeer(milliseconds timeout = milliseconds(5000)) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (!eof_)
      if (!fill(until)) return eof_;
    return true;
  }
  bool ok() const { return sent_; }

 private:
  bool readUntil(std::string_view needle, milliseconds timeout) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (buf_.find(needle) == std::string::npos)
      if (!fill(until)) return false;
    return true;
  }
  bool fill(std::chrono::steady_clock::time_point until) {
    auto left = std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now());
    pollfd p{fd_.get(), POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char b[65536];
    ssize_t n = ::recv(fd_.get(), b, sizeof b, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(b, static_cast<size_t>(n));
    return true;
  }

  Fd fd_;
  bool sent_ = false;
  bool eof_ = false;
  bool headRead_ = false;
  std::string buf_;
};

// An event's data, parsed; null unless it is a snapshot.
json snapshotOf(const std::string& event) {
  const std::string prefix = "event: snapshot\ndata: ";
  if (event.rfind(prefix, 0) != 0 || event.size() < prefix.size() + 2) return nullptr;
  std::string data = event.substr(prefix.size(), event.size() - prefix.size() - 2);
  if (data.find('\n') != std::string::npos) return nullptr;
  auto j = json::parse(data, nullptr, false);
  return j.is_discarded() ? json(nullptr) : j;
}

class EventsTest : public ::testing::Test {
 protected:
  void start(EventsOptions o) {
    engine_.loop = api_.loop().loop();
    hub_ = EventHub::make(&engine_, o);
    auto s = api_.start({eventsRoute(hub_)});
    ASSERT_TRUE(s) << s.error().message;
  }
  void TearDown() override {
    api_.stop();
    // The hub's timer is the loop's.
    api_.loop().run([&] { hub_.reset(); });
  }
  template <typename T, typename F>
  T onLoop(F f) {
    T out{};
    api_.loop().run([&] { out = f(); });
    return out;
  }
  size_t listeners() {
    return onLoop<size_t>([&] { return hub_->listeners(); });
  }
  bool counting() {
    return onLoop<bool>([&] { return hub_->counting(); });
  }

  static EventsOptions fast() {
    EventsOptions o;
    o.interval = milliseconds(20);
    return o;
  }

  FakeEngine engine_;
  ApiHarness api_;
  std::shared_ptr<EventHub> hub_;
};

TEST_F(EventsTest, NeedsAViewersTokenOrSession) {
  start(fast());
  auto r = api_.get("/api/v1/events");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(errorOf(r)["error"], "unauthenticated") << r.body;
  EXPECT_EQ(api_.get("/api/v1/events", bearer("wrong")).status, 401);
  EXPECT_EQ(listeners(), 0u);
  EXPECT_EQ(engine_.queries.load(), 0);
}

TEST_F(EventsTest, TheFirstSnapshotComesAtOnce) {
  start(fast());
  SseClient c(api_.port(), bearer("viewer"));
  ASSERT_TRUE(c.ok());
  std::string head = c.head();
  EXPECT_EQ(head.rfind("http/1.1 200 ok\r\n", 0), 0u) << head;
  EXPECT_THAT(head, ::testing::HasSubstr("content-type: text/event-stream\r\n"));
  EXPECT_THAT(head, ::testing::HasSubstr("cache-control: no-store\r\n"));
  EXPECT_THAT(head, ::testing::Not(::testing::HasSubstr("content-length")));
  json s = snapshotOf(c.nextEvent());
  ASSERT_TRUE(s.is_object()) << s;
  EXPECT_EQ(s["state"], "serving");
  EXPECT_EQ(s["workers"], json::parse(R"([{"group":"shared","slot":0,"pid":4242,
                                            "state":"running","restarts":2}])"));
  EXPECT_EQ(s["interfaces"],
            json::parse(R"([{"name":"adt","state":"running","gate":"open","intakeStopped":false,
      "received":10,"duplicates":0,"destinations":[{"name":"lab","sent":7,"filtered":0,
      "quarantined":1,"routed":0,"retries":0,"pending":3,"quarantinedNow":2,"paused":false}]}])"));
}

// A browser's EventSource can send no header of its own: its session
// cookie must do, and a GET needs no X-Ductus.
TEST_F(EventsTest, ABrowserSessionCookieIsEnough) {
  start(fast());
  SseClient c(api_.port(), {{"Cookie", "ductus_session=viewer"}});
  EXPECT_EQ(c.head().rfind("http/1.1 200 ok\r\n", 0), 0u);
  EXPECT_TRUE(snapshotOf(c.nextEvent()).is_object());
}

TEST_F(EventsTest, AChangeSendsAnEventAndNoChangeSendsNone) {
  start(fast());
  SseClient c(api_.port(), bearer("viewer"));
  ASSERT_FALSE(c.head().empty());
  ASSERT_EQ(snapshotOf(c.nextEvent())["interfaces"][0]["received"], 10);
  // Many intervals, the task counting all along, nothing changed: nothing sent.
  int before = engine_.queries.load();
  EXPECT_EQ(c.next(milliseconds(400)), "");
  EXPECT_GE(engine_.queries.load(), before + 3) << "the task stopped counting";
  api_.loop().run([&] { engine_.received = 11; });
  EXPECT_EQ(snapshotOf(c.nextEvent())["interfaces"][0]["received"], 11);
  api_.loop().run([&] { engine_.state_ = EngineState::Draining; });
  EXPECT_EQ(snapshotOf(c.nextEvent())["state"], "draining");
  EXPECT_EQ(c.next(milliseconds(200)), "");
}

// The monitor's judgement rides in the snapshot: a new state is an event;
// the oldest message's age, growing by itself, is not.
TEST_F(EventsTest, AHealthChangeSendsAnEventAndAnAgeGrowingSendsNone) {
  start(fast());
  SseClient c(api_.port(), bearer("viewer"));
  ASSERT_FALSE(c.head().empty());
  auto first = snapshotOf(c.nextEvent());
  EXPECT_FALSE(first["interfaces"][0].contains("health")) << "not judged yet";
  EXPECT_FALSE(first["interfaces"][0]["destinations"][0].contains("health"));
  DestinationHealthInfo h;
  h.state = "behind";
  h.reason = "3 waiting";
  h.waiting = 3;
  h.oldestSeconds = 700;
  h.etaSeconds = 30;
  h.catchingUp = true;
  api_.loop().run([&] { engine_.health = h; });
  auto s = snapshotOf(c.nextEvent());
  EXPECT_EQ(s["interfaces"][0]["health"]["state"], "behind");
  EXPECT_EQ(s["interfaces"][0]["health"]["reason"], "lab: 3 waiting");
  EXPECT_EQ(s["interfaces"][0]["destinations"][0]["health"],
            (json{{"state", "behind"}, {"reason", "3 waiting"}, {"waiting", 3},
                  {"quarantined", 0}, {"lastSent", ""}, {"lastError", ""},
                  {"lastErrorText", ""}, {"catchingUp", true}, {"causes", json::array()}}));
  api_.loop().run([&] {
    engine_.health->oldestSeconds = 900;
    engine_.health->etaSeconds = 20;
  });
  EXPECT_EQ(c.next(milliseconds(300)), "") << "an age moving by itself is no change";
  api_.loop().run([&] { engine_.health->state = "stalled"; });
  EXPECT_EQ(snapshotOf(c.nextEvent())["interfaces"][0]["destinations"][0]["health"]["state"],
            "stalled");
}

TEST_F(EventsTest, AQuietStreamGetsHeartbeats) {
  auto o = fast();
  o.heartbeat = milliseconds(150);
  start(o);
  SseClient c(api_.port(), bearer("viewer"));
  ASSERT_FALSE(c.head().empty());
  ASSERT_TRUE(snapshotOf(c.nextEvent()).is_object());
  EXPECT_EQ(c.next(), ": keep-alive\n\n");
  EXPECT_EQ(c.next(), ": keep-alive\n\n");
}

TEST_F(EventsTest, OneTaskCountsForEveryListenerAndOnlyWhileOneListens) {
  start(fast());
  EXPECT_FALSE(counting());
  {
    SseClient a(api_.port(), bearer("viewer"));
    ASSERT_TRUE(snapshotOf(a.nextEvent()).is_object());
    EXPECT_TRUE(counting());
    {
      SseClient b(api_.port(), bearer("viewer"));
      // The second listener gets the snapshot the task has, at once.
      ASSERT_TRUE(snapshotOf(b.nextEvent()).is_object());
      EXPECT_EQ(listeners(), 2u);
      // One query per interval for both: not two.
      int q0 = engine_.queries.load();
      auto t0 = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(milliseconds(400));
      auto ticks = (std::chrono::steady_clock::now() - t0) / milliseconds(20);
      EXPECT_LE(engine_.queries.load() - q0, ticks + 2);
      api_.loop().run([&] { engine_.received = 12; });
      EXPECT_EQ(snapshotOf(a.nextEvent())["interfaces"][0]["received"], 12);
      EXPECT_EQ(snapshotOf(b.nextEvent())["interfaces"][0]["received"], 12);
    }
    EXPECT_TRUE(eventually([&] { return listeners() == 1; }));
    EXPECT_TRUE(counting());
  }
  EXPECT_TRUE(eventually([&] { return listeners() == 0; }));
  EXPECT_FALSE(counting());
  // No query after the last listener has gone (one may have been out).
  std::this_thread::sleep_for(milliseconds(50));
  int stopped = engine_.queries.load();
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(engine_.queries.load(), stopped);

  // The next listener starts it again, with a snapshot made for it.
  api_.loop().run([&] { engine_.received = 13; });
  SseClient c(api_.port(), bearer("viewer"));
  EXPECT_EQ(snapshotOf(c.nextEvent())["interfaces"][0]["received"], 13);
  EXPECT_TRUE(counting());
}

TEST_F(EventsTest, PastTheLimitANewStreamIs503) {
  auto o = fast();
  o.maxStreams = 2;
  start(o);
  SseClient a(api_.port(), bearer("viewer"));
  SseClient b(api_.port(), bearer("viewer"));
  ASSERT_TRUE(snapshotOf(a.nextEvent()).is_object());
  ASSERT_TRUE(snapshotOf(b.nextEvent()).is_object());
  auto r = api_.get("/api/v1/events", bearer("viewer"));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(errorOf(r)["error"], "unavailable") << r.body;
  EXPECT_EQ(r.header("retry-after"), "5");
  EXPECT_EQ(listeners(), 2u);
}

TEST_F(EventsTest, TheDefaultLimitIs64Streams) { EXPECT_EQ(EventsOptions{}.maxStreams, 64u); }

// A client that never reads, while the snapshots change at every interval:
// dropped once it is maxUnread behind; a client that reads goes on.
TEST_F(EventsTest, AClientThatNeverReadsIsDroppedPastTheBound) {
  ductus::test::LogCapture log(spdlog::level::info);
  auto o = fast();
  o.interval = milliseconds(10);
  o.maxUnread = 64 * 1024;
  start(o);
  api_.loop().run([&] {
    engine_.padding = 150;
    engine_.changeEveryQuery = true;
  });
  SseClient reader(api_.port(), bearer("viewer"));
  ASSERT_FALSE(reader.head().empty());
  SseClient stuck(api_.port(), bearer("viewer"), 4096);
  ASSERT_TRUE(eventually([&] { return listeners() == 2; }));
  EXPECT_TRUE(eventually(
      [&] {
        while (!reader.next(milliseconds(2)).empty()) {
        }
        return listeners() == 1;
      },
      milliseconds(20000)));
  EXPECT_EQ(log.count("api: closing the stream to 127.0.0.1:"), 1u) << log.all();
  // The one that reads still gets every change.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(snapshotOf(reader.nextEvent()).is_object());
}

TEST_F(EventsTest, TheServersCloseEndsTheStreams) {
  start(fast());
  SseClient c(api_.port(), bearer("viewer"));
  ASSERT_TRUE(snapshotOf(c.nextEvent()).is_object());
  std::atomic<bool> closed{false};
  api_.loop().run([&] { api_.server().close([&] { closed = true; }); });
  EXPECT_TRUE(c.closedByPeer());
  EXPECT_TRUE(eventually([&] { return closed.load(); }));
  EXPECT_EQ(listeners(), 0u);
  EXPECT_FALSE(counting());
}

TEST_F(EventsTest, NoEngineAnswers503) {
  auto s = api_.start(eventsRoutes(nullptr));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(api_.get("/api/v1/events", bearer("viewer")).status, 503);
}

}  // namespace
}  // namespace ductus::api::test
