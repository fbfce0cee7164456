// Ownership of interfaces across engines sharing one database (issue #21):
// the SQL, on one async connection the caller owns (the engine's lock
// connection, or a command's own). Every value is a bound parameter.
//
// An engine is alive while the session advisory lock whose key its
// `engines` row records is granted (pg_locks): a crashed engine's backend
// goes with its socket, and with it the lock, so nobody waits out a
// heartbeat. Claims live in `interface_owners` (migrations 0002, 0008).
//
// claim() is one transaction, all or none, serialized across engines by a
// transaction-level advisory lock (kClaimLock): two engines claiming
// overlapping interfaces at the same moment queue on it, and the second
// sees the first's claims, and the first alive. Rows of dead engines are
// removed first, so a crash's claims never stop the next start.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "schema/pg_connection.h"

namespace ductus::store {

// pg_advisory_xact_lock key serializing every claim: "ductusow" as bytes.
constexpr int64_t kClaimLock = 0x6475637475736f77;

struct EngineRow {
  std::string id;
  std::string host;
  int64_t pid = 0;
  std::string version;
  int64_t lockKey = 0;  // the session advisory lock this engine holds
};

// Another live engine, as `GET /engine` and `ductusctl status` show it.
struct LiveEngine {
  std::string id, host, version;
  int64_t pid = 0;
  std::string startedAt;                // RFC 3339, UTC
  std::vector<std::string> interfaces;  // the names it owns, sorted
};

// An interface another live engine owns.
struct ClaimConflict {
  std::string interface;
  LiveEngine owner;   // `interfaces` left empty
  std::string since;  // when it claimed it (RFC 3339, UTC)
};

struct ClaimReport {
  std::vector<ClaimConflict> conflicts;  // not empty: nothing was claimed
  int64_t deadEngines = 0;               // dead engines whose rows were removed now
  int64_t deadClaims = 0;                // and their claims
};

// Lanes a lowered `ordering.partitions` would leave behind: pending
// messages whose partition_key is at or past the new count.
struct StrandedLane {
  std::string interface;
  int32_t lane = 0;
  int64_t waiting = 0;
};

struct LaneCount {
  std::string interface;
  uint32_t partitions = 1;
};

// Takes the session advisory lock `key` without waiting: true if taken
// (false: another session holds it).
void tryLockSession(PgConnection& conn, int64_t key, std::function<void(Result<bool>)> cb);

// In one transaction: records `me` (insert, or a new lock key and no longer
// stopped), marks dead engines stopped and drops their claims, then claims
// `interfaceIds` (sorted) unless another live engine owns one of them
// (then rolled back: the conflicts say who). `conn` must hold me.lockKey.
void claim(PgConnection& conn, const EngineRow& me, std::vector<int64_t> interfaceIds,
           std::function<void(Result<ClaimReport>)> cb);

// A clean stop: deletes `engineId`'s claims and marks its row stopped.
void release(PgConnection& conn, const std::string& engineId, std::function<void(Status)> cb);

// The live engines but `engineId`, oldest first, with what each owns.
void liveEngines(PgConnection& conn, const std::string& engineId,
                 std::function<void(Result<std::vector<LiveEngine>>)> cb);

// The lanes guard: for each interface (by name; one never started has no
// rows), its pending messages in lanes >= its partition count, by lane.
// Read-only.
void strandedLanes(PgConnection& conn, const std::vector<LaneCount>& interfaces,
                   std::function<void(Result<std::vector<StrandedLane>>)> cb);

// One refusal per interface: which lanes, how many wait, what to do.
std::vector<std::string> describeStranded(const std::vector<StrandedLane>& lanes,
                                          const std::vector<LaneCount>& interfaces);

// "adt-feed is owned by engine 3f2a... (host db1, pid 4242, since ...)".
std::string describeConflict(const ClaimConflict& c);

}  // namespace ductus::store
