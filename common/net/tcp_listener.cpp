#include "common/net/tcp_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include "common/log.h"

namespace ductus::net {
namespace {

Status startListening(UvHandle<uv_tcp_t>& server, const TcpListen& how, int backlog) {
  server->data = how.data;
  if (int rc = uv_listen(reinterpret_cast<uv_stream_t*>(server.get()), backlog, how.onConnection);
      rc < 0)
    return Error{how.name + ": listen failed: " + std::string(uv_strerror(rc))};
  spdlog::info("{}: {} listening on {}", how.name, how.protocol, boundAddress(server));
  return {};
}

bool boundName(const UvHandle<uv_tcp_t>& server, sockaddr_storage& ss) {
  if (!server) return false;
  int len = sizeof ss;
  return uv_tcp_getsockname(server.get(), reinterpret_cast<sockaddr*>(&ss), &len) == 0;
}

}  // namespace

std::string formatAddress(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    uv_ip4_name(in, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    uv_ip6_name(in6, host, sizeof host);
    // Appended piecewise: "[" + std::string trips GCC 12's -Wrestrict.
    std::string out = "[";
    out.append(host);
    out.append("]:");
    out.append(std::to_string(ntohs(in6->sin6_port)));
    return out;
  }
  return "unknown";
}

std::string hostOf(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "";
  if (ss.ss_family == AF_INET) {
    uv_inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, host, sizeof host);
    return host;
  }
  if (ss.ss_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
    // A dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d: one host,
    // counted once however it arrives.
    if (IN6_IS_ADDR_V4MAPPED(&a)) {
      uv_inet_ntop(AF_INET, a.s6_addr + 12, host, sizeof host);
      return host;
    }
    uv_inet_ntop(AF_INET6, &a, host, sizeof host);
    return host;
  }
  return {};
}

Status listenTcp(uv_loop_t* loop, UvHandle<uv_tcp_t>& server, const TcpListen& how,
                 const std::string& host, uint16_t port, int backlog) {
  sockaddr_storage addr{};
  if (uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(&addr)) != 0 &&
      uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(&addr)) != 0)
    return Error{how.name + ": \"" + host + "\" is not an IP address to listen on"};
  server = UvHandle<uv_tcp_t>::make();
  if (int rc = uv_tcp_init(loop, server.get()); rc < 0)
    return Error{how.name + ": uv_tcp_init failed: " + uv_strerror(rc)};
  server.markInitialized();
  if (int rc = uv_tcp_bind(server.get(), reinterpret_cast<sockaddr*>(&addr), 0); rc < 0)
    return Error{how.name + ": binding " + host + ":" + std::to_string(port) +
                 " failed: " + uv_strerror(rc)};
  return startListening(server, how, backlog);
}

Status adoptTcp(uv_loop_t* loop, UvHandle<uv_tcp_t>& server, const TcpListen& how, int fd) {
  int accepting = 0;
  socklen_t len = sizeof accepting;
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting) {
    ::close(fd);
    return Error{how.name + ": inherited fd " + std::to_string(fd) + " is not a listening socket"};
  }
  server = UvHandle<uv_tcp_t>::make();
  if (int rc = uv_tcp_init(loop, server.get()); rc < 0) {
    ::close(fd);
    return Error{how.name + ": uv_tcp_init failed: " + uv_strerror(rc)};
  }
  server.markInitialized();
  if (int rc = uv_tcp_open(server.get(), fd); rc < 0) {
    ::close(fd);
    return Error{how.name + ": adopting fd " + std::to_string(fd) + " failed: " + uv_strerror(rc)};
  }
  return startListening(server, how, SOMAXCONN);
}

std::string boundAddress(const UvHandle<uv_tcp_t>& server) {
  sockaddr_storage ss{};
  return boundName(server, ss) ? formatAddress(ss) : std::string();
}

uint16_t boundPort(const UvHandle<uv_tcp_t>& server) {
  sockaddr_storage ss{};
  if (!boundName(server, ss)) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

}  // namespace ductus::net
