#include "tests/support/receivers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstring>

namespace ductus::senders::test {
namespace {

// Waits up to 50 ms for fd to be readable, so loops can notice stop flags.
bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 50) > 0;
}

bool writeAll(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

Fd listenOn(uint16_t port, uint16_t* boundPort) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd.get(), 128) != 0) {
    return Fd();
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  if (boundPort) *boundPort = ntohs(addr.sin_port);
  return fd;
}

std::string mllpFrame(const std::string& message) { return "\x0b" + message + "\x1c\x0d"; }

std::string hl7Ack(const std::string& code, const std::string& text) {
  return "MSH|^~\\&|RCV|FAC|SND|FAC|20261202120000||ACK^A01|ACK1|P|2.5\rMSA|" + code +
         "|MSG0001|" + text + "\r";
}

MllpReceiver::MllpReceiver(Handler handler, Fd bound) : handler_(std::move(handler)) {
  if (!bound.valid()) {
    listener_ = listenOn(0, &port_);
  } else if (::listen(bound.get(), 128) == 0) {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    ::getsockname(bound.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listener_ = std::move(bound);
  }
  thread_ = std::thread([this] { run(); });
}

MllpReceiver::~MllpReceiver() {
  stopping_ = true;
  thread_.join();
}

std::vector<std::string> MllpReceiver::messages() {
  std::lock_guard lock(mu_);
  return messages_;
}

void MllpReceiver::setHandler(Handler h) {
  std::lock_guard lock(mu_);
  handler_ = std::move(h);
}

void MllpReceiver::run() {
  while (!stopping_) {
    if (!readable(listener_.get())) continue;
    Fd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) continue;
    ++connections_;
    serve(conn.get());
  }
}

void MllpReceiver::serve(int fd) {
  std::string buffer;
  char chunk[4096];
  while (!stopping_) {
    if (!readable(fd)) continue;
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return;
    buffer.append(chunk, static_cast<size_t>(n));
    for (;;) {
      size_t start = buffer.find('\x0b');
      size_t end = buffer.find("\x1c\x0d");
      if (start == std::string::npos || end == std::string::npos) break;
      std::string message = buffer.substr(start + 1, end - start - 1);
      buffer.erase(0, end + 2);
      Handler handler;
      {
        std::lock_guard lock(mu_);
        messages_.push_back(message);
        handler = handler_;
      }
      MllpReply reply = handler(message);
      if (!buffer.empty()) ++early_;  // more came with this one
      if (auto hold = hold_.load(); hold.count() > 0) {
        std::this_thread::sleep_for(hold);
        char c;
        if (::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0) ++early_;
      }
      if (!reply.bytes.empty() && !writeAll(fd, reply.bytes)) return;
      if (reply.closeAfter) return;
    }
  }
}

std::string HttpRequestSeen::header(const std::string& name) const {
  for (auto& [k, v] : headers) {
    if (lower(k) == lower(name)) return v;
  }
  return "";
}

HttpReceiver::HttpReceiver() {
  listener_ = listenOn(0, &port_);
  thread_ = std::thread([this] { run(); });
}

HttpReceiver::~HttpReceiver() {
  stopping_ = true;
  thread_.join();
  for (auto& w : workers_) w.join();
}

std::string HttpReceiver::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

std::vector<HttpRequestSeen> HttpReceiver::requests() {
  std::lock_guard lock(mu_);
  return requests_;
}

void HttpReceiver::run() {
  while (!stopping_) {
    if (!readable(listener_.get())) continue;
    Fd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) continue;
    workers_.emplace_back([this, c = std::move(conn)]() mutable { serve(std::move(c)); });
  }
}

void HttpReceiver::serve(Fd conn) {

  std::string buffer;
  char chunk[4096];
  size_t headerEnd = std::string::npos;
  while (!stopping_ && headerEnd == std::string::npos) {
    if (!readable(conn.get())) continue;
    ssize_t n = ::recv(conn.get(), chunk, sizeof chunk, 0);
    if (n <= 0) return;
    buffer.append(chunk, static_cast<size_t>(n));
    headerEnd = buffer.find("\r\n\r\n");
  }
  if (headerEnd == std::string::npos) return;
  HttpRequestSeen req;
  std::string head = buffer.substr(0, headerEnd);
  size_t lineEnd = head.find("\r\n");
  std::string requestLine = head.substr(0, lineEnd);
  size_t sp1 = requestLine.find(' '), sp2 = requestLine.rfind(' ');
  req.method = requestLine.substr(0, sp1);
  req.path = requestLine.substr(sp1 + 1, sp2 - sp1 - 1);
  size_t pos = lineEnd == std::string::npos ? head.size() : lineEnd + 2;
  while (pos < head.size()) {
    size_t e = head.find("\r\n", pos);
    if (e == std::string::npos) e = head.size();
    std::string line = head.substr(pos, e - pos);
    size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      req.headers.emplace_back(line.substr(0, colon), value);
    }
    pos = e + 2;
  }
  size_t length = 0;
  if (auto cl = req.header("Content-Length"); !cl.empty()) length = std::stoul(cl);
  req.body = buffer.substr(headerEnd + 4);
  while (!stopping_ && req.body.size() < length) {
    if (!readable(conn.get())) continue;
    ssize_t n = ::recv(conn.get(), chunk, sizeof chunk, 0);
    if (n <= 0) return;
    req.body.append(chunk, static_cast<size_t>(n));
  }
  {
    std::lock_guard lock(mu_);
    requests_.push_back(req);
  }
  // In flight from the whole request read to just before its answer: the
  // client can send its next request only after that, so the count is the
  // client's own concurrency, not a close lagging behind.
  int now = ++active_;
  int peak = peak_;
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  struct Leave {
    std::atomic<int>* a;
    void now() {
      if (a) --*a;
      a = nullptr;
    }
    ~Leave() { now(); }
  } leave{&active_};

  int status = 200;
  std::string body = "ok";
  if (req.path.rfind("/status/", 0) == 0) {
    status = std::stoi(req.path.substr(8));
    body = "body of " + std::to_string(status) + std::string(300, '.');
  } else if (req.path.rfind("/slow/", 0) == 0) {
    auto until = std::chrono::steady_clock::now() +
                 std::chrono::milliseconds(std::stoi(req.path.substr(6)));
    while (!stopping_ && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  const char* reason = status == 200   ? "OK"
                       : status == 202 ? "Accepted"
                       : status == 404 ? "Not Found"
                       : status == 503 ? "Service Unavailable"
                                       : "Whatever";
  std::string response = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                         "\r\nContent-Length: " + std::to_string(body.size()) +
                         "\r\nConnection: close\r\n\r\n" + body;
  leave.now();
  writeAll(conn.get(), response);
}

}  // namespace ductus::senders::test
