// Soak: one real engine under what a careless or hostile network does to a
// listener at once (limits: in ductus.yaml, intake/stream_connection.h):
// 2,000 connections that connect and say nothing, 50 peers that send frames
// without MSH as fast as TCP lets them and never read their ARs, and four
// honest MLLP senders streaming messages through it all. The honest senders
// must get every ACK, AA; the supervisor's memory must stay bounded; the
// engine must be alive and answering afterwards.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/fd.h"
#include "common/sanitizers.h"
#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
#include "tests/support/test_database.h"

namespace ductus::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kIdle = 2000;
constexpr int kGarbage = 50;
constexpr int kHonest = 4;
constexpr auto kTraffic = 20s;

// The supervisor's resident memory (VmRSS), measured with this test on 2
// vCPUs: ~32 MB at start and ~90 MB at most in Release (the 2,000 idle
// connections cost ~2 MB: no read buffer each; each garbage peer holds at
// most ~1 MB of frames read but not yet answered while its ARs are paced);
// ~188 MB at start and ~690 MB at most in the ASan build (shadow memory and
// ASan's 256 MB quarantine of freed blocks). The bounds are about twice
// that. Without the limits the Release supervisor passed 800 MB within the
// 20 s, growing with every AR the garbage peers left unread.
#if DUCTUS_ASAN
constexpr long kRssBoundKb = 1400 * 1024;
#else
constexpr long kRssBoundKb = 180 * 1024;
#endif

// VmRSS of a process in kB; -1 when it is gone.
long vmRssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

size_t openFiles(pid_t pid) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

bool running(pid_t pid) {
  int st;
  return pid > 0 && waitpid(pid, &st, WNOHANG) == 0;
}

// A connection to 127.0.0.1:port; blocking, or not; from `from` when set
// (loopback takes any source in 127/8: one address per kind of peer).
Fd connectTo(uint16_t port, bool nonBlocking, const char* from = nullptr) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return fd;
  if (from) {
    sockaddr_in src{};
    src.sin_family = AF_INET;
    inet_pton(AF_INET, from, &src.sin_addr);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) return Fd();
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return Fd();
  if (nonBlocking) {
    int one = 1;
    ioctl(fd.get(), FIONBIO, &one);
  }
  return fd;
}

// The test holds ~2,100 sockets; a soft limit of 1,024 would refuse them.
void raiseOwnOpenFiles() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
}

// 50 peers on one thread: each sends frames without MSH whenever its socket
// takes bytes, never reads, and connects again when the engine closes it.
void floodGarbage(uint16_t port, std::atomic<bool>& stop, std::atomic<size_t>& bytes,
                  std::atomic<size_t>& connections, const char* from = nullptr) {
  std::string chunk;
  while (chunk.size() < 64 * 1024) chunk += "\x0bNOT HL7 AT ALL\x1c\r";
  std::vector<Fd> peers(kGarbage);
  while (!stop) {
    std::vector<pollfd> polls;
    for (auto& p : peers) {
      if (!p.valid()) {
        p = connectTo(port, true, from);
        if (p.valid()) ++connections;
      }
      if (p.valid()) polls.push_back({p.get(), POLLOUT, 0});
    }
    if (polls.empty() || ::poll(polls.data(), polls.size(), 100) <= 0) continue;
    for (auto& pfd : polls) {
      if (!(pfd.revents & (POLLOUT | POLLERR | POLLHUP))) continue;
      ssize_t n = ::send(pfd.fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        bytes += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        // Closed by the engine (held over limits.unread_answers too long).
        for (auto& p : peers)
          if (p.get() == pfd.fd) p = Fd();
      }
    }
  }
}

struct Honest {
  size_t acked = 0;
  std::vector<std::string> failures;
};

// One sender: a new message as soon as the last is acknowledged; anything
// but AA with the message's own control id is a failure.
void sendHonestly(uint16_t port, int who, std::atomic<bool>& stop, Honest& out) {
  auto c = MllpClient::connect("127.0.0.1", port, 10s);
  if (!c) {
    out.failures.push_back("connect: " + c.error().message);
    return;
  }
  for (int i = 0; !stop; ++i) {
    std::string id = "H";
    id.append(std::to_string(who)).append("-").append(std::to_string(i));
    auto ack = c->exchange(hl7(id, "MRN" + std::to_string(i % 31)), 15s);
    if (!ack) {
      out.failures.push_back(id + ": " + ack.error().message);
      return;  // the connection is unusable
    }
    auto f = readAck(*ack);
    if (f.code != "AA" || f.controlId != id) {
      out.failures.push_back(id + ": " + f.code + " " + f.controlId + " " + f.text);
      if (out.failures.size() > 20) return;
      continue;
    }
    ++out.acked;
  }
}

TEST(Soak, IdleAndGarbagePeersNeitherStarveHonestSendersNorGrowTheSupervisor) {
  auto began = Clock::now();
  raiseOwnOpenFiles();
  TestDatabase db;
  uint16_t port = freePort();
  TempProject project(MllpProject{
      .port = port,
      // Filtered: this test is about intake, not thousands of files.
      .transform = "export function transform() { return null; }\n",
      // 2,000 idle + 50 garbage + 4 honest, all from 127.0.0.1, fit under
      // 3,000 (the per-address cap raised to match: this test is about
      // load, the next about one address taking every slot); the defaults
      // for the rest (idle 5m, frame deadline 60s, unread answers 1MB).
      .engine = engineYaml() + "limits:\n  connections_per_listener: 3000\n"
                               "  connections_per_address: 3000\n"});
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  const pid_t pid = engine.pid();
  const long rssAtStart = vmRssKb(pid);

  std::vector<Fd> idle;
  idle.reserve(kIdle);
  for (int i = 0; i < kIdle; ++i) {
    idle.push_back(connectTo(port, false));
    ASSERT_TRUE(idle.back().valid()) << "idle connection " << i << ": " << std::strerror(errno);
  }

  std::atomic<bool> stop{false};
  std::atomic<size_t> garbageBytes{0}, garbageConnections{0};
  std::vector<Honest> honest(kHonest);
  std::vector<std::thread> threads;
  threads.emplace_back([&] { floodGarbage(port, stop, garbageBytes, garbageConnections); });
  for (int t = 0; t < kHonest; ++t)
    threads.emplace_back([&, t] { sendHonestly(port, t, stop, honest[t]); });
  struct Joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop = true;
      for (auto& th : threads)
        if (th.joinable()) th.join();
    }
  } joiner{stop, threads};

  // Every connection accepted (a descriptor each in the engine), then the
  // traffic, sampling the supervisor's memory all along.
  EXPECT_TRUE(waitFor([&] { return openFiles(pid) >= kIdle + kGarbage + kHonest; }, 20s))
      << openFiles(pid) << " descriptors open in the engine";
  long rssMax = 0;
  auto until = Clock::now() + kTraffic;
  while (Clock::now() < until && running(pid)) {
    rssMax = std::max(rssMax, vmRssKb(pid));
    std::this_thread::sleep_for(200ms);
  }
  size_t filesDuring = openFiles(pid);
  stop = true;
  for (auto& th : threads) th.join();

  ASSERT_TRUE(running(pid)) << "the engine exited\n" << engine.log();
  size_t acked = 0;
  for (int t = 0; t < kHonest; ++t) {
    EXPECT_TRUE(honest[t].failures.empty())
        << "sender " << t << ": " << honest[t].failures.size()
        << " failure(s), first: " << (honest[t].failures.empty() ? "" : honest[t].failures[0]);
    EXPECT_GT(honest[t].acked, 50u) << "sender " << t << " was starved";
    acked += honest[t].acked;
  }
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), std::to_string(acked));
  EXPECT_LT(rssMax, kRssBoundKb) << "the supervisor grew to " << rssMax << " kB";
  EXPECT_GE(filesDuring, static_cast<size_t>(kIdle + kGarbage))
      << "connections were dropped during the run";

  // Afterwards: a new sender is answered, and the garbage left little in
  // the log (a line per garbage connection and minute, plus one at its end).
  auto after = MllpClient::connect("127.0.0.1", port, 10s);
  ASSERT_TRUE(after) << after.error().message;
  auto ack = after->exchange(hl7("AFTER-SOAK"), 15s);
  ASSERT_TRUE(ack) << ack.error().message << "\n" << engine.log().substr(0, 20000);
  EXPECT_EQ(readAck(*ack).code, "AA");
  std::string log = engine.log();
  size_t refusalLines = 0;
  for (size_t at = 0; (at = log.find("message refused", at)) != std::string::npos; ++at)
    ++refusalLines;
  EXPECT_LE(refusalLines, garbageConnections.load()) << log.substr(0, 20000);
  std::printf(
      "soak: %zu AA to %d honest senders; %zu MB of garbage from %zu connections; supervisor RSS "
      "%ld kB at start, %ld kB at most (bound %ld kB); %zu refusal lines, %zu bytes of log; "
      "%lld s\n",
      acked, kHonest, garbageBytes.load() >> 20, garbageConnections.load(), rssAtStart, rssMax,
      kRssBoundKb, refusalLines, log.size(),
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - began).count()));
  idle.clear();
  EXPECT_EQ(engine.terminate(), 0) << engine.log().substr(0, 20000);
}

// With the default limits (1,000 connections per listener, 250 per
// address): one address holding 2,000 idle connections and another with 50
// garbage peers that never read leave room for an honest sender on a
// third. Before connections_per_address the idle ones took all 1,000 slots
// and the sender was accepted and closed at once, every time, until the
// idle timeout freed one.
TEST(Soak, OneAddressHoldingIdleConnectionsDoesNotShutOutASenderFromAnother) {
  raiseOwnOpenFiles();
  TestDatabase db;
  uint16_t port = freePort();
  TempProject project(
      MllpProject{.port = port, .transform = "export function transform() { return null; }\n"});
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  const pid_t pid = engine.pid();

  std::vector<Fd> idle;
  idle.reserve(kIdle);
  for (int i = 0; i < kIdle; ++i) {
    idle.push_back(connectTo(port, false, "127.0.0.2"));
    ASSERT_TRUE(idle.back().valid()) << "idle connection " << i << ": " << std::strerror(errno);
  }
  // Every one of them accepted by the engine (and most closed again).
  EXPECT_TRUE(waitFor([&] { return engine.log().find("127.0.0.2") != std::string::npos; }, 20s))
      << engine.log();

  std::atomic<bool> stop{false};
  std::atomic<size_t> garbageBytes{0}, garbageConnections{0};
  std::thread garbage(
      [&] { floodGarbage(port, stop, garbageBytes, garbageConnections, "127.0.0.3"); });
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& th;
    ~Joiner() {
      stop = true;
      if (th.joinable()) th.join();
    }
  } joiner{stop, garbage};
  EXPECT_TRUE(waitFor([&] { return garbageConnections.load() >= static_cast<size_t>(kGarbage); },
                      20s));

  size_t acked = 0;
  std::string failure;
  auto c = MllpClient::connect("127.0.0.1", port, 10s);
  ASSERT_TRUE(c) << c.error().message;
  for (int i = 0; i < 200; ++i) {
    std::string id = "FAIR-" + std::to_string(i);
    auto ack = c->exchange(hl7(id, "MRN" + std::to_string(i % 31)), 15s);
    if (!ack) {
      failure = id + ": " + ack.error().message;
      break;
    }
    auto f = readAck(*ack);
    if (f.code != "AA" || f.controlId != id) {
      failure = id + ": " + f.code + " " + f.controlId + " " + f.text;
      break;
    }
    ++acked;
  }
  EXPECT_EQ(acked, 200u) << failure << "\n" << engine.log().substr(0, 20000);
  std::string log = engine.log();
  EXPECT_NE(log.find("refused a connection from 127.0.0.2:"), std::string::npos)
      << log.substr(0, 20000);
  EXPECT_NE(log.find("limits.connections_per_address"), std::string::npos);
  // 250 idle, the garbage peers, the sender and the engine's own: far from
  // the 2,000 the idle address asked for.
  EXPECT_LT(openFiles(pid), 1000u);
  stop = true;
  garbage.join();
  ASSERT_TRUE(running(pid)) << "the engine exited\n" << engine.log();
  idle.clear();
  EXPECT_EQ(engine.terminate(), 0) << engine.log().substr(0, 20000);
}

}  // namespace
}  // namespace ductus::test
