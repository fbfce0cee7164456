#include "tests/support/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>

namespace ductus::test {
namespace {

bool waitFor(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  int rc;
  do rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, timeout.count())));
  while (rc < 0 && errno == EINTR);
  return rc > 0;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

}  // namespace

Result<HttpClient> HttpClient::connect(uint16_t port, Millis timeout) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Error::fromErrno("HttpClient: socket()");
  int one = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) return Error::fromErrno("HttpClient: connect()");
    if (!waitFor(fd.get(), POLLOUT, timeout)) return Error{"HttpClient: connect() timed out"};
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return Error::fromErrno("HttpClient: connect()", err);
  }
  return HttpClient(std::move(fd));
}

Result<HttpReply> HttpClient::request(const std::string& method, const std::string& path,
                                      const std::string& body,
                                      const std::map<std::string, std::string>& headers,
                                      Millis timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    return std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
  };
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  size_t off = 0;
  while (off < req.size()) {
    ssize_t n = ::send(fd_.get(), req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!waitFor(fd_.get(), POLLOUT, left())) return Error{"HttpClient: send timed out"};
      continue;
    }
    return Error::fromErrno("HttpClient: send()");
  }
  // Reads until `pred` holds on the buffer.
  auto fill = [&](auto pred) -> Status {
    while (!pred()) {
      if (left().count() <= 0 || !waitFor(fd_.get(), POLLIN, left()))
        return Error{"HttpClient: no answer within " + std::to_string(timeout.count()) + " ms"};
      char buf[65536];
      ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
      if (n == 0) return Error{"HttpClient: connection closed by the peer"};
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return Error::fromErrno("HttpClient: recv()");
      }
      buffer_.append(buf, static_cast<size_t>(n));
    }
    return {};
  };
  HttpReply reply;
  size_t headEnd;
  for (;;) {
    if (auto s = fill([&] { return buffer_.find("\r\n\r\n") != std::string::npos; }); !s)
      return s.error();
    headEnd = buffer_.find("\r\n\r\n");
    // 1xx answers (100 Continue) come before the real one.
    if (buffer_.compare(0, 10, "HTTP/1.1 1") == 0) {
      buffer_.erase(0, headEnd + 4);
      continue;
    }
    break;
  }
  std::string head = buffer_.substr(0, headEnd);
  buffer_.erase(0, headEnd + 4);
  size_t lineEnd = head.find("\r\n");
  std::string statusLine = head.substr(0, lineEnd);
  if (statusLine.rfind("HTTP/1.", 0) != 0 || statusLine.size() < 12)
    return Error{"HttpClient: bad status line \"" + statusLine + "\""};
  reply.status = std::atoi(statusLine.c_str() + 9);
  size_t pos = lineEnd == std::string::npos ? head.size() : lineEnd + 2;
  while (pos < head.size()) {
    size_t end = head.find("\r\n", pos);
    if (end == std::string::npos) end = head.size();
    std::string line = head.substr(pos, end - pos);
    size_t colon = line.find(':');
    if (colon != std::string::npos)
      reply.headers[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
    pos = end + 2;
  }
  size_t length = 0;
  auto cl = reply.header("content-length");
  if (!cl.empty()) length = std::stoull(cl);
  // No body after HEAD, 204 or 304, whatever Content-Length says (RFC 9112 6.3).
  if (method != "HEAD" && reply.status != 204 && reply.status != 304) {
    if (cl.empty()) {
      // Neither a length nor chunks (a streamed answer): the body ends
      // where the server closes the connection.
      for (;;) {
        if (left().count() <= 0 || !waitFor(fd_.get(), POLLIN, left()))
          return Error{"HttpClient: the streamed answer did not end within " +
                       std::to_string(timeout.count()) + " ms"};
        char buf[65536];
        ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
        if (n == 0) break;
        if (n < 0) {
          if (errno == EINTR || errno == EAGAIN) continue;
          return Error::fromErrno("HttpClient: recv()");
        }
        buffer_.append(buf, static_cast<size_t>(n));
      }
      reply.body = std::move(buffer_);
      buffer_.clear();
      closing_ = true;
      return reply;
    }
    if (auto s = fill([&] { return buffer_.size() >= length; }); !s) return s.error();
    reply.body = buffer_.substr(0, length);
    buffer_.erase(0, length);
  }
  closing_ = lower(reply.header("connection")) == "close";
  return reply;
}

}  // namespace ductus::test
