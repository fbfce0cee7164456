// MllpClient: a blocking MLLP sender for tests. Frames a message
// (0x0B … 0x1C 0x0D), writes it, and reads one framed answer back, each step
// bounded by a timeout so a test that gets no ACK fails instead of hanging.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/fd.h"
#include "common/result.h"

namespace ductus::test {

class MllpClient {
 public:
  using Millis = std::chrono::milliseconds;

  // Connects over TCP (IPv4 address or "localhost").
  static Result<MllpClient> connect(const std::string& host, uint16_t port,
                                    Millis timeout = Millis(5000));

  // "\x0b" + message + "\x1c\r".
  static std::string frame(std::string_view message);

  // Writes the framed message.
  [[nodiscard]] Status send(std::string_view message);
  // Writes bytes as they are (for split frames, garbage, several frames).
  [[nodiscard]] Status sendRaw(std::string_view bytes);
  // Reads one framed answer and returns what is inside the frame. Bytes
  // after it stay buffered for the next call. Fails on timeout or EOF.
  Result<std::string> readFrame(Millis timeout = Millis(5000));
  // send + readFrame.
  Result<std::string> exchange(std::string_view message, Millis timeout = Millis(5000));
  // True when the peer has closed the connection (EOF within the timeout).
  bool closedByPeer(Millis timeout = Millis(2000));

  int fd() const { return fd_.get(); }

 private:
  explicit MllpClient(Fd fd) : fd_(std::move(fd)) {}
  Fd fd_;
  std::string buffer_;
};

// The MSA-1 (AA, AE, AR, CA…) and MSA-2 of an ACK, read with its own
// delimiters; empty strings when the ACK has no MSA.
struct AckFields {
  std::string code;
  std::string controlId;
  std::string text;
};
AckFields readAck(std::string_view ack);

}  // namespace ductus::test
