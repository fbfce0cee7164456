#include "tests/support/mllp_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "common/hl7/message.h"

namespace ductus::test {
namespace {

// Waits for `events` on fd; false on timeout.
bool waitFor(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  int rc;
  do rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
  while (rc < 0 && errno == EINTR);
  return rc > 0;
}

}  // namespace

Result<MllpClient> MllpClient::connect(const std::string& host, uint16_t port, Millis timeout) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, h.c_str(), &addr.sin_addr) != 1)
    return Error{"MllpClient: \"" + host + "\" is not an IPv4 address"};
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Error::fromErrno("MllpClient: socket()");
  int one = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) return Error::fromErrno("MllpClient: connect()");
    if (!waitFor(fd.get(), POLLOUT, timeout)) return Error{"MllpClient: connect() timed out"};
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return Error::fromErrno("MllpClient: connect()", err);
  }
  return MllpClient(std::move(fd));
}

std::string MllpClient::frame(std::string_view message) {
  std::string f;
  f.reserve(message.size() + 3);
  f += '\x0b';
  f += message;
  f += "\x1c\r";
  return f;
}

Status MllpClient::send(std::string_view message) { return sendRaw(frame(message)); }

Status MllpClient::sendRaw(std::string_view bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_.get(), bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!waitFor(fd_.get(), POLLOUT, Millis(10000))) return Error{"MllpClient: send timed out"};
      continue;
    }
    return Error::fromErrno("MllpClient: send()");
  }
  return {};
}

Result<std::string> MllpClient::readFrame(Millis timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    size_t start = buffer_.find('\x0b');
    if (start != std::string::npos) {
      size_t end = buffer_.find('\x1c', start);
      if (end != std::string::npos && end + 1 < buffer_.size()) {
        std::string inside = buffer_.substr(start + 1, end - start - 1);
        size_t after = end + 1;
        if (buffer_[after] == '\r') ++after;
        buffer_.erase(0, after);
        return inside;
      }
    }
    auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !waitFor(fd_.get(), POLLIN, left))
      return Error{"MllpClient: no answer within " + std::to_string(timeout.count()) + " ms"};
    char buf[65536];
    ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
    if (n == 0) return Error{"MllpClient: connection closed by the peer"};
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Error::fromErrno("MllpClient: recv()");
    }
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

Result<std::string> MllpClient::exchange(std::string_view message, Millis timeout) {
  if (auto s = send(message); !s) return s.error();
  return readFrame(timeout);
}

bool MllpClient::closedByPeer(Millis timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !waitFor(fd_.get(), POLLIN, left)) return false;
    char buf[4096];
    ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

AckFields readAck(std::string_view ack) {
  AckFields f;
  auto m = hl7::MessageView::parse(ack);
  if (!m) return f;
  f.code = std::string(m->get("MSA.1"));
  f.controlId = std::string(m->get("MSA.2"));
  f.text = m->getDecoded("MSA.3");
  return f;
}

}  // namespace ductus::test
