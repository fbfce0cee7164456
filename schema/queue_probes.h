// What the monitor asks of the delivery queues beyond the engine's own
// counts, read from the queue index (deliveries_queue: destination, message
// id, lane; pending rows only), so each answer walks index entries, not a
// backlog's rows:
// - oldestWaiting: per destination, when the first message still waiting
//   was received (one index probe each: a destination is "behind" when that
//   is too long ago);
// - lanes: per lane (partition_key) of one destination, how many wait and
//   the first one (the one its loop is on), for the hotspots view.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "schema/pg_pool.h"

namespace ductus::store {

using QueueTime = std::chrono::system_clock::time_point;

// destination id -> the received_at of its first waiting delivery's
// message (by message id, the order it is delivered in). A destination
// with nothing waiting is absent.
void oldestWaiting(PgPool& pool, std::vector<int64_t> destinationIds,
                   std::function<void(Result<std::map<int64_t, QueueTime>>)> done);

struct LaneRow {
  int32_t lane = 0;
  int64_t waiting = 0;
  // The lane's first waiting message:
  int64_t firstMessageId = 0;
  std::string key;  // the ordering key's value (messages.key_value), "" when none
  int32_t attempts = 0;
  std::string lastError;  // "" when none
  QueueTime receivedAt{};
};

// Bounds what one lanes() call returns.
inline constexpr int kMaxLanesProbed = 1000;

// The destination's lanes with something waiting, most waiting first (then
// by lane), at most `limit` (1..kMaxLanesProbed).
void lanes(PgPool& pool, int64_t destinationId, int limit,
           std::function<void(Result<std::vector<LaneRow>>)> done);

// The statements, for a test to EXPLAIN.
std::string oldestWaitingSql();
std::string lanesSql();

}  // namespace ductus::store
