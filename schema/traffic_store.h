// Traffic per minute (table traffic_minutes, migration 0016): what each
// interface received and each destination sent, filtered and quarantined,
// minute by minute, for the console's charts. The engine adds its counts
// once a minute (supervisor/monitor/traffic_rollup.h), any number of rows
// in one statement; the API reads them summed into steps of a minute or an
// hour (GET /api/v1/interfaces/{name}/stats).
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

// How long the rows are kept: the charts go back a week; a month leaves
// room to compare.
inline constexpr std::chrono::hours kTrafficKeep{24 * 30};

// destinationId 0: the interface's intake (received). minute: seconds
// since the epoch, a whole minute.
struct TrafficRow {
  int64_t interfaceId = 0;
  int64_t destinationId = 0;
  int64_t minute = 0;
  int64_t received = 0, sent = 0, filtered = 0, quarantined = 0;
};

// Adds the rows to what is stored (two engines, or two writes of one
// minute, add up): one statement.
void addTraffic(PgPool& pool, const std::vector<TrafficRow>& rows,
                std::function<void(Status)> done);

// Deletes rows older than `keep`, at most `batch` of them (an hour's worth
// at a time keeps each delete short); the count deleted.
void purgeTraffic(PgPool& pool, std::chrono::hours keep, int64_t batch,
                  std::function<void(Result<int64_t>)> done);

// One step's sums for the intake (destination "" ) or a destination.
struct TrafficPoint {
  int64_t at = 0;  // the step's start, seconds since the epoch
  std::string destination;
  int64_t received = 0, sent = 0, filtered = 0, quarantined = 0;
};
struct TrafficSeries {
  bool interfaceFound = false;
  int64_t interfaceId = 0;
  std::vector<std::string> destinations;  // every one of the interface's, by name
  std::map<int64_t, std::string> destinationNames;  // by id
  std::vector<TrafficPoint> points;       // steps with something in them, by time
};

// The interface's traffic in [from, to) (seconds since the epoch), summed
// into steps of `stepSeconds` (60 or 3600) aligned to the epoch.
void readTraffic(PgPool& pool, const std::string& interfaceName, int64_t from, int64_t to,
                 int64_t stepSeconds, std::function<void(Result<TrafficSeries>)> done);

}  // namespace ductus::store
