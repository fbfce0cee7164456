// Transformer: the seam between delivery and the scripts. A delivery loop
// asks it to run one function of an interface's code on one payload and
// hears one Outcome back, on the loop. The engine's WorkerPool implements it
// with confined worker processes; the delivery loop's tests implement it
// with a fake that answers when and how a test says.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/call_meta.h"

namespace ductus::delivery {

// What a call knows of the message besides its bytes (common/call_meta.h).
using ductus::CallMeta;

struct Outcome {
  enum class Kind {
    Output,          // data = the output bytes
    Filtered,        // data = the reason (may be empty)
    Quarantine,      // data = the message and the script's stack
    Transient,       // data = why; the message waits and is retried
    RunawayTimeout,  // quarantine the message: its script ran past the timeout
    RunawayHeap,     // quarantine the message: its script blew the heap limit
    Stopped,         // not run: the interface is stopped; the message stays pending
  };
  Kind kind;
  std::string data;
};

const char* outcomeKindName(Outcome::Kind kind);

class Transformer {
 public:
  using FunctionId = uint32_t;
  using OutcomeCallback = std::function<void(Outcome)>;

  virtual ~Transformer() = default;
  // Runs function `fn` on `payload`; `done` is called exactly once, on the
  // loop. It may be called before invoke() returns, when the answer is known
  // at once (an unknown function, a stopped interface).
  virtual void invoke(FunctionId fn, std::string payload, CallMeta meta,
                      OutcomeCallback done) = 0;
};

}  // namespace ductus::delivery
