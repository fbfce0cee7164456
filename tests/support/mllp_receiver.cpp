#include "tests/support/mllp_receiver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ductus::test {

std::string controlIdOf(const std::string& message) {
  size_t end = message.find_first_of("\r\n");
  std::string msh = message.substr(0, end);
  size_t pos = 0;
  for (int field = 0; field < 9; ++field) {
    pos = msh.find('|', pos);
    if (pos == std::string::npos) return "";
    ++pos;
  }
  size_t stop = msh.find('|', pos);
  return msh.substr(pos, stop == std::string::npos ? std::string::npos : stop - pos);
}

MllpReceiver::MllpReceiver(Decide decide) : decide_(std::move(decide)) {
  listenFd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listenFd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(listenFd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  listen(listenFd_, 64);
  socklen_t len = sizeof a;
  getsockname(listenFd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] {
    while (!stop_) {
      pollfd p{listenFd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      int c = accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::lock_guard<std::mutex> g(mu_);
      connections_.emplace_back([this, c] { serve(c); });
    }
  });
}

MllpReceiver::~MllpReceiver() {
  stop_ = true;
  acceptor_.join();
  std::vector<std::thread> conns;
  {
    std::lock_guard<std::mutex> g(mu_);
    conns.swap(connections_);
  }
  for (auto& t : conns) t.join();
  close(listenFd_);
}

void MllpReceiver::serve(int fd) {
  std::string buf;
  char chunk[65536];
  while (!stop_) {
    pollfd p{fd, POLLIN, 0};
    int pr = poll(&p, 1, 100);
    if (pr == 0) continue;
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) break;
    buf.append(chunk, n);
    for (;;) {
      size_t start = buf.find('\x0b');
      size_t end = buf.find("\x1c\r", start == std::string::npos ? 0 : start);
      if (start == std::string::npos || end == std::string::npos) break;
      std::string msg = buf.substr(start + 1, end - start - 1);
      buf.erase(0, end + 2);
      std::string id = controlIdOf(msg);
      std::string code = "AA";
      {
        std::lock_guard<std::mutex> g(mu_);
        int times = seen_[id]++;
        if (decide_) code = decide_(id, times);
        if (code == "AA") {
          accepted_.push_back(id);
          messages_.push_back(msg);
        }
      }
      std::string ack = "\x0bMSH|^~\\&|RECV|R|SEND|S|20260101000000||ACK|A" + id +
                        "|P|2.5\rMSA|" + code + "|" + id + "\r\x1c\r";
      if (write(fd, ack.data(), ack.size()) != static_cast<ssize_t>(ack.size())) break;
    }
  }
  close(fd);
}

std::vector<std::string> MllpReceiver::accepted() {
  std::lock_guard<std::mutex> g(mu_);
  return accepted_;
}

std::vector<std::string> MllpReceiver::acceptedMessages() {
  std::lock_guard<std::mutex> g(mu_);
  return messages_;
}

int MllpReceiver::arrivals(const std::string& controlId) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = seen_.find(controlId);
  return it == seen_.end() ? 0 : it->second;
}

}  // namespace ductus::test
