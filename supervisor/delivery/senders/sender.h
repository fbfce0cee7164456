// Sender: the one interface every destination kind (MLLP, HTTP, file)
// implements. The delivery loop hands it one transformed message at a time
// and maps the outcome onto the delivery row: Sent settles it, Transient
// backs off and retries the same message (order kept), Permanent
// quarantines it. Senders know nothing of the store or the config: the
// delivery loop maps a destination's settings onto each sender's own
// settings struct.
//
// Rules every implementation keeps:
// - send() never blocks the loop and never calls its callback before it
//   returns; the callback runs exactly once, on the loop.
// - close() ends the sender: requests still in flight get their callback
//   (Transient "sender closed" where they could not finish), then `done`
//   runs once every handle is closed. The sender may be destroyed after
//   `done`; send() after close() answers Transient.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ductus::senders {

struct SendRequest {
  int64_t messageId = 0;
  std::string interfaceName;
  std::string destinationName;
  // The bytes to deliver, exactly as the transform produced them (HL7 v2
  // may be ISO-8859-1; nothing here assumes UTF-8).
  std::string payload;
  // HTTP only, from the transform's output when it sets them: the method
  // (else the destination's) and headers that replace the destination's
  // headers of the same name. Other senders ignore them.
  std::optional<std::string> method;
  std::vector<std::pair<std::string, std::string>> headers;
  // For a sender with pipelineDepth() > 1: requests of one stream (not 0)
  // become visible at the receiver in the order they were sent.
  uint64_t stream = 0;
};

enum class SendOutcomeKind { Sent, Transient, Permanent };

struct SendOutcome {
  SendOutcomeKind kind = SendOutcomeKind::Transient;
  // Why, for last_error and the log: "HTTP 404 Not Found: <first 200 bytes>",
  // "AE: <MSA-3>", "connect 10.0.0.1:2575: Connection refused". Empty for a
  // plain success.
  std::string detail;

  static SendOutcome sent(std::string detail = {}) {
    return {SendOutcomeKind::Sent, std::move(detail)};
  }
  static SendOutcome transient(std::string detail) {
    return {SendOutcomeKind::Transient, std::move(detail)};
  }
  static SendOutcome permanent(std::string detail) {
    return {SendOutcomeKind::Permanent, std::move(detail)};
  }
};

inline const char* toString(SendOutcomeKind kind) {
  switch (kind) {
    case SendOutcomeKind::Sent: return "sent";
    case SendOutcomeKind::Transient: return "transient";
    case SendOutcomeKind::Permanent: return "permanent";
  }
  return "unknown";
}

class Sender {
 public:
  using SendCallback = std::function<void(SendOutcome)>;

  virtual ~Sender() = default;
  virtual void send(SendRequest request, SendCallback cb) = 0;
  // How many sends of one stream may be in flight at once. 1 (MLLP, HTTP:
  // the receiver sees them in the order it answers them): the caller waits
  // for each outcome. Above 1 the sender keeps a stream's order itself:
  // a request is made visible only after the one sent before it was, and
  // once one fails, the later ones of its stream fail too (Transient),
  // leaving nothing behind.
  virtual size_t pipelineDepth() const { return 1; }
  virtual void close(std::function<void()> done) = 0;

  // A stream (SendRequest::stream) this sender has never handed out: each
  // of a destination's loops (one per slot) shares its sender, so the
  // sender, not a loop, keeps their streams apart.
  uint64_t newStream() { return ++lastStream_; }

 private:
  uint64_t lastStream_ = 0;
};

}  // namespace ductus::senders
