#include "supervisor/workers/call_table.h"

#include <algorithm>

namespace ductus::supervisor {

std::optional<InFlight> CallTable::take(uint64_t callId) {
  auto it = calls_.find(callId);
  if (it == calls_.end()) return std::nullopt;
  InFlight call = std::move(it->second);
  calls_.erase(it);
  return call;
}

const InFlight* CallTable::find(uint64_t callId) const {
  auto it = calls_.find(callId);
  return it == calls_.end() ? nullptr : &it->second;
}

InFlight* CallTable::oldestOverdue(std::chrono::steady_clock::time_point now,
                                   std::chrono::steady_clock::time_point lastHeard) {
  InFlight* oldest = nullptr;
  for (auto& [id, c] : calls_) {
    auto from = std::max(c.sentAt, lastHeard);
    if (now - from >= c.silence && (!oldest || c.sentAt < oldest->sentAt)) oldest = &c;
  }
  return oldest;
}

}  // namespace ductus::supervisor
