// Real receivers on 127.0.0.1 for the sender and service tests, each on a thread of its
// own with blocking sockets, so they are independent of the libuv loop the
// senders run on (a sender that blocked the loop could not hide behind
// them).
#pragma once

#include <uv.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/fd.h"
#include "tests/support/ports.h"
#include "tests/support/run_until.h"

namespace ductus::senders::test {

// Binds 127.0.0.1:port (0 = any free port) and listens.
Fd listenOn(uint16_t port, uint16_t* boundPort = nullptr);

// A port nothing listens on for as long as the socket is held.
using ductus::test::closedPort;
using ductus::test::runUntil;

// What an MLLP receiver does with one message.
struct MllpReply {
  std::string bytes;        // written back as is (frame it yourself)
  bool closeAfter = false;  // then hang up
};
std::string mllpFrame(const std::string& message);
// An HL7 ACK with MSA-1 = code and MSA-3 = text, '|' separated.
std::string hl7Ack(const std::string& code, const std::string& text = "");

class MllpReceiver {
 public:
  using Handler = std::function<MllpReply(const std::string& message)>;
  // Listens on `bound` (a closedPort(), opened now) or, without one, on a
  // port of the kernel's.
  explicit MllpReceiver(Handler handler, Fd bound = Fd());
  ~MllpReceiver();

  uint16_t port() const { return port_; }
  std::vector<std::string> messages();
  int connections() const { return connections_; }
  void setHandler(Handler h);
  // Holds each answer this long, then looks whether the sender wrote
  // anything before getting it; earlyFrames() counts the times it had.
  void holdAnswers(std::chrono::milliseconds d) { hold_ = d; }
  int earlyFrames() const { return early_; }

 private:
  void run();
  void serve(int fd);

  Fd listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  Handler handler_;
  std::vector<std::string> messages_;
  std::atomic<int> connections_{0};
  std::atomic<std::chrono::milliseconds> hold_{std::chrono::milliseconds(0)};
  std::atomic<int> early_{0};
  std::thread thread_;
};

// A small HTTP/1.1 server: one thread per connection, Connection: close.
// The path chooses the answer: /status/<code>, /slow/<ms> (200 after ms),
// anything else 200.
struct HttpRequestSeen {
  std::string method, path, body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string header(const std::string& name) const;
};

class HttpReceiver {
 public:
  HttpReceiver();
  ~HttpReceiver();

  uint16_t port() const { return port_; }
  std::string url(const std::string& path) const;
  std::vector<HttpRequestSeen> requests();
  int peakConcurrent() const { return peak_; }

 private:
  void run();
  void serve(Fd conn);

  Fd listener_;
  uint16_t port_ = 0;
  std::mutex mu_;
  std::vector<HttpRequestSeen> requests_;
  std::vector<std::thread> workers_;
  std::atomic<int> active_{0};
  std::atomic<int> peak_{0};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace ductus::senders::test
