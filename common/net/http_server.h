// HttpServer: HTTP/1.1 on libuv TCP, parsed by llhttp, for the HTTP source
// (queue and respond mode) and the REST API. Several interfaces share one
// port by path: each registers its exact path with addRoute(); the API
// takes every path under /api/ with addPrefixRoute(); anything else is 404.
//
// One request at a time per connection: after a request is complete the
// connection stops reading until its response has been given, so pipelined
// requests are answered in order and a slow commit holds back only its own
// connection. Keep-alive as HTTP/1.1 says; "Connection: close" (or HTTP/1.0
// without keep-alive) closes after the response.
//
// Limits: a request head over maxHeaderBytes is answered 431, a body over
// the route's limit 413 (as soon as Content-Length or the chunks show it),
// malformed HTTP 400; each of these closes the connection.
//
// settings.limits bound what each connection may hold (stream_connection.h):
// past maxConnections a new connection gets 503 and is closed; an idle
// keep-alive connection is closed after idleTimeout; a request whose head
// and body are not complete within frameDeadline of its first byte is
// answered 408 and closed; a client that pipelines requests without reading
// the responses is no longer read from past unreadAnswers unread.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/uv_handle.h"
#include "common/net/stream_connection.h"
#include "common/net/tcp_listener.h"

namespace ductus::net {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "POST"
  std::string path;    // "/adt", without the query
  std::string query;   // after '?', undecoded; "" if none
  HttpHeaders headers;  // names lowercased, values as sent, in order
  std::string body;    // bytes, de-chunked
  std::string peer;    // "127.0.0.1:53412"

  // The first header with this (lowercase) name.
  std::optional<std::string_view> header(std::string_view lowercaseName) const;
};

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;  // Content-Length is added unless present
  std::string body;
};

class HttpConnection;

// Sends the response for one request. Copyable; the first call wins, later
// ones do nothing, as does a call after the connection has gone. If every
// copy is dropped unanswered, the client gets 500 so the connection does not
// hang.
class HttpRespond {
 public:
  void operator()(HttpResponse response) const;
  bool responded() const;

 private:
  friend class HttpConnection;
  struct State;
  explicit HttpRespond(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
};

struct HttpSettings {
  size_t maxHeaderBytes = 64 * 1024;
  // The default body limit; a route may set its own.
  size_t maxBodyBytes = size_t{64} << 20;
  std::string name = "http";  // for logs
  ConnectionLimits limits;
};

class HttpServer {
 public:
  using Handler = std::function<void(const HttpRequest&, HttpRespond)>;

  HttpServer(uv_loop_t* loop, HttpSettings settings);
  // Closes everything at once; prefer close() and wait for its callback.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  [[nodiscard]] Status listen(const std::string& host, uint16_t port, int backlog = 511);
  // A socket already bound and listening (systemd, handover); owned from here.
  [[nodiscard]] Status adopt(int fd);

  // Registers an exact path ("/adt"), or "*" for every path no route has
  // (`ductus sink`). maxBodyBytes 0 = the server's default. Refused if the
  // path is taken.
  [[nodiscard]] Status addRoute(std::string path, Handler handler, size_t maxBodyBytes = 0);
  // Registers every path that starts with `prefix` ("/api/"), for a handler
  // that routes them itself. An exact route wins over a prefix, a longer
  // prefix over a shorter one, and any of them over "*". Refused if the
  // prefix is taken.
  [[nodiscard]] Status addPrefixRoute(std::string prefix, Handler handler,
                                      size_t maxBodyBytes = 0);
  // An exact path or "*"; a prefix as given to addPrefixRoute.
  void removeRoute(const std::string& path);

  std::string address() const;
  uint16_t port() const;
  size_t connectionCount() const { return connections_.size(); }
  // The listening socket, -1 before listen (for systemd's fd store; still
  // owned here).
  int fd() const {
    uv_os_fd_t fd = -1;
    if (!server_ || uv_fileno(reinterpret_cast<const uv_handle_t*>(server_.get()), &fd) != 0)
      return -1;
    return fd;
  }

  // Stops accepting; idle connections close now, busy ones after their
  // response. onClosed runs once all are closed.
  void close(std::function<void()> onClosed);

 private:
  friend class HttpConnection;
  struct Route {
    Handler handler;
    size_t maxBodyBytes;
  };
  static void onConnection(uv_stream_t* server, int status);
  TcpListen how();
  const Route* route(const std::string& path) const;

  uv_loop_t* loop_;
  HttpSettings settings_;
  std::unordered_map<std::string, Route> routes_;
  std::vector<std::pair<std::string, Route>> prefixes_;  // longest first
  UvHandle<uv_tcp_t> server_;
  ConnectionSet connections_;
};

// "Not Found" for 404 etc.; "Unknown" for codes we never send.
std::string_view httpReason(int status);

}  // namespace ductus::net
