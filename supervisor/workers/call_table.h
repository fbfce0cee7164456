// The calls one worker holds: sent, not yet answered. The pool answers each
// exactly once: from the worker's outcome (take), or when the worker is gone
// (takeAll). Its runaway rule reads it too: a call is overdue when the
// worker has said nothing for the call's timeout + grace since the later of
// its send and the worker's last frame (calls queue in a worker behind each
// other, and a backlog of healthy calls is progress, not a runaway).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "supervisor/delivery/transformer.h"

namespace ductus::supervisor {

struct InterfaceState;

struct InFlight {
  uint64_t callId = 0;
  InterfaceState* iface = nullptr;
  std::chrono::steady_clock::time_point sentAt;
  // timeout + grace: how long the worker may stay silent while it holds
  // this call before it is SIGKILLed.
  std::chrono::milliseconds silence{0};
  delivery::Transformer::OutcomeCallback done;
  bool culprit = false;  // overdue: its worker was killed for it
  bool dryRun = false;   // WorkerPool::dryRun: services mocked, no stop rule
  int64_t messageId = 0;  // the call's meta, for a runaway's event
  std::string destination;
};

class CallTable {
 public:
  using Calls = std::unordered_map<uint64_t, InFlight>;

  void add(InFlight call) { calls_[call.callId] = std::move(call); }
  // The call, out of the table; none when settled already (its worker was
  // killed meanwhile) or never sent to this worker.
  std::optional<InFlight> take(uint64_t callId);
  // Every call, out of the table (the worker is gone).
  Calls takeAll() { return std::exchange(calls_, {}); }
  const InFlight* find(uint64_t callId) const;

  // Of the overdue calls, the one sent first: the one the worker was
  // running (the others queued behind it). None when no call is overdue.
  InFlight* oldestOverdue(std::chrono::steady_clock::time_point now,
                          std::chrono::steady_clock::time_point lastHeard);

  size_t size() const { return calls_.size(); }
  bool empty() const { return calls_.empty(); }

 private:
  Calls calls_;
};

}  // namespace ductus::supervisor
