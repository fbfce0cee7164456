#include "intake/http_server.h"

#include <arpa/inet.h>
#include <llhttp.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

namespace ductus::intake {
namespace {

constexpr size_t kReadBuffer = 64 * 1024;
// After an error answer (413, 431, 400) the rest of what the client sends
// is read and dropped, up to this much, before closing: closing a socket
// with unread data makes the kernel send RST, which can destroy the answer
// before the client reads it ("lingering close", as nginx does).
constexpr size_t kLingerBytes = 4 << 20;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::string_view httpReason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
  }
}

std::optional<std::string_view> HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return std::string_view(v);
  return std::nullopt;
}

struct HttpRespond::State {
  HttpConnection* conn = nullptr;  // null once responded or the connection is gone
  ~State();                        // answers 500 if nobody did
};

// One accepted connection; owns itself from accept to its close callback.
class HttpConnection {
 public:
  HttpConnection(HttpServer* server) : server_(server) {
    tcp_.data = this;
    llhttp_init(&parser_, HTTP_REQUEST, &parserSettings());
    parser_.data = this;
  }

  uv_tcp_t* tcp() { return &tcp_; }
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&tcp_); }

  void start() {
    sockaddr_storage ss{};
    int len = sizeof ss;
    if (uv_tcp_getpeername(&tcp_, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
      peer_ = formatAddress(ss);
    uv_tcp_nodelay(&tcp_, 1);
    readBuf_ = std::make_unique<char[]>(kReadBuffer);
    startReading();
  }

  void closeWhenIdle() {
    if (busy_) closeAfterResponse_ = true;
    else closeNow();
  }

  void closeNow() {
    if (closing_) return;
    closing_ = true;
    if (auto s = inflight_.lock()) s->conn = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &HttpConnection::onClose);
  }

  void detach() { server_ = nullptr; }

  void respond(HttpResponse r) {
    inflight_.reset();
    busy_ = false;
    bool keepAlive = keepAlive_ && !closeAfterResponse_ && !(server_ && server_->closing_);
    write(serialize(std::move(r), keepAlive, method_ == "HEAD"));
    if (closing_) return;
    if (!keepAlive) {
      shutdownAndClose(false);
      return;
    }
    llhttp_resume(&parser_);
    if (feeding_) return;  // answered inside the handler; the feed loop goes on
    drainPending();
    if (!busy_ && !closing_ && !shutdown_) startReading();
  }

 private:
  struct WriteReq {
    uv_write_t req;
    std::string data;
  };

  static const llhttp_settings_t& parserSettings() {
    static const llhttp_settings_t s = [] {
      llhttp_settings_t s;
      llhttp_settings_init(&s);
      s.on_message_begin = [](llhttp_t* p) { return self(p)->onMessageBegin(); };
      s.on_url = [](llhttp_t* p, const char* at, size_t n) { return self(p)->onUrl(at, n); };
      s.on_header_field = [](llhttp_t* p, const char* at, size_t n) {
        return self(p)->onHeaderField(at, n);
      };
      s.on_header_value = [](llhttp_t* p, const char* at, size_t n) {
        return self(p)->onHeaderValue(at, n);
      };
      s.on_headers_complete = [](llhttp_t* p) { return self(p)->onHeadersComplete(); };
      s.on_body = [](llhttp_t* p, const char* at, size_t n) { return self(p)->onBody(at, n); };
      s.on_message_complete = [](llhttp_t* p) { return self(p)->onMessageComplete(); };
      return s;
    }();
    return s;
  }
  static HttpConnection* self(llhttp_t* p) { return static_cast<HttpConnection*>(p->data); }

  // ---- llhttp callbacks ----
  int onMessageBegin() {
    req_ = HttpRequest{};
    req_.peer = peer_;
    url_.clear();
    headerBytes_ = 0;
    lastWasValue_ = false;
    routed_ = false;
    handler_ = nullptr;
    complete_ = false;
    return HPE_OK;
  }
  bool countHead(size_t n) {
    headerBytes_ += n;
    if (headerBytes_ <= settings().maxHeaderBytes) return true;
    reject_ = 431;
    return false;
  }
  int onUrl(const char* at, size_t n) {
    if (!countHead(n)) return HPE_USER;
    url_.append(at, n);
    return HPE_OK;
  }
  int onHeaderField(const char* at, size_t n) {
    if (!countHead(n)) return HPE_USER;
    if (lastWasValue_ || req_.headers.empty()) req_.headers.emplace_back();
    lastWasValue_ = false;
    for (size_t i = 0; i < n; ++i)
      req_.headers.back().first += static_cast<char>(std::tolower(static_cast<unsigned char>(at[i])));
    return HPE_OK;
  }
  int onHeaderValue(const char* at, size_t n) {
    if (!countHead(n)) return HPE_USER;
    lastWasValue_ = true;
    if (req_.headers.empty()) return HPE_USER;
    req_.headers.back().second.append(at, n);
    return HPE_OK;
  }
  int onHeadersComplete() {
    req_.method = llhttp_method_name(static_cast<llhttp_method_t>(llhttp_get_method(&parser_)));
    size_t q = url_.find('?');
    req_.path = url_.substr(0, q);
    req_.query = q == std::string::npos ? std::string() : url_.substr(q + 1);
    // The route is copied, so removing it while a request is in flight is safe.
    const HttpServer::Route* route = server_ ? server_->route(req_.path) : nullptr;
    routed_ = route != nullptr;
    if (route) handler_ = route->handler;
    bodyLimit_ = route && route->maxBodyBytes ? route->maxBodyBytes : settings().maxBodyBytes;
    // Refuse a declared oversized body before reading any of it.
    if (routed_ && (parser_.flags & F_CONTENT_LENGTH) && parser_.content_length > bodyLimit_) {
      reject_ = 413;
      return HPE_PAUSED;
    }
    if (routed_) {
      auto expect = req_.header("expect");
      if (expect && iequals(*expect, "100-continue")) write("HTTP/1.1 100 Continue\r\n\r\n");
    }
    return HPE_OK;
  }
  int onBody(const char* at, size_t n) {
    if (!routed_) return HPE_OK;  // answered 404 at the end; the body is dropped
    if (req_.body.size() + n > bodyLimit_) {
      reject_ = 413;
      return HPE_USER;
    }
    req_.body.append(at, n);
    return HPE_OK;
  }
  int onMessageComplete() {
    keepAlive_ = llhttp_should_keep_alive(&parser_);
    method_ = req_.method;
    complete_ = true;
    // Hold the parser here: the next pipelined request waits for this
    // response.
    return HPE_PAUSED;
  }

  // ---- libuv callbacks ----
  static void onClose(uv_handle_t* h) {
    auto* self = static_cast<HttpConnection*>(h->data);
    if (self->server_) self->server_->connectionClosed(self);
    delete self;
  }
  static void onAlloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
    auto* self = static_cast<HttpConnection*>(h->data);
    *buf = uv_buf_init(self->readBuf_.get(), kReadBuffer);
  }
  static void onRead(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
    auto* self = static_cast<HttpConnection*>(s->data);
    if (n == 0) return;
    if (n < 0) {
      if (n != UV_EOF && n != UV_ECONNRESET && !self->shutdown_)
        spdlog::warn("{}: connection from {} failed: {}", self->name(), self->peer_,
                     uv_strerror(static_cast<int>(n)));
      // A client that half-closes after its request still gets the queued
      // response: shutdown waits for pending writes, uv_close cancels them.
      if (n == UV_EOF && !self->shutdown_) self->shutdownAndClose(false);
      else self->closeNow();
      return;
    }
    if (self->shutdown_) {  // lingering after an error answer: drop it
      self->lingered_ += static_cast<size_t>(n);
      if (self->lingered_ > kLingerBytes) self->closeNow();
      return;
    }
    self->consume(buf->base, static_cast<size_t>(n));
  }
  static void onWrite(uv_write_t* req, int status) {
    std::unique_ptr<WriteReq> w(reinterpret_cast<WriteReq*>(req));
    auto* self = static_cast<HttpConnection*>(req->handle->data);
    if (status < 0 && status != UV_ECANCELED) {
      spdlog::warn("{}: writing to {} failed: {}", self->name(), self->peer_, uv_strerror(status));
      self->closeNow();
    }
  }
  static void onShutdown(uv_shutdown_t* req, int status) {
    auto* self = static_cast<HttpConnection*>(req->handle->data);
    bool linger = self->lingerAfterShutdown_;
    delete req;
    if (self->closing_) return;
    if (status < 0 || !linger) {
      self->closeNow();
      return;
    }
    self->startReading();  // read and drop until the client closes
  }

  // ---- reading ----
  const HttpSettings& settings() const {
    static const HttpSettings defaults;
    return server_ ? server_->settings_ : defaults;
  }
  std::string_view name() const { return settings().name; }

  void startReading() {
    if (reading_ || closing_) return;
    if (int rc = uv_read_start(stream(), &onAlloc, &onRead); rc < 0) {
      closeNow();
      return;
    }
    reading_ = true;
  }
  void stopReading() {
    if (!reading_) return;
    uv_read_stop(stream());
    reading_ = false;
  }

  void consume(const char* p, size_t n) {
    if (busy_) {
      pending_.append(p, n);
      stopReading();
      return;
    }
    feeding_ = true;
    size_t used = feed(p, n);
    while (!busy_ && !closing_ && !shutdown_ && used < n) used += feed(p + used, n - used);
    feeding_ = false;
    if (closing_ || shutdown_) return;
    if (used < n) pending_.append(p + used, n - used);
    if (busy_) stopReading();
  }

  void drainPending() {
    feeding_ = true;
    size_t used = 0;
    while (!busy_ && !closing_ && !shutdown_ && used < pending_.size())
      used += feed(pending_.data() + used, pending_.size() - used);
    feeding_ = false;
    pending_.erase(0, used);
  }

  // Runs the parser over the bytes; returns how many it used. Stops after a
  // complete request (busy_) or an error answer (shutdown_).
  size_t feed(const char* p, size_t n) {
    llhttp_errno_t err = llhttp_execute(&parser_, p, n);
    if (err == HPE_OK) return n;
    size_t used = n;
    if (const char* pos = llhttp_get_error_pos(&parser_); pos && pos >= p && pos <= p + n)
      used = static_cast<size_t>(pos - p);
    if (reject_) {
      fail(reject_, reject_ == 413 ? "request body too large" : "request head too large");
      return n;
    }
    if (err == HPE_PAUSED && complete_) {
      dispatch();
      // A pause with nothing consumed would loop forever; llhttp always
      // moves past the message's last byte, but be safe.
      return used == 0 && n > 0 ? 0 : used;
    }
    if (err == HPE_PAUSED_UPGRADE) {
      fail(501, "protocol upgrades are not supported");
      return n;
    }
    fail(400, llhttp_get_error_reason(&parser_) ? llhttp_get_error_reason(&parser_)
                                                : llhttp_errno_name(err));
    return n;
  }

  void dispatch() {
    complete_ = false;
    if (!routed_ || !server_) {
      busy_ = true;  // respond() clears it and resumes the parser
      respond(HttpResponse{404, {{"Content-Type", "text/plain"}}, "no route for " + req_.path + "\n"});
      return;
    }
    auto state = std::make_shared<HttpRespond::State>();
    state->conn = this;
    inflight_ = state;
    busy_ = true;
    HttpRequest req = std::move(req_);
    req_ = HttpRequest{};
    auto handler = std::move(handler_);
    handler_ = nullptr;
    handler(req, HttpRespond(std::move(state)));
  }

  // An error answer that ends the connection.
  void fail(int status, std::string_view why) {
    spdlog::info("{}: {} from {}: {} {}", name(), status, peer_, httpReason(status), why);
    HttpResponse r{status, {{"Content-Type", "text/plain"}}, std::string(why) + "\n"};
    write(serialize(std::move(r), false, false));
    shutdownAndClose(true);
  }

  // ---- writing ----
  static std::string serialize(HttpResponse r, bool keepAlive, bool head) {
    std::string out;
    out.reserve(256 + r.body.size());
    out += "HTTP/1.1 " + std::to_string(r.status) + " ";
    out += httpReason(r.status);
    out += "\r\n";
    bool hasLength = false;
    for (const auto& [k, v] : r.headers) {
      if (iequals(k, "content-length")) hasLength = true;
      if (iequals(k, "connection") || iequals(k, "transfer-encoding")) continue;
      out += k + ": " + v + "\r\n";
    }
    if (!hasLength) out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
    out += keepAlive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
    out += "\r\n";
    if (!head) out += r.body;
    return out;
  }

  void write(std::string data) {
    if (closing_ || shutdown_) return;
    auto w = std::make_unique<WriteReq>();
    w->data = std::move(data);
    uv_buf_t b = uv_buf_init(w->data.data(), w->data.size());
    if (int rc = uv_write(&w->req, stream(), &b, 1, &onWrite); rc < 0) {
      spdlog::warn("{}: writing to {} failed: {}", name(), peer_, uv_strerror(rc));
      closeNow();
      return;
    }
    w.release();  // freed in onWrite
  }

  void shutdownAndClose(bool linger) {
    if (closing_ || shutdown_) return;
    shutdown_ = true;
    lingerAfterShutdown_ = linger && !(server_ && server_->closing_);
    stopReading();
    auto* req = new uv_shutdown_t{};  // freed in onShutdown
    if (uv_shutdown(req, stream(), &onShutdown) < 0) {
      delete req;
      closeNow();
    }
  }

 public:
  HttpServer* server_;
  bool busy_ = false;

 private:
  uv_tcp_t tcp_{};
  llhttp_t parser_{};
  std::unique_ptr<char[]> readBuf_;
  std::string peer_;
  HttpRequest req_;
  std::string url_;
  std::string method_;
  std::string pending_;
  HttpServer::Handler handler_;  // the request's route, copied at its head
  bool routed_ = false;
  size_t headerBytes_ = 0;
  size_t bodyLimit_ = 0;
  size_t lingered_ = 0;
  int reject_ = 0;
  bool lastWasValue_ = false;
  bool complete_ = false;
  bool keepAlive_ = true;
  bool feeding_ = false;
  bool reading_ = false;
  bool closing_ = false;
  bool shutdown_ = false;
  bool lingerAfterShutdown_ = false;
  bool closeAfterResponse_ = false;
  std::weak_ptr<HttpRespond::State> inflight_;
};

HttpRespond::State::~State() {
  if (conn) conn->respond(HttpResponse{500, {{"Content-Type", "text/plain"}}, "no response\n"});
}

void HttpRespond::operator()(HttpResponse response) const {
  if (!state_ || !state_->conn) return;
  HttpConnection* c = std::exchange(state_->conn, nullptr);
  c->respond(std::move(response));
}

bool HttpRespond::responded() const { return !state_ || !state_->conn; }

HttpServer::HttpServer(uv_loop_t* loop, HttpSettings settings)
    : loop_(loop), settings_(std::move(settings)) {}

HttpServer::~HttpServer() {
  for (HttpConnection* c : connections_) {
    c->detach();
    c->closeNow();
  }
  connections_.clear();
}

Status HttpServer::addRoute(std::string path, Handler handler, size_t maxBodyBytes) {
  if (path.empty() || path[0] != '/')
    return Error{settings_.name + ": route \"" + path + "\" must start with '/'"};
  if (routes_.count(path))
    return Error{settings_.name + ": path " + path + " is already served on " + address()};
  routes_.emplace(std::move(path), Route{std::move(handler), maxBodyBytes});
  return {};
}

// Requests already past their head keep the handler they were routed to.
void HttpServer::removeRoute(const std::string& path) { routes_.erase(path); }

const HttpServer::Route* HttpServer::route(const std::string& path) const {
  auto it = routes_.find(path);
  return it == routes_.end() ? nullptr : &it->second;
}

TcpListen HttpServer::how() {
  return {settings_.name, "HTTP", this, &HttpServer::onConnection};
}

Status HttpServer::listen(const std::string& host, uint16_t port, int backlog) {
  return listenTcp(loop_, server_, how(), host, port, backlog);
}

Status HttpServer::adopt(int fd) { return adoptTcp(loop_, server_, how(), fd); }

std::string HttpServer::address() const { return boundAddress(server_); }

uint16_t HttpServer::port() const { return boundPort(server_); }

void HttpServer::onConnection(uv_stream_t* server, int status) {
  auto* self = static_cast<HttpServer*>(server->data);
  if (!self) return;
  if (status < 0) {
    spdlog::warn("{}: accepting a connection failed: {}", self->settings_.name, uv_strerror(status));
    return;
  }
  auto* c = new HttpConnection(self);  // deleted in its close callback
  if (int rc = uv_tcp_init(self->loop_, c->tcp()); rc < 0) {
    spdlog::warn("{}: uv_tcp_init failed: {}", self->settings_.name, uv_strerror(rc));
    delete c;
    return;
  }
  self->connections_.insert(c);
  if (int rc = uv_accept(server, c->stream()); rc < 0) {
    spdlog::warn("{}: accepting a connection failed: {}", self->settings_.name, uv_strerror(rc));
    c->closeNow();
    return;
  }
  c->start();
}

void HttpServer::close(std::function<void()> onClosed) {
  onClosed_ = std::move(onClosed);
  closing_ = true;
  server_.reset();
  auto copy = connections_;
  for (HttpConnection* c : copy) c->closeWhenIdle();
  maybeClosed();
}

void HttpServer::connectionClosed(HttpConnection* c) {
  connections_.erase(c);
  maybeClosed();
}

void HttpServer::maybeClosed() {
  if (!closing_ || !connections_.empty() || !onClosed_) return;
  auto cb = std::move(onClosed_);
  onClosed_ = nullptr;
  cb();  // may destroy this server: nothing after this line
}

}  // namespace ductus::intake
