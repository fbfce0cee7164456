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
// a new connection past connectionsPerAddress, or past maxConnections with
// no connection idle to give way, gets 503 and is closed; an idle
// keep-alive connection is closed after idleTimeout; a request whose head
// and body are not complete within frameDeadline of its first byte is
// answered 408 and closed; a client that pipelines requests without reading
// the responses is no longer read from past unreadAnswers unread.
//
// A handler may answer with a stream instead (HttpRespond::stream, for
// Server-Sent Events): a head without Content-Length, then a body written
// over time until either side ends it; see HttpStream.
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

#include "common/histogram.h"
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

// A response whose body is written over time (Server-Sent Events), from
// HttpRespond::stream(). Copyable; every copy writes to the same stream.
// Its head goes out with "Connection: close" and without Content-Length:
// the body is everything written until the connection closes, and no
// request follows it on that connection. The connection's idle timeout
// does not apply to it. What the client sends meanwhile is read and
// dropped, so its leaving is seen at once.
//
// The stream ends when the handler calls end() or drops every copy (what
// is queued is written first); when the client closes its side or resets;
// when the client leaves more than maxUnread bytes unsent (it does not
// read: the connection is closed at once, logged), or leaves
// limits.unreadAnswers unsent for limits.unreadGrace; when the server
// closes (close(): a shutdown after what is queued, or at once if the
// client is behind).
class HttpStream {
 public:
  HttpStream() = default;  // not open

  // Queues bytes; false when the stream is not open (then nothing is
  // queued), or these bytes took it over maxUnread.
  bool write(std::string bytes) const;
  // Ends the stream once what is queued is written.
  void end() const;
  bool open() const;
  // The loop the connection runs on, null when not open: for the timers
  // that feed the stream.
  uv_loop_t* loop() const;
  // Bytes written and not yet taken by the client's kernel (0 when not
  // open): a writer with more to say than a bound waits for it to fall.
  size_t unread() const;

 private:
  friend class HttpConnection;
  friend class HttpRespond;
  struct State;
  explicit HttpStream(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
};

struct HttpStreamOptions {
  // Bytes written and not yet taken by the client's kernel past which the
  // client is dropped. A stream sends when it has something to say, not
  // when it is asked: this is what keeps a client that never reads from
  // holding the engine's memory.
  size_t maxUnread = size_t{1} << 20;
  // Runs once, on the loop, after the connection has closed, whichever way
  // the stream ended; never from inside stream(), write() or end(). It
  // lives in the stream's copies: once every copy is dropped, it won't run.
  std::function<void()> onEnded;
};

// Sends the response for one request. Copyable; the first call wins, later
// ones do nothing, as does a call after the connection has gone. If every
// copy is dropped unanswered, the client gets 500 so the connection does not
// hang.
class HttpRespond {
 public:
  void operator()(HttpResponse response) const;
  bool responded() const;
  // Answers with a stream: `head`'s status and headers now (Content-Length,
  // Transfer-Encoding and Connection are left out), the body through the
  // stream. Like a response, the first answer wins: after one (or once the
  // connection has gone) the stream is not open and onEnded never runs. So
  // does a HEAD request or a closing server, which get the head alone.
  HttpStream stream(HttpResponse head, HttpStreamOptions options = {}) const;
  // An answer that goes to `answer` instead of a connection, for requests
  // made inside the engine (ductusctl's, through the control socket); a
  // stream's head is its whole answer. Dropped unanswered: a 500.
  static HttpRespond to(std::function<void(HttpResponse)> answer);

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
  // Observes each answer's time, from its request's dispatch to the answer
  // handed to the connection; null: not timed. Must outlive the server.
  Histogram* answerTimes = nullptr;
  // Added to every answer's head, the server's own errors (400, 408, 413,
  // 431) and streams' included: the REST API's X-Content-Type-Options.
  HttpHeaders headers;
  // allow: and tls: (listener_guard.h); empty: plain, everyone.
  ListenerGuard guard;
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
  // response, streams at once (HttpStream). onClosed runs once all are
  // closed.
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
