// systemd, played by the test (issue #21): a datagram socket of its own as
// NOTIFY_SOCKET hears READY, STOPPING and the listening sockets (FDSTORE,
// the descriptors attached), and the test hands those sockets back through
// LISTEN_FDS as systemd does after a crash: the connections that queued
// while no engine ran are answered, none refused.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "common/fd.h"
#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/exit_status.h"
#include "tests/support/mllp_client.h"
#include "tests/support/test_database.h"

namespace ductus::test {
namespace {

using namespace std::chrono_literals;

struct Notification {
  std::string text;
  std::vector<Fd> fds;
};

// systemd's end of NOTIFY_SOCKET: a datagram socket in the abstract
// namespace ("@name" in the variable), or at a path.
class NotifySocket {
 public:
  explicit NotifySocket(bool abstract) {
    static std::atomic<int> counter{0};
    std::string name =
        "ductus-notify-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
    fd_ = Fd(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    socklen_t len;
    if (abstract) {
      address_ = "@" + name;
      std::memcpy(a.sun_path + 1, name.data(), name.size());
      len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    } else {
      address_ = "/tmp/" + name;
      std::memcpy(a.sun_path, address_.data(), address_.size());
      len = sizeof a;
    }
    // systemd accepts fds on its socket only with SO_PASSCRED; harmless here.
    int one = 1;
    setsockopt(fd_.get(), SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
    EXPECT_EQ(bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), len), 0) << std::strerror(errno);
  }
  ~NotifySocket() {
    if (address_[0] == '/') unlink(address_.c_str());
  }
  const std::string& address() const { return address_; }

  // The next datagram, its descriptors received close-on-exec.
  std::optional<Notification> receive(std::chrono::milliseconds timeout) {
    pollfd p{fd_.get(), POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
    char buf[4096];
    alignas(cmsghdr) char control[CMSG_SPACE(16 * sizeof(int)) + CMSG_SPACE(sizeof(ucred))];
    iovec iov{buf, sizeof buf};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = recvmsg(fd_.get(), &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) return std::nullopt;
    Notification out;
    out.text.assign(buf, static_cast<size_t>(n));
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
          out.fds.emplace_back(fd);
        }
      }
    return out;
  }

  // Receives until a datagram holding `line` as one of its lines arrives
  // (kept, with every one before it, in `seen`); false when time is up.
  bool waitForLine(const std::string& line, std::vector<Notification>& seen,
                   std::chrono::milliseconds timeout = 60s) {
    auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      auto n = receive(left);
      if (!n) return false;
      bool found = hasLine(n->text, line);
      seen.push_back(std::move(*n));
      if (found) return true;
    }
  }

  static bool hasLine(const std::string& text, const std::string& line) {
    return ("\n" + text + "\n").find("\n" + line + "\n") != std::string::npos;
  }

 private:
  Fd fd_;
  std::string address_;
};

bool listeningOnPort(int fd, uint16_t port) {
  int accepting = 0;
  socklen_t len = sizeof accepting;
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting) return false;
  sockaddr_in a{};
  len = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return false;
  return a.sin_family == AF_INET && ntohs(a.sin_port) == port;
}

// The stored socket named `name` among the notifications (one fd each).
const Notification* stored(const std::vector<Notification>& seen, const std::string& name) {
  for (auto& n : seen)
    if (NotifySocket::hasLine(n.text, "FDSTORE=1") &&
        NotifySocket::hasLine(n.text, "FDNAME=" + name))
      return &n;
  return nullptr;
}

std::string mllpInterface(uint16_t port) {
  return "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(port) +
         " }\nformat: hl7v2\ndestination:\n  file: { path: out/ }\n";
}

// A socket bound and listening on 127.0.0.1:port, as systemd would hold it.
Fd listeningSocket(uint16_t port) {
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  EXPECT_EQ(bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  EXPECT_EQ(listen(fd.get(), 64), 0);
  return fd;
}

TEST(Systemd, ToldReadyAndStoppingAndGivenEveryListeningSocket) {
  TestDatabase db;
  NotifySocket systemd(/*abstract=*/true);
  uint16_t mllpPort = freePort(), httpPort = freePort(), apiPort = freePort();
  TempProject project({
      {"ductus.yaml", "api: { listen: 127.0.0.1:" + std::to_string(apiPort) +
                          " }\nisolates: { workers: 1, heap_mb: 256 }\n"},
      {"interfaces/adt/interface.yaml", mllpInterface(mllpPort)},
      {"interfaces/adt/transform.js", kPassThrough},
      {"interfaces/lab/interface.yaml",
       "source:\n  http: { listen: 127.0.0.1:" + std::to_string(httpPort) +
           ", path: /lab }\nformat: json\ndestination:\n  file: { path: out/ }\n  output: json\n"},
      {"interfaces/lab/transform.js", kPassThrough},
  });
  EngineProcess engine(project.root(), db.url());
  engine.setEnvironment({{"NOTIFY_SOCKET", systemd.address()}});
  ASSERT_TRUE(engine.start());

  std::vector<Notification> seen;
  ASSERT_TRUE(systemd.waitForLine("READY=1", seen)) << engine.log();
  // Stored before READY, so a crash right after it loses no socket.
  const std::string mllpName = "mllp-127.0.0.1-" + std::to_string(mllpPort);
  const std::string httpName = "http-127.0.0.1-" + std::to_string(httpPort);
  const Notification* mllp = stored(seen, mllpName);
  const Notification* http = stored(seen, httpName);
  ASSERT_TRUE(mllp) << "no FDSTORE for " << mllpName;
  ASSERT_TRUE(http) << "no FDSTORE for " << httpName;
  ASSERT_EQ(mllp->fds.size(), 1u);
  ASSERT_EQ(http->fds.size(), 1u);
  EXPECT_TRUE(listeningOnPort(mllp->fds[0].get(), mllpPort));
  EXPECT_TRUE(listeningOnPort(http->fds[0].get(), httpPort));
  // The API's too: a monitor's call during a restart waits, not refused.
  const std::string apiName = "api-127.0.0.1-" + std::to_string(apiPort);
  const Notification* api = stored(seen, apiName);
  ASSERT_TRUE(api) << "no FDSTORE for " << apiName;
  ASSERT_EQ(api->fds.size(), 1u);
  EXPECT_TRUE(listeningOnPort(api->fds[0].get(), apiPort));
  EXPECT_NE(seen.back().text.find("STATUS=started: 2 interface(s)"), std::string::npos)
      << seen.back().text;

  // A message goes through while we hold the copies: they are the same socket.
  auto c = MllpClient::connect("127.0.0.1", mllpPort);
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto ack = c->exchange(hl7("SD-1"), 10s);
  ASSERT_TRUE(ack.ok()) << ack.error().message;
  EXPECT_EQ(readAck(*ack).code, "AA");

  engine.signal(SIGTERM);
  std::vector<Notification> stopping;
  ASSERT_TRUE(systemd.waitForLine("STOPPING=1", stopping)) << engine.log();
  EXPECT_NE(stopping.back().text.find("STATUS=draining"), std::string::npos);
  int st = engine.wait(40s);
  EXPECT_TRUE(exitedWith(st, 0)) << engine.log();
}

TEST(Systemd, ACrashRefusesNoConnection) {
  TestDatabase db;
  NotifySocket systemd(/*abstract=*/false);
  uint16_t port = freePort();
  const std::string name = "mllp-127.0.0.1-" + std::to_string(port);
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/adt/interface.yaml", mllpInterface(port)},
      {"interfaces/adt/transform.js", kPassThrough},
  });
  EngineProcess engine(project.root(), db.url());
  engine.setEnvironment({{"NOTIFY_SOCKET", systemd.address()}});
  ASSERT_TRUE(engine.start());
  std::vector<Notification> seen;
  ASSERT_TRUE(systemd.waitForLine("READY=1", seen)) << engine.log();
  const Notification* kept = stored(seen, name);
  ASSERT_TRUE(kept && kept->fds.size() == 1) << "no FDSTORE for " << name;
  int socketFd = kept->fds[0].get();

  engine.kill9();
  // No engine runs: the socket the store holds still listens, so a sender
  // connects and its message waits in the kernel.
  auto c = MllpClient::connect("127.0.0.1", port, 2000ms);
  ASSERT_TRUE(c.ok()) << "refused while no engine ran: " << c.error().message;
  ASSERT_TRUE(c->send(hl7("QUEUED-1")).ok());

  engine.setListenFds({socketFd}, name);
  ASSERT_TRUE(engine.start());
  auto ack = c->readFrame(30s);
  ASSERT_TRUE(ack.ok()) << ack.error().message << "\n" << engine.log();
  EXPECT_EQ(readAck(*ack).code, "AA");
  EXPECT_EQ(readAck(*ack).controlId, "QUEUED-1");
  EXPECT_NE(engine.log().find("handed over: " + name), std::string::npos) << engine.log();
  // And stored again, for the next start.
  std::vector<Notification> again;
  ASSERT_TRUE(systemd.waitForLine("READY=1", again)) << engine.log();
  EXPECT_TRUE(stored(again, name));
  EXPECT_EQ(engine.terminate(), 0);
}

TEST(Systemd, ListensOnAnInheritedSocketInsteadOfBinding) {
  TestDatabase db;
  uint16_t port = freePort();
  Fd socket = listeningSocket(port);
  // Connected and sent before any engine exists.
  auto c = MllpClient::connect("127.0.0.1", port, 2000ms);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_TRUE(c->send(hl7("EARLY-1")).ok());
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/adt/interface.yaml", mllpInterface(port)},
      {"interfaces/adt/transform.js", kPassThrough},
  });
  EngineProcess engine(project.root(), db.url());
  // A second, unnamed-for-us socket: closed, as a listener the project dropped.
  Fd stale = listeningSocket(freePort());
  engine.setListenFds({socket.get(), stale.get()},
                      "mllp-127.0.0.1-" + std::to_string(port) + ":mllp-127.0.0.1-1");
  ASSERT_TRUE(engine.start());
  auto ack = c->readFrame(30s);
  ASSERT_TRUE(ack.ok()) << ack.error().message << "\n" << engine.log();
  EXPECT_EQ(readAck(*ack).code, "AA");
  EXPECT_EQ(readAck(*ack).controlId, "EARLY-1");
  EXPECT_NE(engine.log().find("mllp-127.0.0.1-1 has no listener any more"), std::string::npos)
      << engine.log();
  EXPECT_EQ(engine.terminate(), 0);
}

TEST(Systemd, AFailedStartRemovesTheStoredSockets) {
  TestDatabase db;
  NotifySocket systemd(/*abstract=*/true);
  uint16_t port = freePort();
  const std::string name = "mllp-127.0.0.1-" + std::to_string(port);
  Fd socket = listeningSocket(port);
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/adt/interface.yaml", mllpInterface(port)},
      {"interfaces/adt/transform.js", "export function transform(msg) { return msg }}\n"},
  });
  EngineProcess engine(project.root(), db.url());
  engine.setEnvironment({{"NOTIFY_SOCKET", systemd.address()}});
  engine.setListenFds({socket.get()}, name);
  ASSERT_TRUE(engine.spawn());
  std::vector<Notification> seen;
  ASSERT_TRUE(systemd.waitForLine("FDSTOREREMOVE=1", seen)) << engine.log();
  EXPECT_TRUE(NotifySocket::hasLine(seen.back().text, "FDNAME=" + name)) << seen.back().text;
  int st = engine.wait(60s);
  EXPECT_TRUE(exitedWith(st, 1)) << engine.log();
  for (auto& n : seen) EXPECT_FALSE(NotifySocket::hasLine(n.text, "READY=1"));
}

}  // namespace
}  // namespace ductus::test
