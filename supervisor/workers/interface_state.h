// What the worker pool keeps of one interface: its code (as the load message
// every worker of its group is sent), its function ids, and whether it is
// stopped, and why. The stop rule lives here: three runaway timeouts in a
// row, or one heap overflow.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "proto/worker_messages.h"
#include "supervisor/delivery/transformer.h"
#include "supervisor/workers/interface_spec.h"

namespace ductus::supervisor {

struct WorkerGroup;  // the workers that run it (worker_pool.cpp)

struct InterfaceState {
  InterfaceSpec spec;
  proto::Load load;  // its modules and functions, with their ids
  uint32_t id = 0;
  std::vector<delivery::Transformer::FunctionId> functions;
  WorkerGroup* group = nullptr;
  int consecutiveTimeouts = 0;
  bool stopped = false;
  std::string stopReason;
  // Hears the first load verdict (addInterface, restartInterface).
  std::function<void(Status)> loaded;

  // Counts a call's outcome toward the stop rule; why it must stop now, if
  // it must.
  std::optional<std::string> judge(delivery::Outcome::Kind kind, int timeoutsToStop) {
    switch (kind) {
      case delivery::Outcome::Kind::RunawayTimeout:
        if (++consecutiveTimeouts >= timeoutsToStop)
          return std::to_string(consecutiveTimeouts) + " runaway timeouts in a row";
        return std::nullopt;
      case delivery::Outcome::Kind::RunawayHeap: return "a script ran over the heap limit";
      case delivery::Outcome::Kind::Output:
      case delivery::Outcome::Kind::Filtered:
      case delivery::Outcome::Kind::Quarantine: consecutiveTimeouts = 0; return std::nullopt;
      default: return std::nullopt;
    }
  }
};

}  // namespace ductus::supervisor
