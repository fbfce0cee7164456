#include "tests/support/ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>

namespace ductus::test {
namespace {

// Binds 127.0.0.1:port (0: the kernel's pick); the port bound, or 0.
uint16_t bindLoopback(const Fd& fd, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 0;
  socklen_t len = sizeof a;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

Fd tcpSocket() { return Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)); }

// The low end of net.ipv4.ip_local_port_range: the kernel's bind(0) and
// outgoing connections take their ports from there up.
uint32_t ephemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  uint32_t low = 0;
  return in >> low ? low : 32768;
}

}  // namespace

// Probing with bind(0) and closing left the port to the kernel, which could
// hand it to any other socket (another test process's connection, ctest
// -j2) before the engine bound it: "address already in use". Below the
// ephemeral range only explicit binds take ports: this process's (one port
// each, from a counter), other test processes' (each starting at its own
// place, from its pid) and whatever else the machine runs, which the probe
// bind (without SO_REUSEADDR, so a port in TIME_WAIT is stepped over too)
// finds taken.
uint16_t freePort() {
  constexpr uint32_t kLow = 10000;
  static const uint32_t high = ephemeralLow();
  if (high >= kLow + 1000) {
    const uint32_t span = high - kLow;
    static std::atomic<uint32_t> next{static_cast<uint32_t>(::getpid()) * 2654435761u % span};
    for (int tries = 0; tries < 1000; ++tries) {
      auto port = static_cast<uint16_t>(kLow + next.fetch_add(1) % span);
      if (bindLoopback(tcpSocket(), port) == port) return port;
    }
  }
  // No room below the ephemeral range: the kernel's pick, as before.
  return bindLoopback(tcpSocket(), 0);
}

Fd closedPort(uint16_t* port) {
  Fd fd = tcpSocket();
  *port = bindLoopback(fd, 0);
  return *port ? std::move(fd) : Fd();
}

bool accepts(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

}  // namespace ductus::test
