// The listening TCP socket under the MLLP and HTTP sources: bound to an
// address or adopted from an inherited descriptor (systemd socket
// activation), then listening with the caller's accept callback. Errors
// start with the source's name, as operators read them in the log.
#pragma once

#include <sys/socket.h>
#include <uv.h>

#include <cstdint>
#include <string>

#include "common/result.h"
#include "common/uv_handle.h"

namespace ductus::net {

// "127.0.0.1:2575", "[::1]:2575".
std::string formatAddress(const sockaddr_storage& ss);
// The address without its port, an IPv4-mapped IPv6 one as IPv4
// ("127.0.0.1" for ::ffff:127.0.0.1, "2001:db8::1"): what
// limits.connections_per_address counts by. "" for neither family.
std::string hostOf(const sockaddr_storage& ss);

struct TcpListen {
  std::string name;      // the source, for errors and the log line
  std::string protocol;  // "MLLP", "HTTP": the log line says what listens
  void* data = nullptr;  // the server handle's data, for the callback
  uv_connection_cb onConnection = nullptr;
};

// Binds host:port (an IPv4 or IPv6 address) and listens.
Status listenTcp(uv_loop_t* loop, UvHandle<uv_tcp_t>& server, const TcpListen& how,
                 const std::string& host, uint16_t port, int backlog);
// Listens on an inherited socket, which must already be listening; fd is
// closed on failure.
Status adoptTcp(uv_loop_t* loop, UvHandle<uv_tcp_t>& server, const TcpListen& how, int fd);

// Where a listening handle is bound ("" / 0 before it is).
std::string boundAddress(const UvHandle<uv_tcp_t>& server);
uint16_t boundPort(const UvHandle<uv_tcp_t>& server);

}  // namespace ductus::net
