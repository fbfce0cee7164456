#include "common/net/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <netinet/tcp.h>
#include <spdlog/sinks/base_sink.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "common/fd.h"
#include "common/log.h"
#include "tests/support/log_capture.h"
#include "tests/support/loop_thread.h"

namespace ductus::net {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using test::LoopThread;

using test::LogCapture;
using test::eventually;

struct Reply {
  int status = 0;
  std::string head;  // status line and headers, lowercased
  std::string body;
};

// A blocking raw-socket HTTP client: the tests control every byte.
class RawClient {
 public:
  // receiveBuffer: set before connecting, so the window stays small and
  // the server's responses pile up in its own write queue after a few KB.
  // from: the source address (loopback takes any of 127/8), for the
  // per-address limit.
  explicit RawClient(uint16_t port, int receiveBuffer = 0, const char* from = nullptr) {
    fd_ = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (receiveBuffer > 0)
      setsockopt(fd_.get(), SOL_SOCKET, SO_RCVBUF, &receiveBuffer, sizeof receiveBuffer);
    if (from) {
      sockaddr_in src{};
      src.sin_family = AF_INET;
      inet_pton(AF_INET, from, &src.sin_addr);
      if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) return;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  bool connected() const { return connected_; }
  int fd() const { return fd_.get(); }
  bool send(std::string_view bytes) {
    return ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // One response (Content-Length framed); status 0 on timeout or EOF.
  Reply read(milliseconds timeout = milliseconds(5000)) {
    Reply r;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      size_t end = buf_.find("\r\n\r\n");
      if (end != std::string::npos) {
        std::string head = buf_.substr(0, end);
        for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        size_t len = 0;
        if (size_t p = head.find("content-length:"); p != std::string::npos)
          len = std::stoul(head.substr(p + 15));
        if (buf_.size() >= end + 4 + len) {
          r.status = std::stoi(head.substr(9, 3));
          r.head = head;
          r.body = buf_.substr(end + 4, len);
          buf_.erase(0, end + 4 + len);
          return r;
        }
      }
      if (!fill(deadline)) return r;
    }
  }
  // Reads until what was read holds `needle`; false on timeout or EOF.
  bool readUntil(std::string_view needle, milliseconds timeout = milliseconds(5000)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (buf_.find(needle) == std::string::npos)
      if (!fill(deadline)) return false;
    return true;
  }
  // Everything read and not yet taken by read().
  std::string take() { return std::exchange(buf_, {}); }
  bool closedByPeer(milliseconds timeout = milliseconds(3000)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd_.get(), POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char b[4096];
      ssize_t n = ::recv(fd_.get(), b, sizeof b, 0);
      if (n <= 0) return true;
      buf_.append(b, static_cast<size_t>(n));
    }
  }

 private:
  bool fill(std::chrono::steady_clock::time_point deadline) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd_.get(), POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char b[65536];
    ssize_t n = ::recv(fd_.get(), b, sizeof b, 0);
    if (n <= 0) return false;
    buf_.append(b, static_cast<size_t>(n));
    return true;
  }
  Fd fd_;
  bool connected_ = false;
  std::string buf_;
};

std::string post(std::string_view path, std::string_view body, std::string_view extra = "") {
  return "POST " + std::string(path) + " HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n" +
         std::string(extra) + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         std::string(body);
}

class HttpServerTest : public ::testing::Test {
 protected:
  void start(HttpSettings settings = {}) {
    loop_.run([&] {
      server_ = std::make_unique<HttpServer>(loop_.loop(), settings);
      auto s = server_->listen("127.0.0.1", 0);
      ASSERT_TRUE(s) << s.error().message;
      port_ = server_->port();
    });
  }
  void route(const std::string& path, HttpServer::Handler h, size_t maxBody = 0) {
    loop_.run([&] {
      auto s = server_->addRoute(path, std::move(h), maxBody);
      EXPECT_TRUE(s) << s.error().message;
    });
  }
  // A handler that echoes the request into the response body and counts.
  HttpServer::Handler echo(const std::string& tag) {
    return [this, tag](const HttpRequest& r, HttpRespond respond) {
      {
        std::lock_guard lock(mu_);
        requests_.push_back(r);
      }
      respond(HttpResponse{202, {{"X-Route", tag}}, tag + ":" + r.method + ":" + r.body});
    };
  }
  // A route whose every request is answered with a stream, kept in
  // streams_; ended_ counts the streams' onEnded.
  void streamRoute(const std::string& path, size_t maxUnread = size_t{1} << 20) {
    route(path, [this, maxUnread](const HttpRequest&, HttpRespond respond) {
      HttpStreamOptions o;
      o.maxUnread = maxUnread;
      o.onEnded = [this] { ++ended_; };
      streams_.push_back(respond.stream(
          HttpResponse{200, {{"Content-Type", "text/event-stream"}, {"Content-Length", "7"}}, ""},
          std::move(o)));
    });
  }
  size_t streamCount() {
    size_t n = 0;
    loop_.run([&] { n = streams_.size(); });
    return n;
  }
  // Writes to the latest stream on the loop; what write() said.
  bool streamWrite(const std::string& bytes) {
    bool ok = false;
    loop_.run([&] { ok = streams_.back().write(bytes); });
    return ok;
  }
  bool streamOpen() {
    bool open = false;
    loop_.run([&] { open = streams_.back().open(); });
    return open;
  }
  void TearDown() override {
    loop_.run([&] {
      server_.reset();
      streams_.clear();
    });
  }

  LoopThread loop_;
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
  std::mutex mu_;
  std::vector<HttpRequest> requests_;
  std::vector<HttpStream> streams_;  // on the loop thread
  std::atomic<int> ended_{0};
};

TEST_F(HttpServerTest, ThreeRequestsShareOneKeepAliveConnection) {
  start();
  route("/adt", echo("adt"));
  RawClient c(port_);
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.send(post("/adt", "body" + std::to_string(i))));
    Reply r = c.read();
    EXPECT_EQ(r.status, 202);
    EXPECT_EQ(r.body, "adt:POST:body" + std::to_string(i));
    EXPECT_NE(r.head.find("connection: keep-alive"), std::string::npos);
  }
  loop_.run([&] { EXPECT_EQ(server_->connectionCount(), 1u); });
}

TEST_F(HttpServerTest, RequestFieldsReachTheHandler) {
  start();
  route("/in", echo("in"));
  RawClient c(port_);
  ASSERT_TRUE(c.send(post("/in?a=1&b=two", "x", "X-Custom-Header: Value\r\n")));
  EXPECT_EQ(c.read().status, 202);
  std::lock_guard lock(mu_);
  ASSERT_EQ(requests_.size(), 1u);
  const HttpRequest& r = requests_[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/in");
  EXPECT_EQ(r.query, "a=1&b=two");
  EXPECT_EQ(r.header("x-custom-header").value_or(""), "Value");
  EXPECT_EQ(r.header("content-type").value_or(""), "text/plain");
  EXPECT_EQ(r.peer.rfind("127.0.0.1:", 0), 0u);
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredOneAtATimeInOrder) {
  start();
  std::atomic<int> inFlight{0}, maxInFlight{0};
  route("/slow", [&](const HttpRequest& r, HttpRespond respond) {
    maxInFlight = std::max(maxInFlight.load(), ++inFlight);
    std::string body = r.body;
    LoopThread::after(loop_.loop(), 50, [&, respond, body] {
      --inFlight;
      respond(HttpResponse{202, {}, body});
    });
  });
  RawClient c(port_);
  ASSERT_TRUE(c.send(post("/slow", "one") + post("/slow", "two") + post("/slow", "three")));
  EXPECT_EQ(c.read().body, "one");
  EXPECT_EQ(c.read().body, "two");
  EXPECT_EQ(c.read().body, "three");
  EXPECT_EQ(maxInFlight.load(), 1);
}

TEST_F(HttpServerTest, ABodyOverTheLimitIsAnswered413AndTheConnectionCloses) {
  HttpSettings s;
  s.maxBodyBytes = 100;
  start(s);
  route("/adt", echo("adt"));
  {
    RawClient c(port_);
    // Declared too large: refused before the body is sent.
    ASSERT_TRUE(c.send("POST /adt HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" +
                       std::string(200, 'x')));
    Reply r = c.read();
    EXPECT_EQ(r.status, 413);
    EXPECT_NE(r.head.find("connection: close"), std::string::npos);
    EXPECT_TRUE(c.closedByPeer());
  }
  {
    RawClient c(port_);
    // Chunked: only the chunks show it.
    std::string chunked = "POST /adt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 5; ++i) chunked += "20\r\n" + std::string(32, 'y') + "\r\n";
    chunked += "0\r\n\r\n";
    ASSERT_TRUE(c.send(chunked));
    EXPECT_EQ(c.read().status, 413);
    EXPECT_TRUE(c.closedByPeer());
  }
  std::lock_guard lock(mu_);
  EXPECT_TRUE(requests_.empty());
}

TEST_F(HttpServerTest, ARouteMayHaveItsOwnBodyLimit) {
  start();
  route("/small", echo("small"), 10);
  route("/big", echo("big"));
  RawClient c(port_);
  ASSERT_TRUE(c.send(post("/big", std::string(50, 'z'))));
  EXPECT_EQ(c.read().status, 202);
  RawClient d(port_);
  ASSERT_TRUE(d.send(post("/small", std::string(50, 'z'))));
  EXPECT_EQ(d.read().status, 413);
}

TEST_F(HttpServerTest, AnUnknownPathIs404AndTheConnectionStaysUsable) {
  start();
  route("/adt", echo("adt"));
  RawClient c(port_);
  ASSERT_TRUE(c.send(post("/nope", "lost")));
  EXPECT_EQ(c.read().status, 404);
  ASSERT_TRUE(c.send(post("/adt", "kept")));
  Reply r = c.read();
  EXPECT_EQ(r.status, 202);
  EXPECT_EQ(r.body, "adt:POST:kept");
}

TEST_F(HttpServerTest, AChunkedBodyIsDechunked) {
  start();
  route("/adt", echo("adt"));
  RawClient c(port_);
  std::string req =
      "POST /adt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n1;ext=1\r\n,\r\n6\r\n world\r\n0\r\n\r\n";
  // Byte by byte, so every parser state sees a split.
  for (char ch : req) ASSERT_TRUE(c.send(std::string(1, ch)));
  Reply r = c.read();
  EXPECT_EQ(r.status, 202);
  EXPECT_EQ(r.body, "adt:POST:hello, world");
}

TEST_F(HttpServerTest, TwoRoutesShareOnePort) {
  start();
  route("/a", echo("a"));
  route("/b", echo("b"));
  loop_.run([&] { EXPECT_FALSE(server_->addRoute("/a", echo("again"))); });
  RawClient c(port_);
  ASSERT_TRUE(c.send(post("/b", "1")));
  Reply rb = c.read();
  ASSERT_TRUE(c.send(post("/a", "2")));
  Reply ra = c.read();
  EXPECT_EQ(rb.body, "b:POST:1");
  EXPECT_EQ(ra.body, "a:POST:2");
  EXPECT_NE(ra.head.find("x-route: a"), std::string::npos);
}

TEST_F(HttpServerTest, APrefixRouteTakesEveryPathUnderItAndExactRoutesWin) {
  start();
  route("/api/v1/exact", echo("exact"));
  route("*", echo("any"));
  loop_.run([&] {
    EXPECT_TRUE(server_->addPrefixRoute("/api/", echo("api")));
    EXPECT_TRUE(server_->addPrefixRoute("/api/v2/", echo("v2")));
    EXPECT_FALSE(server_->addPrefixRoute("/api/", echo("again")));
    EXPECT_FALSE(server_->addPrefixRoute("api/", echo("relative")));
  });
  RawClient c(port_);
  auto tagOf = [&](std::string_view path) {
    EXPECT_TRUE(c.send(post(path, "")));
    Reply r = c.read();
    size_t colon = r.body.find(':');
    return colon == std::string::npos ? r.body : r.body.substr(0, colon);
  };
  EXPECT_EQ(tagOf("/api/v1/interfaces/adt"), "api");
  EXPECT_EQ(tagOf("/api/v1/exact"), "exact");
  EXPECT_EQ(tagOf("/api/v2/x"), "v2") << "the longer prefix wins";
  EXPECT_EQ(tagOf("/api"), "any") << "the prefix is matched whole, slash included";
  EXPECT_EQ(tagOf("/other"), "any");
  loop_.run([&] { server_->removeRoute("/api/"); });
  EXPECT_EQ(tagOf("/api/v1/interfaces/adt"), "any");
}

TEST_F(HttpServerTest, ConnectionCloseIsHonoured) {
  start();
  route("/adt", echo("adt"));
  RawClient c(port_);
  ASSERT_TRUE(c.send(post("/adt", "bye", "Connection: close\r\n")));
  Reply r = c.read();
  EXPECT_EQ(r.status, 202);
  EXPECT_NE(r.head.find("connection: close"), std::string::npos);
  EXPECT_TRUE(c.closedByPeer());
}

TEST_F(HttpServerTest, AClientThatHalfClosesAfterItsRequestStillGetsTheResponse) {
  start();
  route("/later", [&](const HttpRequest& r, HttpRespond respond) {
    std::string body = r.body;
    LoopThread::after(loop_.loop(), 50, [respond, body] { respond(HttpResponse{202, {}, body}); });
  });
  RawClient c(port_);
  ASSERT_TRUE(c.send(post("/later", "half")));
  ASSERT_EQ(::shutdown(c.fd(), SHUT_WR), 0);
  Reply r = c.read();
  EXPECT_EQ(r.status, 202);
  EXPECT_EQ(r.body, "half");
  EXPECT_TRUE(c.closedByPeer());
  for (int i = 0; i < 100; ++i) {
    size_t open = 1;
    loop_.run([&] { open = server_->connectionCount(); });
    if (open == 0) break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  loop_.run([&] { EXPECT_EQ(server_->connectionCount(), 0u); });
}

TEST_F(HttpServerTest, AHeadOverTheLimitIsAnswered431) {
  HttpSettings s;
  s.maxHeaderBytes = 1024;
  start(s);
  route("/adt", echo("adt"));
  RawClient c(port_);
  ASSERT_TRUE(c.send(post("/adt", "x", "X-Big: " + std::string(4000, 'h') + "\r\n")));
  EXPECT_EQ(c.read().status, 431);
  EXPECT_TRUE(c.closedByPeer());
}

TEST_F(HttpServerTest, MalformedHttpIsAnswered400) {
  start();
  route("/adt", echo("adt"));
  RawClient c(port_);
  ASSERT_TRUE(c.send("THIS IS NOT HTTP\r\n\r\n"));
  EXPECT_EQ(c.read().status, 400);
  EXPECT_TRUE(c.closedByPeer());
}

TEST_F(HttpServerTest, ChunkExtensionsAreCountedAgainstTheHeadLimitAndRefusedPastIt) {
  // CVE-2024-22019: llhttp reads chunk extensions without a bound of its
  // own, so a client could keep a connection busy forever with one chunk
  // header. They count as head bytes: past maxHeaderBytes, 431 and close.
  HttpSettings s;
  s.maxHeaderBytes = 2048;
  start(s);
  route("/adt", echo("adt"));
  RawClient c(port_);
  std::string req = "POST /adt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;";
  ASSERT_TRUE(c.send(req));
  bool refused = false;
  for (int i = 0; i < 64 && !refused; ++i) {
    // 64 x 1 KB of one extension: the server answers and closes long before.
    if (!c.send("a" + std::string(1023, 'b'))) refused = true;
  }
  Reply r = c.read();
  EXPECT_EQ(r.status, 431);
  EXPECT_TRUE(c.closedByPeer());
  std::lock_guard lock(mu_);
  EXPECT_TRUE(requests_.empty());
}

TEST_F(HttpServerTest, AHeaderNameThatIsNotATokenIsRefused) {
  // CVE-2024-27982: a space before a header's name let llhttp read it as
  // Content-Length where a proxy in front read something else (request
  // smuggling). Any header name that is not an RFC 9110 token is 400.
  start();
  route("/adt", echo("adt"));
  for (std::string head : {std::string("POST /adt HTTP/1.1\r\n Content-Length: 5\r\nHost: x\r\n"),
                           std::string("POST /adt HTTP/1.1\r\nHost: x\r\nContent-Length : 5\r\n"),
                           std::string("POST /adt HTTP/1.1\r\nHost: x\r\nX\x01Y: 1\r\nContent-Length: 5\r\n")}) {
    RawClient c(port_);
    ASSERT_TRUE(c.send(head + "\r\nhello"));
    Reply r = c.read();
    EXPECT_EQ(r.status, 400) << head;
    EXPECT_TRUE(c.closedByPeer()) << head;
  }
  std::lock_guard lock(mu_);
  EXPECT_TRUE(requests_.empty());
}

TEST_F(HttpServerTest, AResponseGivenLaterArrivesOnlyThenAndADroppedOneIs500) {
  start();
  std::vector<HttpRespond> held;
  route("/later", [&](const HttpRequest&, HttpRespond r) { held.push_back(std::move(r)); });
  route("/drop", [](const HttpRequest&, HttpRespond) {});
  RawClient c(port_);
  ASSERT_TRUE(c.send(post("/later", "x")));
  EXPECT_EQ(c.read(milliseconds(200)).status, 0) << "a response arrived before respond()";
  loop_.run([&] {
    ASSERT_EQ(held.size(), 1u);
    held[0](HttpResponse{503, {{"Retry-After", "5"}}, "draining"});
    held[0](HttpResponse{200, {}, "second call ignored"});
  });
  Reply r = c.read();
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.head.find("retry-after: 5"), std::string::npos);
  ASSERT_TRUE(c.send(post("/drop", "x")));
  EXPECT_EQ(c.read().status, 500);
  loop_.run([&] { held.clear(); });
}

TEST_F(HttpServerTest, Expect100ContinueIsAnsweredBeforeTheBody) {
  start();
  route("/adt", echo("adt"));
  RawClient c(port_);
  ASSERT_TRUE(c.send("POST /adt HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"));
  Reply cont = c.read();
  EXPECT_EQ(cont.status, 100);
  ASSERT_TRUE(c.send("data"));
  EXPECT_EQ(c.read().body, "adt:POST:data");
}

TEST_F(HttpServerTest, CloseWaitsForTheResponseInFlight) {
  start();
  std::vector<HttpRespond> held;
  route("/later", [&](const HttpRequest&, HttpRespond r) { held.push_back(std::move(r)); });
  RawClient busy(port_), idle(port_);
  ASSERT_TRUE(busy.send(post("/later", "x")));
  for (int i = 0; i < 100; ++i) {
    bool got = false;
    loop_.run([&] { got = !held.empty(); });
    if (got) break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  std::atomic<bool> closed{false};
  loop_.run([&] { server_->close([&] { closed = true; }); });
  EXPECT_TRUE(idle.closedByPeer());
  EXPECT_FALSE(closed.load());
  loop_.run([&] { held.at(0)(HttpResponse{202, {}, "done"}); });
  Reply r = busy.read();
  EXPECT_EQ(r.status, 202);
  EXPECT_NE(r.head.find("connection: close"), std::string::npos);
  EXPECT_TRUE(busy.closedByPeer());
  for (int i = 0; i < 200 && !closed; ++i) std::this_thread::sleep_for(milliseconds(5));
  EXPECT_TRUE(closed.load());
  loop_.run([&] { held.clear(); });
}

// ---- limits: what one client may hold ----

TEST_F(HttpServerTest, PastTheConnectionLimitANewConnectionGets503AndIsClosed) {
  LogCapture log(spdlog::level::info);
  HttpSettings s;
  s.limits.maxConnections = 1;
  start(s);
  route("/adt", echo("adt"));
  RawClient first(port_);
  ASSERT_TRUE(first.send(post("/adt", "1")));
  EXPECT_EQ(first.read().status, 202);
  for (int i = 0; i < 3; ++i) {
    RawClient refused(port_);
    ASSERT_TRUE(refused.connected());
    Reply r = refused.read();
    EXPECT_EQ(r.status, 503) << i;
    EXPECT_NE(r.head.find("connection: close"), std::string::npos) << r.head;
    EXPECT_TRUE(refused.closedByPeer()) << i;
  }
  EXPECT_EQ(log.count("refused a connection from 127.0.0.1:"), 1u) << log.all();
  // The one admitted still works.
  ASSERT_TRUE(first.send(post("/adt", "2")));
  EXPECT_EQ(first.read().status, 202);
  loop_.run([&] { EXPECT_EQ(server_->connectionCount(), 1u); });
}

TEST_F(HttpServerTest, OneAddressGetsAtMostItsShareOfTheConnections) {
  LogCapture log(spdlog::level::info);
  HttpSettings s;
  s.limits.maxConnections = 10;
  s.limits.connectionsPerAddress = 2;
  start(s);
  route("/adt", echo("adt"));
  std::vector<std::unique_ptr<RawClient>> mine;
  for (int i = 0; i < 2; ++i) {
    mine.push_back(std::make_unique<RawClient>(port_, 0, "127.0.0.2"));
    ASSERT_TRUE(mine.back()->send(post("/adt", "x")));
    ASSERT_EQ(mine.back()->read().status, 202) << i;
  }
  // The third from the same address is refused, though the listener has
  // room; another address is not.
  RawClient third(port_, 0, "127.0.0.2");
  ASSERT_TRUE(third.connected());
  Reply r = third.read();
  EXPECT_EQ(r.status, 503);
  EXPECT_TRUE(third.closedByPeer());
  RawClient other(port_, 0, "127.0.0.3");
  ASSERT_TRUE(other.send(post("/adt", "y")));
  EXPECT_EQ(other.read().status, 202);
  EXPECT_EQ(log.count("refused a connection from 127.0.0.2:"), 1u) << log.all();
  EXPECT_EQ(log.count("limits.connections_per_address"), 1u) << log.all();
  // Those admitted still work, and one leaving frees a place for its address.
  ASSERT_TRUE(mine[0]->send(post("/adt", "z")));
  EXPECT_EQ(mine[0]->read().status, 202);
  mine.pop_back();
  ASSERT_TRUE(eventually([&] {
    size_t n = 0;
    loop_.run([&] { n = server_->connectionCount(); });
    return n == 2;
  }));
  RawClient again(port_, 0, "127.0.0.2");
  ASSERT_TRUE(again.send(post("/adt", "w")));
  EXPECT_EQ(again.read().status, 202);
}

TEST_F(HttpServerTest, AFullListenerClosesTheLongestIdleConnectionForANewOne) {
  LogCapture log(spdlog::level::info);
  HttpSettings s;
  s.limits.maxConnections = 4;
  s.limits.evictableAfter = milliseconds(500);
  start(s);
  route("/adt", echo("adt"));
  std::vector<HttpRespond> held;  // on the loop thread
  route("/hold", [&](const HttpRequest&, HttpRespond respond) { held.push_back(respond); });
  // A request in flight, a partial one, and two idle connections, the
  // first idle longer.
  RawClient busy(port_, 0, "127.0.0.2");
  ASSERT_TRUE(busy.send(post("/hold", "x")));
  ASSERT_TRUE(eventually([&] {
    size_t n = 0;
    loop_.run([&] { n = held.size(); });
    return n == 1;
  }));
  RawClient partial(port_, 0, "127.0.0.3");
  ASSERT_TRUE(partial.send("POST /adt HTTP/1.1\r\nHost: x\r\nContent-Len"));
  RawClient older(port_, 0, "127.0.0.4");
  ASSERT_TRUE(older.send(post("/adt", "o")));
  ASSERT_EQ(older.read().status, 202);
  std::this_thread::sleep_for(milliseconds(150));
  RawClient newer(port_, 0, "127.0.0.5");
  ASSERT_TRUE(newer.send(post("/adt", "n")));
  ASSERT_EQ(newer.read().status, 202);
  std::this_thread::sleep_for(milliseconds(600));  // both idle past evictableAfter
  // Full: the one idle the longest gives way, and the new one is served.
  RawClient first(port_, 0, "127.0.0.6");
  ASSERT_TRUE(first.send(post("/adt", "f")));
  EXPECT_EQ(first.read().status, 202);
  EXPECT_TRUE(older.closedByPeer());
  EXPECT_EQ(log.count("closed the connection from 127.0.0.4:"), 1u) << log.all();
  // The next gives way for another (first has not been idle long enough).
  std::this_thread::sleep_for(milliseconds(150));
  RawClient second(port_, 0, "127.0.0.7");
  ASSERT_TRUE(second.send(post("/adt", "s")));
  EXPECT_EQ(second.read().status, 202);
  EXPECT_TRUE(newer.closedByPeer());
  // Nobody idle long enough: refused; the request in flight and the
  // partial one were never candidates.
  RawClient refused(port_, 0, "127.0.0.8");
  ASSERT_TRUE(refused.connected());
  EXPECT_EQ(refused.read().status, 503);
  EXPECT_TRUE(refused.closedByPeer());
  std::this_thread::sleep_for(milliseconds(600));  // first and second idle now
  RawClient third(port_, 0, "127.0.0.9");
  ASSERT_TRUE(third.send(post("/adt", "t")));
  EXPECT_EQ(third.read().status, 202);
  EXPECT_TRUE(first.closedByPeer());
  loop_.run([&] { held.at(0)(HttpResponse{202, {}, "done"}); });
  EXPECT_EQ(busy.read().status, 202);
  ASSERT_TRUE(partial.send("gth: 1\r\n\r\np"));
  EXPECT_EQ(partial.read().status, 202);
  loop_.run([&] { held.clear(); });
}

TEST(HostOf, CountsAnIpv4MappedAddressAsItsIpv4One) {
  sockaddr_storage ss{};
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(2575);
  ASSERT_EQ(inet_pton(AF_INET6, "::ffff:10.1.2.3", &in6->sin6_addr), 1);
  EXPECT_EQ(hostOf(ss), "10.1.2.3");
  ASSERT_EQ(inet_pton(AF_INET6, "2001:db8::1", &in6->sin6_addr), 1);
  EXPECT_EQ(hostOf(ss), "2001:db8::1");
  sockaddr_storage v4{};
  auto* in = reinterpret_cast<sockaddr_in*>(&v4);
  in->sin_family = AF_INET;
  in->sin_port = htons(2575);
  ASSERT_EQ(inet_pton(AF_INET, "10.1.2.3", &in->sin_addr), 1);
  EXPECT_EQ(hostOf(v4), "10.1.2.3");
  sockaddr_storage none{};
  EXPECT_EQ(hostOf(none), "");
}

TEST_F(HttpServerTest, AnIdleKeepAliveConnectionIsClosedAfterTheIdleTimeout) {
  HttpSettings s;
  s.limits.idleTimeout = milliseconds(300);
  start(s);
  route("/adt", echo("adt"));
  route("/slow", [&](const HttpRequest&, HttpRespond r) {
    LoopThread::after(loop_.loop(), 900, [r] { r(HttpResponse{202, {}, "late"}); });
  });
  RawClient c(port_);
  ASSERT_TRUE(c.send(post("/adt", "x")));
  EXPECT_EQ(c.read().status, 202);
  auto t0 = steady_clock::now();
  EXPECT_TRUE(c.closedByPeer()) << "an idle keep-alive connection stays open";
  EXPECT_GE(steady_clock::now() - t0, milliseconds(200));
  // A response in flight for three idle timeouts: not idle.
  RawClient busy(port_);
  ASSERT_TRUE(busy.send(post("/slow", "x")));
  Reply r = busy.read();
  EXPECT_EQ(r.status, 202);
  EXPECT_EQ(r.body, "late");
}

TEST_F(HttpServerTest, ARequestNotCompleteWithinTheDeadlineIsAnswered408AndClosed) {
  LogCapture log(spdlog::level::info);
  HttpSettings s;
  s.limits.frameDeadline = milliseconds(400);
  start(s);
  route("/adt", echo("adt"));
  // A body promised and never finished, trickled a byte every 50 ms.
  RawClient c(port_);
  ASSERT_TRUE(c.send("POST /adt HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc"));
  auto t0 = steady_clock::now();
  Reply r;
  for (int i = 0; i < 60 && r.status == 0; ++i) {
    (void)c.send("y");
    r = c.read(milliseconds(50));
  }
  EXPECT_EQ(r.status, 408);
  EXPECT_GE(steady_clock::now() - t0, milliseconds(300));
  EXPECT_NE(r.head.find("connection: close"), std::string::npos) << r.head;
  EXPECT_TRUE(c.closedByPeer());
  EXPECT_EQ(log.count("http: 408 from"), 1u) << log.all();
  std::lock_guard lock(mu_);
  EXPECT_TRUE(requests_.empty());
}

TEST_F(HttpServerTest, EveryAcceptedConnectionHasTcpKeepalive) {
  start();
  route("/adt", echo("adt"));
  RawClient c(port_);
  ASSERT_TRUE(c.send(post("/adt", "x")));
  ASSERT_EQ(c.read().status, 202);  // accepted and running on the loop
  sockaddr_in mine{};
  socklen_t len = sizeof mine;
  getsockname(c.fd(), reinterpret_cast<sockaddr*>(&mine), &len);
  // The server's end is in this process: the socket whose peer is us.
  int on = -1, idle = -1, interval = -1, probes = -1;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = std::atoi(e.path().filename().c_str());
    sockaddr_in peer{};
    len = sizeof peer;
    if (fd == c.fd() || getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0 ||
        peer.sin_family != AF_INET || peer.sin_port != mine.sin_port)
      continue;
    socklen_t n = sizeof(int);
    getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, &n);
    getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, &n);
    getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, &n);
    getsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, &n);
  }
  EXPECT_EQ(on, 1);
  EXPECT_EQ(idle, 15);
  EXPECT_EQ(interval, 5);
  EXPECT_EQ(probes, 3);
}

// A client that pipelines requests and never reads a response: without a
// bound the responses pile up in the write queue as fast as it sends.
TEST_F(HttpServerTest, AClientThatPipelinesAndNeverReadsIsHeldBackThenClosed) {
  LogCapture log(spdlog::level::info);
  HttpSettings s;
  s.limits.unreadAnswers = 64 * 1024;
  s.limits.unreadGrace = milliseconds(3000);
  start(s);
  route("/adt", echo("adt"));
  RawClient c(port_, 4096);
  ASSERT_TRUE(c.connected());
  // 27 bytes in, a ~100-byte 404 out.
  std::string chunk;
  while (chunk.size() < 64 * 1024) chunk += "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n";
  size_t sent = 0;
  bool heldBack = false;
  while (sent < (size_t{32} << 20)) {
    ssize_t n = ::send(c.fd(), chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
    pollfd p{c.fd(), POLLOUT, 0};
    if (::poll(&p, 1, 1000) == 0) {
      heldBack = true;
      break;
    }
  }
  EXPECT_TRUE(heldBack) << "still reading after " << sent << " bytes";
  EXPECT_LT(sent, size_t{16} << 20);
  // Over the limit past the 3 s grace: closed (waited for up to 20 s).
  EXPECT_TRUE(eventually(
      [&] {
        size_t n = 1;
        loop_.run([&] { n = server_->connectionCount(); });
        return n == 0;
      },
      milliseconds(20000)));
  EXPECT_EQ(log.count("answers unread for"), 1u) << log.all();
}

}  // namespace
}  // namespace ductus::net

namespace ductus::net {
namespace {

// ---- streamed answers (HttpStream) ----

const std::string kGetEvents = "GET /events HTTP/1.1\r\nHost: x\r\n\r\n";

TEST_F(HttpServerTest, AStreamSendsItsHeadAtOnceThenEachWriteAsItComes) {
  start();
  streamRoute("/events");
  RawClient c(port_);
  ASSERT_TRUE(c.send(kGetEvents));
  ASSERT_TRUE(c.readUntil("\r\n\r\n"));
  std::string head = c.take();
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Type: text/event-stream\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("Connection: close\r\n"), std::string::npos) << head;
  // The body ends with the connection: no length, not even the handler's.
  EXPECT_EQ(head.find("Content-Length"), std::string::npos) << head;
  EXPECT_TRUE(streamWrite("data: one\n\n"));
  ASSERT_TRUE(c.readUntil("data: one\n\n"));
  EXPECT_EQ(c.take(), "data: one\n\n");
  EXPECT_FALSE(c.readUntil("x", milliseconds(100))) << "bytes nobody wrote";
  EXPECT_TRUE(streamWrite("data: two\n\n"));
  ASSERT_TRUE(c.readUntil("data: two\n\n"));
  EXPECT_EQ(ended_.load(), 0);
  loop_.run([&] { streams_.back().end(); });
  EXPECT_TRUE(c.closedByPeer());
  EXPECT_TRUE(eventually([&] { return ended_.load() == 1; }));
  EXPECT_FALSE(streamOpen());
  EXPECT_FALSE(streamWrite("data: late\n\n"));
  loop_.run([&] { EXPECT_EQ(server_->connectionCount(), 0u); });
}

TEST_F(HttpServerTest, TheIdleTimeoutDoesNotEndAStream) {
  HttpSettings s;
  s.limits.idleTimeout = milliseconds(200);
  start(s);
  streamRoute("/events");
  RawClient c(port_);
  ASSERT_TRUE(c.send(kGetEvents));
  ASSERT_TRUE(c.readUntil("\r\n\r\n"));
  // Four idle timeouts without a byte either way.
  EXPECT_FALSE(c.closedByPeer(milliseconds(800))) << "the idle timeout ended a stream";
  EXPECT_TRUE(streamOpen());
  EXPECT_TRUE(streamWrite("data: still here\n\n"));
  EXPECT_TRUE(c.readUntil("data: still here\n\n"));
  EXPECT_EQ(ended_.load(), 0);
}

TEST_F(HttpServerTest, AClientThatLeavesEndsItsStreamAtOnce) {
  start();
  streamRoute("/events");
  {
    RawClient c(port_);
    ASSERT_TRUE(c.send(kGetEvents));
    ASSERT_TRUE(c.readUntil("\r\n\r\n"));
    c.take();
    // What it sends after the request is no request: dropped.
    ASSERT_TRUE(c.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_TRUE(streamWrite("data: one\n\n"));
    ASSERT_TRUE(c.readUntil("data: one\n\n"));
    EXPECT_EQ(c.take().find("HTTP/1.1"), std::string::npos);
  }
  // Seen by its end of input, without a write to fail first.
  EXPECT_TRUE(eventually([&] { return ended_.load() == 1; }));
  EXPECT_EQ(streamCount(), 1u);
  EXPECT_FALSE(streamOpen());
  EXPECT_FALSE(streamWrite("data: nobody\n\n"));
}

TEST_F(HttpServerTest, DroppingEveryCopyOfAStreamEndsIt) {
  start();
  streamRoute("/events");
  RawClient c(port_);
  ASSERT_TRUE(c.send(kGetEvents));
  ASSERT_TRUE(c.readUntil("\r\n\r\n"));
  ASSERT_TRUE(streamWrite("data: last\n\n"));
  loop_.run([&] { streams_.clear(); });
  EXPECT_TRUE(c.readUntil("data: last\n\n"));
  EXPECT_TRUE(c.closedByPeer());
  // Its onEnded went with the copies: nobody is told.
  EXPECT_EQ(ended_.load(), 0);
}

TEST_F(HttpServerTest, AHeadRequestForAStreamGetsTheHeadAloneAndALaterAnswerIsIgnored) {
  start();
  streamRoute("/events");
  RawClient c(port_);
  ASSERT_TRUE(c.send("HEAD /events HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(c.readUntil("\r\n\r\n"));
  EXPECT_EQ(c.take().rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_TRUE(c.closedByPeer());
  EXPECT_FALSE(streamOpen());

  // A stream after the response: not open, and the response stands.
  route("/answered", [this](const HttpRequest&, HttpRespond respond) {
    respond(HttpResponse{202, {}, "done"});
    streams_.push_back(respond.stream(HttpResponse{200, {}, ""}));
  });
  RawClient d(port_);
  ASSERT_TRUE(d.send("GET /answered HTTP/1.1\r\nHost: x\r\n\r\n"));
  Reply r = d.read();
  EXPECT_EQ(r.status, 202);
  EXPECT_EQ(r.body, "done");
  EXPECT_FALSE(streamOpen());
  ASSERT_TRUE(d.send("GET /answered HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(d.read().status, 202) << "the connection stays usable";
}

TEST_F(HttpServerTest, CloseEndsStreamsAfterWhatIsQueued) {
  start();
  streamRoute("/events");
  RawClient a(port_), b(port_);
  ASSERT_TRUE(a.send(kGetEvents));
  ASSERT_TRUE(b.send(kGetEvents));
  ASSERT_TRUE(eventually([&] { return streamCount() == 2; }));
  std::atomic<bool> closed{false};
  loop_.run([&] {
    for (auto& s : streams_) s.write("data: bye\n\n");
    server_->close([&] { closed = true; });
  });
  for (RawClient* c : {&a, &b}) {
    EXPECT_TRUE(c->readUntil("data: bye\n\n"));
    EXPECT_TRUE(c->closedByPeer());
  }
  EXPECT_TRUE(eventually([&] { return closed.load(); }));
  EXPECT_EQ(ended_.load(), 2);
}

// A stream writes when it has something to say: a client that never reads
// would otherwise have the engine hold everything said since.
TEST_F(HttpServerTest, AStreamWhoseClientNeverReadsIsDroppedPastItsBound) {
  LogCapture log(spdlog::level::info);
  start();
  streamRoute("/events", 64 * 1024);
  RawClient c(port_, 4096);
  ASSERT_TRUE(c.send(kGetEvents));
  ASSERT_TRUE(eventually([&] { return streamCount() == 1; }));
  const std::string event = "data: " + std::string(16 * 1024, 'x') + "\n\n";
  size_t written = 0;
  bool dropped = false;
  // The kernel's buffers take a few MB first.
  while (written < (size_t{64} << 20) && !dropped) {
    loop_.run([&] {
      for (int i = 0; i < 64 && !dropped; ++i) {
        if (streams_.back().write(event))
          written += event.size();
        else
          dropped = true;
      }
    });
  }
  EXPECT_TRUE(dropped) << "still writing after " << written << " bytes";
  EXPECT_LT(written, size_t{32} << 20);
  EXPECT_TRUE(eventually([&] { return ended_.load() == 1; }));
  EXPECT_EQ(log.count("closing the stream to 127.0.0.1:"), 1u) << log.all();
  loop_.run([&] { EXPECT_EQ(server_->connectionCount(), 0u); });
}

}  // namespace
}  // namespace ductus::net

namespace ductus::net {
namespace {

// ductusctl's requests reach the API's handlers without a connection: the
// answer goes to a function, once, and an answer never given is a 500.
TEST(HttpRespondTo, TheFirstAnswerGoesToTheFunctionOnceAndNoneIsA500) {
  std::vector<int> got;
  {
    auto respond = HttpRespond::to([&](HttpResponse r) { got.push_back(r.status); });
    EXPECT_FALSE(respond.responded());
    HttpRespond copy = respond;
    copy(HttpResponse{204, {}, ""});
    EXPECT_TRUE(respond.responded());
    respond(HttpResponse{200, {}, "late"});
    EXPECT_FALSE(respond.stream(HttpResponse{200, {}, ""}).open());
  }
  EXPECT_EQ(got, std::vector<int>{204});
  { auto dropped = HttpRespond::to([&](HttpResponse r) { got.push_back(r.status); }); }
  EXPECT_EQ(got, (std::vector<int>{204, 500}));
  auto streamed = HttpRespond::to([&](HttpResponse r) { got.push_back(r.status); });
  EXPECT_FALSE(streamed.stream(HttpResponse{200, {}, ""}).open()) << "no connection to stream on";
  EXPECT_EQ(got, (std::vector<int>{204, 500, 200}));
}

}  // namespace
}  // namespace ductus::net
