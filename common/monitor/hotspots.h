// Where a destination's backlog waits and why (GET /hotspots), from facts
// the store gathers: the waiting deliveries per lane and each lane's first
// one. Pure. A delivery loop handles its lanes one message at a time, so a
// lane whose first message has failed attempts is the one its loop is
// retrying, and every lane of that loop waits behind it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/monitor/settings.h"

namespace ductus::monitor {

// One lane with messages waiting, and its first one (the one its loop is on).
struct LaneFact {
  int32_t lane = 0;
  int64_t waiting = 0;
  int64_t firstMessageId = 0;
  std::string firstKey;        // the ordering key, "" when none
  int32_t firstAttempts = 0;   // failed attempts so far
  std::string firstLastError;  // its last error's text (hostile: quoted one line, bounded)
  std::optional<TimePoint> firstReceivedAt;
};

struct LaneFacts {
  int64_t waiting = 0;          // the destination's total (0: the lanes' sum)
  std::vector<LaneFact> lanes;  // lanes with messages waiting, any order
  // How the engine splits lanes across a destination's loops
  // (supervisor/engine.cpp): `loops` loops; with one, it reads every lane;
  // with more, loop s owns lanes s, s + loops, ... below `partitions`.
  uint32_t loops = 1;
  uint32_t partitions = 1;                // the interface's ordering.partitions now
  std::optional<TimePoint> lastFinished;  // the destination last finished a message
};

// "blocked-lane", "receiver-down", "hot-key", "unowned-lanes", and a sentence.
struct Finding {
  std::string kind, text;
};

// A hot key holds more than half of the backlog, and at least this many.
inline constexpr int64_t kHotKeyAtLeast = 100;

// The loop that owns a lane; none: no loop reads it (a lane at or above
// partitions after ordering.partitions was lowered, with several loops).
std::optional<uint32_t> loopOfLane(int32_t lane, uint32_t loops, uint32_t partitions);

// Blocked loops first (one finding each), then receiver-down, hot-key and
// unowned-lanes.
std::vector<Finding> findHotspots(const LaneFacts& facts);

}  // namespace ductus::monitor
