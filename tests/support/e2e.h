// What the end-to-end tests share: the demo HL7 message, the engine's
// minimal ductus.yaml, polling for a condition, and a sender that retries
// each message until it is acknowledged AA, as a real MLLP sender does.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/mllp_client.h"

namespace ductus::test {

inline const char* const kPassThrough = "export function transform(msg) { return msg; }\n";

// An ADT^A01 with this control id (MSH-10) for this patient (PID-3).
inline std::string hl7(const std::string& controlId, const std::string& mrn = "M1") {
  return "MSH|^~\\&|SEND|FAC|RECV|FAC|20260101120000||ADT^A01|" + controlId + "|P|2.5\r" +
         "PID|1||" + mrn + "^^^H||Doe^John\r";
}

inline std::string engineYaml() {
  return "api: { listen: off }\nisolates: { workers: 1, heap_mb: 256 }\n";
}

// Polls pred every 20 ms until it holds or the time is up; then its last say.
template <typename Pred, typename Rep, typename Period>
bool waitFor(Pred pred, std::chrono::duration<Rep, Period> timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

// Connects c to the engine's MLLP port if it isn't connected; false (after a
// 50 ms pause, for the caller to try again) while the engine isn't there.
inline bool ensureMllpConnected(std::optional<MllpClient>& c, uint16_t port) {
  using namespace std::chrono_literals;
  if (c) return true;
  auto r = MllpClient::connect("127.0.0.1", port, 1000ms);
  if (!r) {
    std::this_thread::sleep_for(50ms);
    return false;
  }
  c.emplace(std::move(*r));
  return true;
}

// Sends each (control id, message) until it is acknowledged AA, reconnecting
// when the engine goes away and sending again after an AE. Records what got
// AA in `acked` (and counts it in `total`, when given).
inline void sendAll(uint16_t port, const std::vector<std::pair<std::string, std::string>>& messages,
                    std::vector<std::string>& acked, std::atomic<bool>& stop,
                    std::atomic<size_t>* total = nullptr) {
  using namespace std::chrono_literals;
  std::optional<MllpClient> c;
  for (auto& [id, msg] : messages) {
    for (;;) {
      if (stop) return;
      if (!ensureMllpConnected(c, port)) continue;
      auto ack = c->exchange(msg, 10000ms);
      if (!ack) {
        c.reset();
        continue;
      }
      auto f = readAck(*ack);
      if (f.code == "AA" && f.controlId == id) {
        acked.push_back(id);
        if (total) ++*total;
        break;
      }
      std::this_thread::sleep_for(50ms);  // AE: the engine could not store it
    }
  }
}

}  // namespace ductus::test
