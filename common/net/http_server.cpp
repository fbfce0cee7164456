#include "common/net/http_server.h"

#include <llhttp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>

#include "common/duration_text.h"
#include "common/log.h"

namespace ductus::net {
namespace {

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
    case 408: return "Request Timeout";
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

struct HttpRespond::State : AnswerSlot {
  ~State();  // answers 500 if nobody did
  // Set for an answer that goes to a function, not a connection
  // (HttpRespond::to); emptied by the answer.
  std::function<void(HttpResponse)> to;
};

// What every copy of an HttpStream shares; the connection holds it weakly,
// so the last copy dropped ends the stream.
struct HttpStream::State : AnswerSlot {
  ~State();
  size_t maxUnread = 0;
  std::function<void()> onEnded;
};

// The HTTP of one accepted connection, parsed by llhttp.
class HttpConnection final : public StreamConnection {
 public:
  // Pipelined requests are rare in HTTP: reading stops behind each request
  // until it is answered.
  explicit HttpConnection(HttpServer* server) : StreamConnection(0), server_(server) {
    llhttp_init(&parser_, HTTP_REQUEST, &parserSettings());
    parser_.data = this;
  }

  void respond(HttpResponse r) {
    if (Histogram* times = settings().answerTimes; times && dispatched_)
      times->observe(since(*std::exchange(dispatched_, std::nullopt)));
    bool keepAlive = keepAlive_ && !draining();
    // The parser was held at the end of this request; the next one may go.
    llhttp_resume(&parser_);
    withSettingsHeaders(r);
    endRequest(serialize(std::move(r), keepAlive, method_ == "HEAD"), keepAlive);
  }

  // ---- a streamed answer (HttpStream) ----
  // The parser stays held at the end of the request: none follows.
  HttpStream startStream(HttpResponse head, HttpStreamOptions options) {
    withSettingsHeaders(head);
    std::string bytes = streamHead(head);
    if (method_ == "HEAD" || draining()) {
      endRequest(std::move(bytes), false);
      return HttpStream();
    }
    auto state = std::make_shared<HttpStream::State>();
    state->maxUnread = options.maxUnread;
    state->onEnded = std::move(options.onEnded);
    beginStream(state);
    if (state->answered()) return HttpStream();
    stream_ = state;
    write(std::move(bytes));
    return HttpStream(std::move(state));
  }
  bool streamWrite(std::string bytes, size_t maxUnread) {
    if (!writable()) return false;
    write(std::move(bytes));
    if (!writable()) return false;
    // What the kernel took is gone from here; the rest waits in this
    // process for a client that may never read it.
    if (size_t behind = unread(); behind > maxUnread) {
      spdlog::warn(
          "{}: closing the stream to {}: {} bytes written and not taken, over its bound of {}",
          name(), peer(), behind, maxUnread);
      closeNow();
      return false;
    }
    return true;
  }
  void endStream() { shutdownAndClose(false); }
  bool streamOpen() const { return writable(); }
  uv_loop_t* streamLoop() const { return loop(); }
  size_t streamUnread() const { return unread(); }

 private:
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
      // CVE-2024-22019: llhttp 8 reads chunk extensions without a bound
      // of its own; they are dropped, but counted as head bytes.
      s.on_chunk_extension_name = [](llhttp_t* p, const char*, size_t n) -> int {
        return self(p)->countHead(n) ? HPE_OK : HPE_USER;
      };
      s.on_chunk_extension_value = [](llhttp_t* p, const char*, size_t n) -> int {
        return self(p)->countHead(n) ? HPE_OK : HPE_USER;
      };
      s.on_message_complete = [](llhttp_t* p) { return self(p)->onMessageComplete(); };
      return s;
    }();
    return s;
  }
  static HttpConnection* self(llhttp_t* p) { return static_cast<HttpConnection*>(p->data); }

  // ---- llhttp callbacks ----
  int onMessageBegin() {
    frameBegun();
    req_ = HttpRequest{};
    req_.peer = peer();
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
    const HttpServer::Route* route = server() ? server()->route(req_.path) : nullptr;
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
    frameEnded();
    keepAlive_ = llhttp_should_keep_alive(&parser_);
    method_ = req_.method;
    complete_ = true;
    // Hold the parser here: the next pipelined request waits for this
    // response.
    return HPE_PAUSED;
  }

  // ---- the connection ----
  void failed(IoStep step, int status) override {
    if (step == IoStep::Write)
      spdlog::warn("{}: writing to {} failed: {}", name(), peer(), uv_strerror(status));
    // A client that resets the connection has gone; nothing failed here.
    else if (step == IoStep::Read && status != UV_ECONNRESET)
      spdlog::warn("{}: connection from {} failed: {}", name(), peer(), uv_strerror(status));
  }

  void ended() override {
    auto s = stream_.lock();
    if (!s) return;
    if (auto done = std::exchange(s->onEnded, nullptr)) done();
  }

  // The request begun `age` ago is still not complete: 408, as RFC 9110
  // says for a server that will not wait any longer.
  void frameExpired(std::chrono::milliseconds age) override {
    fail(408, "request not complete " + formatDuration(age) +
                  " after its first byte (limits.frame_deadline is " +
                  formatDuration(limits().frameDeadline) + ")");
  }

  HttpServer* server() const { return attached() ? server_ : nullptr; }
  const HttpSettings& settings() const {
    static const HttpSettings defaults;
    return server() ? server()->settings_ : defaults;
  }
  std::string_view name() const { return settings().name; }

  // Runs the parser over the bytes; returns how many it used. Stops after a
  // complete request or an error answer.
  size_t feed(const char* p, size_t n) override {
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
    if (!routed_ || !server()) {
      respond(HttpResponse{404, {{"Content-Type", "text/plain"}}, "no route for " + req_.path + "\n"});
      return;
    }
    auto state = std::make_shared<HttpRespond::State>();
    beginRequest(state);
    if (settings().answerTimes) dispatched_ = std::chrono::steady_clock::now();
    HttpRequest req = std::move(req_);
    req_ = HttpRequest{};
    auto handler = std::move(handler_);
    handler_ = nullptr;
    handler(req, HttpRespond(std::move(state)));
  }

  // An error answer that ends the connection.
  void fail(int status, std::string_view why) {
    frameEnded();
    spdlog::info("{}: {} from {}: {} {}", name(), status, peer(), httpReason(status), why);
    HttpResponse r{status, {{"Content-Type", "text/plain"}}, std::string(why) + "\n"};
    withSettingsHeaders(r);
    write(serialize(std::move(r), false, false));
    shutdownAndClose(true);
  }

  // ---- writing ----
  void withSettingsHeaders(HttpResponse& r) const {
    for (const auto& h : settings().headers) {
      bool present = std::any_of(r.headers.begin(), r.headers.end(),
                                 [&](const auto& x) { return iequals(x.first, h.first); });
      if (!present) r.headers.push_back(h);
    }
  }

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

  // A stream's head: its body ends when the connection does.
  static std::string streamHead(const HttpResponse& r) {
    std::string out = "HTTP/1.1 " + std::to_string(r.status) + " ";
    out += httpReason(r.status);
    out += "\r\n";
    for (const auto& [k, v] : r.headers) {
      if (iequals(k, "content-length") || iequals(k, "connection") ||
          iequals(k, "transfer-encoding"))
        continue;
      out += k + ": " + v + "\r\n";
    }
    out += "Connection: close\r\n\r\n";
    return out;
  }

  HttpServer* server_;  // valid while attached()
  llhttp_t parser_{};
  HttpRequest req_;
  std::string url_;
  std::string method_;
  HttpServer::Handler handler_;  // the request's route, copied at its head
  bool routed_ = false;
  size_t headerBytes_ = 0;
  size_t bodyLimit_ = 0;
  int reject_ = 0;
  bool lastWasValue_ = false;
  bool complete_ = false;
  bool keepAlive_ = true;
  // When the request in hand went to its handler (settings().answerTimes
  // only); a streamed answer is not timed.
  std::optional<std::chrono::steady_clock::time_point> dispatched_;
  std::weak_ptr<HttpStream::State> stream_;  // set once the answer is a stream
};

HttpRespond::State::~State() {
  HttpResponse none{500, {{"Content-Type", "text/plain"}}, "no response\n"};
  if (auto f = std::exchange(to, nullptr))
    f(std::move(none));
  else if (auto* c = take<HttpConnection>())
    c->respond(std::move(none));
}

HttpRespond HttpRespond::to(std::function<void(HttpResponse)> answer) {
  auto state = std::make_shared<State>();
  state->to = std::move(answer);
  return HttpRespond(std::move(state));
}

void HttpRespond::operator()(HttpResponse response) const {
  if (!state_) return;
  if (auto f = std::exchange(state_->to, nullptr)) return f(std::move(response));
  if (auto* c = state_->take<HttpConnection>()) c->respond(std::move(response));
}

bool HttpRespond::responded() const {
  return !state_ || (!state_->to && state_->answered());
}

HttpStream HttpRespond::stream(HttpResponse head, HttpStreamOptions options) const {
  if (!state_) return HttpStream();
  // No connection to stream on: the head is the whole answer.
  if (auto f = std::exchange(state_->to, nullptr)) {
    f(std::move(head));
    return HttpStream();
  }
  auto* c = state_->take<HttpConnection>();
  if (!c) return HttpStream();
  return c->startStream(std::move(head), std::move(options));
}

HttpStream::State::~State() {
  if (auto* c = connection<HttpConnection>()) c->endStream();
}

bool HttpStream::write(std::string bytes) const {
  auto* c = state_ ? state_->connection<HttpConnection>() : nullptr;
  return c && c->streamWrite(std::move(bytes), state_->maxUnread);
}

void HttpStream::end() const {
  if (auto* c = state_ ? state_->connection<HttpConnection>() : nullptr) c->endStream();
}

bool HttpStream::open() const {
  auto* c = state_ ? state_->connection<HttpConnection>() : nullptr;
  return c && c->streamOpen();
}

uv_loop_t* HttpStream::loop() const {
  return open() ? state_->connection<HttpConnection>()->streamLoop() : nullptr;
}

size_t HttpStream::unread() const {
  return open() ? state_->connection<HttpConnection>()->streamUnread() : 0;
}

namespace {

// What a connection refused by the limits (ConnectionSet) is told before it
// is closed.
std::string tooManyConnections() {
  const std::string body = "too many connections\n";
  return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 5\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace

HttpServer::HttpServer(uv_loop_t* loop, HttpSettings settings)
    : loop_(loop),
      settings_(std::move(settings)),
      connections_(settings_.name, settings_.limits, tooManyConnections()) {
  connections_.guard(settings_.guard);
}

HttpServer::~HttpServer() = default;

Status HttpServer::addRoute(std::string path, Handler handler, size_t maxBodyBytes) {
  if (path != "*" && (path.empty() || path[0] != '/'))
    return Error{settings_.name + ": route \"" + path + "\" must start with '/'"};
  if (routes_.count(path))
    return Error{settings_.name + ": path " + path + " is already served on " + address()};
  routes_.emplace(std::move(path), Route{std::move(handler), maxBodyBytes});
  return {};
}

Status HttpServer::addPrefixRoute(std::string prefix, Handler handler, size_t maxBodyBytes) {
  if (prefix.empty() || prefix[0] != '/')
    return Error{settings_.name + ": route prefix \"" + prefix + "\" must start with '/'"};
  for (auto& [p, r] : prefixes_)
    if (p == prefix)
      return Error{settings_.name + ": paths under " + prefix + " are already served on " +
                   address()};
  auto at = std::find_if(prefixes_.begin(), prefixes_.end(),
                         [&](const auto& e) { return e.first.size() < prefix.size(); });
  prefixes_.insert(at, {std::move(prefix), Route{std::move(handler), maxBodyBytes}});
  return {};
}

// Requests already past their head keep the handler they were routed to.
void HttpServer::removeRoute(const std::string& path) {
  routes_.erase(path);
  std::erase_if(prefixes_, [&](const auto& e) { return e.first == path; });
}

const HttpServer::Route* HttpServer::route(const std::string& path) const {
  if (auto it = routes_.find(path); it != routes_.end()) return &it->second;
  for (auto& [prefix, r] : prefixes_)
    if (path.compare(0, prefix.size(), prefix) == 0) return &r;
  auto it = routes_.find("*");
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
  if (self) self->connections_.accept<HttpConnection>(server, status, self);
}

void HttpServer::close(std::function<void()> onClosed) {
  server_.reset();
  connections_.closeAll(std::move(onClosed));
}

}  // namespace ductus::net
