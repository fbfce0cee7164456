// A streaming MLLP sender for the tests that break PostgreSQL under an
// engine (a stop, a kill, a failover): every message a new control id,
// every answer recorded, and the query that lists what was stored.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/e2e.h"  // ensureMllpConnected, hl7, readAck

namespace ductus::test {

// MSH-10 of each stored HL7 message of an interface (the 10th '|' field).
inline const char* const kStoredControlIds =
    "SELECT split_part(convert_from(m.payload, 'LATIN1'), '|', 10) FROM messages m "
    "JOIN interfaces i ON i.id = m.interface_id WHERE i.name = $1";

// One answer a streaming sender got (or did not get).
struct Answer {
  std::string id;
  std::string code;         // "AA", "AE", "202", "503", ... or "" when none came
  std::string error;        // why none came
  bool retryAfter = false;  // HTTP: a Retry-After header was there
  bool idMatches = true;    // MLLP: MSA-2 was the message's MSH-10
  std::chrono::steady_clock::time_point sent, answered;
};

class Answers {
 public:
  using Time = std::chrono::steady_clock::time_point;
  void add(Answer a) {
    std::lock_guard lock(mu_);
    all_.push_back(std::move(a));
  }
  std::vector<Answer> all() {
    std::lock_guard lock(mu_);
    return all_;
  }
  // Answers with `code` to messages sent after `after`.
  size_t countSince(const std::string& code, Time after) {
    std::lock_guard lock(mu_);
    size_t n = 0;
    for (auto& a : all_)
      if (a.code == code && a.sent >= after) ++n;
    return n;
  }
  // An answer other than AA (AE, a lost connection) to a message sent
  // after `after`.
  bool refusedSince(Time after) {
    std::lock_guard lock(mu_);
    for (auto& a : all_)
      if (a.code != "AA" && a.sent >= after) return true;
    return false;
  }

 private:
  std::mutex mu_;
  std::vector<Answer> all_;
};

// Sends a new message (a new MSH-10, prefix + sequence, never sent again)
// every `pause` on one connection, reconnecting when it is lost, and
// records every answer, waiting up to `timeout` for each.
inline void streamMllp(uint16_t port, Answers& out, std::atomic<bool>& stop,
                       const std::string& prefix = "PGM-",
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(5000),
                       std::chrono::milliseconds pause = std::chrono::milliseconds(10)) {
  std::optional<MllpClient> c;
  for (int seq = 0; !stop; ++seq) {
    if (!ensureMllpConnected(c, port)) continue;
    Answer a;
    a.id = prefix + std::to_string(seq);
    a.sent = std::chrono::steady_clock::now();
    auto ack = c->exchange(hl7(a.id, "MRN" + std::to_string(seq % 7)), timeout);
    a.answered = std::chrono::steady_clock::now();
    if (!ack) {
      a.error = ack.error().message;
      c.reset();
    } else {
      auto f = readAck(*ack);
      a.code = f.code;
      a.idMatches = f.controlId == a.id;
    }
    out.add(std::move(a));
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace ductus::test
