// MllpReceiver: a downstream system for end-to-end tests. Listens on
// 127.0.0.1, one thread per connection, and answers each framed message
// with the code `decide` returns ("AA", "AE", "AR"). Records every message
// it answered AA, in arrival order.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ductus::test {

class MllpReceiver {
 public:
  // timesSeen counts earlier arrivals of the same MSH-10 (0 the first time).
  using Decide = std::function<std::string(const std::string& controlId, int timesSeen)>;

  explicit MllpReceiver(Decide decide = {});
  ~MllpReceiver();

  uint16_t port() const { return port_; }
  // MSH-10 of every message answered AA, in order of arrival.
  std::vector<std::string> accepted();
  // Raw bytes of every message answered AA.
  std::vector<std::string> acceptedMessages();
  int arrivals(const std::string& controlId);

 private:
  void serve(int fd);
  int listenFd_ = -1;
  uint16_t port_ = 0;
  Decide decide_;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::vector<std::thread> connections_;
  std::mutex mu_;
  std::vector<std::string> accepted_, messages_;
  std::map<std::string, int> seen_;
};

// MSH-10 of an HL7 message ("" if none).
std::string controlIdOf(const std::string& message);

}  // namespace ductus::test
