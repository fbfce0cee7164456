#include "supervisor/delivery/transformer.h"

namespace ductus::delivery {

const char* outcomeKindName(Outcome::Kind kind) {
  switch (kind) {
    case Outcome::Kind::Output: return "output";
    case Outcome::Kind::Filtered: return "filtered";
    case Outcome::Kind::Quarantine: return "quarantine";
    case Outcome::Kind::Transient: return "transient";
    case Outcome::Kind::RunawayTimeout: return "runaway-timeout";
    case Outcome::Kind::RunawayHeap: return "runaway-heap";
    case Outcome::Kind::Stopped: return "stopped";
  }
  return "unknown";
}

}  // namespace ductus::delivery
