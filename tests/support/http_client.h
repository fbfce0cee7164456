// HttpClient: a blocking HTTP/1.1 client for tests, one connection kept
// alive between requests. Each step is bounded by a timeout so a test that
// gets no answer fails instead of hanging. Bodies are read by
// Content-Length (what the engine's server always sends).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "common/fd.h"
#include "common/result.h"

namespace ductus::test {

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string header(const std::string& lowerName) const {
    auto it = headers.find(lowerName);
    return it == headers.end() ? std::string() : it->second;
  }
};

class HttpClient {
 public:
  using Millis = std::chrono::milliseconds;

  static Result<HttpClient> connect(uint16_t port, Millis timeout = Millis(5000));

  // Sends one request and reads its answer. Fails on a timeout, a closed
  // connection or an unreadable answer; the client is unusable after that.
  Result<HttpReply> request(const std::string& method, const std::string& path,
                            const std::string& body = {},
                            const std::map<std::string, std::string>& headers = {},
                            Millis timeout = Millis(5000));
  // Whether the server said it would close the connection after the last answer.
  bool closing() const { return closing_; }

 private:
  explicit HttpClient(Fd fd) : fd_(std::move(fd)) {}
  Fd fd_;
  std::string buffer_;
  bool closing_ = false;
};

}  // namespace ductus::test
