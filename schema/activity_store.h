// Last activity as the monitor keeps it across restarts (tables
// interface_activity and destination_activity, migration 0010): when each
// interface last received and was first watched, when each destination
// last sent and last failed (with the error's text), and its trend
// baselines. The engine holds these in memory (supervisor/monitor/) and
// saves what changed every few seconds; this file is that save and the
// load at start.
//
// A stored time never moves back: a save keeps the later of the stored and
// the given time (watched_since the earlier), so two engines on one
// database, or an older save landing after a newer one, never undo each
// other. Any number of rows is saved in at most two statements (one per
// table, the rows as arrays unnested), so a project of 1,000 interfaces
// costs the database two round trips every few seconds, not 1,000.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "schema/pg_pool.h"

namespace ductus::store {

using ActivityTime = std::chrono::system_clock::time_point;

// An error's text is a peer's words: stored as database text, at most this long.
inline constexpr size_t kMaxErrorTextBytes = 1000;

struct InterfaceActivityRow {
  int64_t interfaceId = 0;
  std::optional<ActivityTime> lastReceived;
  std::optional<ActivityTime> watchedSince;
};

// A baseline: one value per hour of the week (168), nullopt where nothing
// was learned yet. Empty: none (loaded), or keep the stored one (saved).
using Baseline = std::vector<std::optional<double>>;

struct DestinationActivityRow {
  int64_t destinationId = 0;
  std::optional<ActivityTime> lastSent;
  std::optional<ActivityTime> lastError;
  // Stored with lastError when that is later than the stored one: the text
  // always belongs to the time beside it.
  std::string lastErrorText;
  Baseline baselineIn;
  Baseline baselineSendMs;
};

struct ActivityRows {
  std::vector<InterfaceActivityRow> interfaces;  // by id
  std::vector<DestinationActivityRow> destinations;
};
// What a save writes: only the rows that changed.
using ActivityChanges = ActivityRows;

// Every stored row, on a connection of the pool.
void loadActivity(PgPool& pool, std::function<void(Result<ActivityRows>)> done);

// Writes the changes (at most one statement per table; none for an empty
// side). An id the registry doesn't have fails the statement (its foreign key).
void saveActivity(PgPool& pool, ActivityChanges changes, std::function<void(Status)> done);

}  // namespace ductus::store
