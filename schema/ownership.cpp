#include "schema/ownership.h"

#include <algorithm>
#include <map>
#include <memory>

#include "schema/pg_binary.h"

namespace ductus::store {
namespace pb = pgbinary;

namespace {

// Whether engine row `e` is alive: its session lock granted in this
// database. pg_advisory_lock(bigint) shows in pg_locks as classid = the
// key's high 32 bits, objid = its low 32 bits, objsubid = 1. Keys are
// positive (Ownership picks them so), so both halves fit an oid.
constexpr const char* kAlive = R"(
  (e.lock_key IS NOT NULL AND EXISTS (
     SELECT 1 FROM pg_locks l
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND l.classid = (e.lock_key >> 32)::oid
        AND l.objid = (e.lock_key & 4294967295)::oid)))";

std::string rfc3339(const char* column) {
  return std::string("to_char(") + column +
         " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')";
}

const std::string kUpsertEngine = R"(
  INSERT INTO engines (id, host, pid, version, lock_key) VALUES ($1, $2, $3, $4, $5)
  ON CONFLICT (id) DO UPDATE SET lock_key = EXCLUDED.lock_key, stopped_at = NULL)";

// Dead: not stopped cleanly and its lock not held. Their claims go with
// them, as do claims left by engines already marked stopped.
const std::string kRemoveDead = std::string(R"(
  WITH dead AS (
    UPDATE engines e SET stopped_at = now()
     WHERE e.stopped_at IS NULL AND e.id <> $1 AND NOT )") +
                                kAlive + R"(
    RETURNING e.id),
  gone AS (
    DELETE FROM interface_owners o
     WHERE o.engine_id IN (SELECT id FROM dead)
        OR o.engine_id IN (SELECT id FROM engines WHERE stopped_at IS NOT NULL)
    RETURNING 1)
  SELECT (SELECT count(*) FROM dead), (SELECT count(*) FROM gone))";

// What other engines own of ours; after kRemoveDead only live owners remain.
const std::string kConflicts = R"(
  SELECT i.name, e.id, e.host, e.pid, e.version, )" +
                               rfc3339("e.started_at") + ", " + rfc3339("o.claimed_at") + R"(
    FROM interface_owners o
    JOIN engines e ON e.id = o.engine_id
    JOIN interfaces i ON i.id = o.interface_id
   WHERE o.interface_id = ANY($1) AND o.engine_id <> $2
   ORDER BY o.interface_id)";

const std::string kInsertClaims = R"(
  INSERT INTO interface_owners (interface_id, engine_id)
  SELECT id, $2 FROM unnest($1::bigint[]) AS c(id) ORDER BY id
  ON CONFLICT (interface_id) DO NOTHING)";

// Then engines stopped a month ago are forgotten.
const std::string kForgetOld = R"(
  DELETE FROM engines e
   WHERE e.stopped_at < now() - interval '30 days'
     AND NOT EXISTS (SELECT 1 FROM interface_owners o WHERE o.engine_id = e.id))";

struct ClaimRun {
  PgConnection& conn;
  EngineRow me;
  std::vector<int64_t> ids;
  std::function<void(Result<ClaimReport>)> cb;
  ClaimReport report;

  // Ends the transaction, then answers: the error, or the report.
  void finish(std::optional<Error> error, bool commit) {
    auto self = std::move(cb);
    auto report = std::move(this->report);
    conn.script(commit && !error ? "COMMIT" : "ROLLBACK",
                [self, error, report](Result<PgResult> r) mutable {
                  // ROLLBACK answers even in an aborted transaction; keep the cause.
                  if (error) return self(*error);
                  if (!r) return self(r.error());
                  self(std::move(report));
                });
  }
};

}  // namespace

void tryLockSession(PgConnection& conn, int64_t key, std::function<void(Result<bool>)> cb) {
  conn.query("SELECT pg_try_advisory_lock($1)", {std::to_string(key)}, [cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    cb(r->rows() == 1 && r->text(0, 0) == "t");
  });
}

void claim(PgConnection& conn, const EngineRow& me, std::vector<int64_t> interfaceIds,
           std::function<void(Result<ClaimReport>)> cb) {
  std::sort(interfaceIds.begin(), interfaceIds.end());
  auto run =
      std::make_shared<ClaimRun>(ClaimRun{conn, me, std::move(interfaceIds), std::move(cb), {}});
  auto step = [run](std::function<void(PgResult&)> next) {
    return [run, next](Result<PgResult> r) {
      if (!r) return run->finish(r.error(), false);
      next(*r);
    };
  };
  std::string ids = pb::int8Array(run->ids);
  conn.script("BEGIN", [](Result<PgResult>) {});  // a failure shows in the next statement
  conn.query("SELECT pg_advisory_xact_lock($1)", {std::to_string(kClaimLock)}, step([=](PgResult&) {
               PgConnection* c = &run->conn;
               c->query(kUpsertEngine,
                        {run->me.id, run->me.host, std::to_string(run->me.pid), run->me.version,
                         std::to_string(run->me.lockKey)},
                        step([=](PgResult&) {
                          c->query(kRemoveDead, {run->me.id}, step([=](PgResult& dead) {
                                     run->report.deadEngines = dead.integer(0, 0);
                                     run->report.deadClaims = dead.integer(0, 1);
                                     c->query(kConflicts, {ids, run->me.id}, {1, 0},
                                              step([=](PgResult& r) {
                                                for (int i = 0; i < r.rows(); ++i) {
                                                  ClaimConflict k;
                                                  k.interface = r.text(i, 0);
                                                  k.owner.id = r.text(i, 1);
                                                  k.owner.host = r.text(i, 2);
                                                  k.owner.pid = r.integer(i, 3);
                                                  k.owner.version = r.text(i, 4);
                                                  k.owner.startedAt = r.text(i, 5);
                                                  k.since = r.text(i, 6);
                                                  run->report.conflicts.push_back(std::move(k));
                                                }
                                                // All or none: someone else's claim rolls back ours
                                                // (and the row saying we ran).
                                                if (!run->report.conflicts.empty())
                                                  return run->finish(std::nullopt, false);
                                                c->query(kInsertClaims, {ids, run->me.id}, {1, 0},
                                                         step([=](PgResult&) {
                                                           c->query(
                                                               kForgetOld, {}, step([=](PgResult&) {
                                                                 run->finish(std::nullopt, true);
                                                               }));
                                                         }));
                                              }));
                                   }));
                        }));
             }));
}

void release(PgConnection& conn, const std::string& engineId, std::function<void(Status)> cb) {
  conn.query(R"(
    WITH gone AS (DELETE FROM interface_owners WHERE engine_id = $1 RETURNING 1)
    UPDATE engines SET stopped_at = now() WHERE id = $1)",
             {engineId}, [cb](Result<PgResult> r) {
               if (!r) return cb(r.error());
               cb({});
             });
}

void liveEngines(PgConnection& conn, const std::string& engineId,
                 std::function<void(Result<std::vector<LiveEngine>>)> cb) {
  static const std::string sql = std::string(R"(
    SELECT e.id, e.host, e.pid, e.version, )") +
                                 rfc3339("e.started_at") + R"(, i.name
      FROM engines e
      LEFT JOIN interface_owners o ON o.engine_id = e.id
      LEFT JOIN interfaces i ON i.id = o.interface_id
     WHERE e.stopped_at IS NULL AND e.id <> $1 AND )" +
                                 kAlive + R"(
     ORDER BY e.started_at, e.id, i.name)";
  conn.query(sql, {engineId}, [cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    std::vector<LiveEngine> out;
    for (int i = 0; i < r->rows(); ++i) {
      std::string id(r->text(i, 0));
      if (out.empty() || out.back().id != id) {
        LiveEngine e;
        e.id = id;
        e.host = r->text(i, 1);
        e.pid = r->integer(i, 2);
        e.version = r->text(i, 3);
        e.startedAt = r->text(i, 4);
        out.push_back(std::move(e));
      }
      if (!r->isNull(i, 5)) out.back().interfaces.emplace_back(r->text(i, 5));
    }
    cb(std::move(out));
  });
}

void strandedLanes(PgConnection& conn, const std::vector<LaneCount>& interfaces,
                   std::function<void(Result<std::vector<StrandedLane>>)> cb) {
  std::vector<std::string> names;
  std::vector<int32_t> counts;
  for (auto& i : interfaces) {
    names.push_back(i.interface);
    counts.push_back(static_cast<int32_t>(i.partitions));
  }
  // messages_pending (interface_id, partition_key, id) WHERE status = 0
  // answers each interface from its lanes past the count alone.
  static const std::string sql = R"(
    SELECT c.name, m.partition_key, count(*)
      FROM unnest($1::text[], $2::integer[]) AS c(name, partitions)
      JOIN interfaces i ON i.name = c.name
      JOIN messages m ON m.interface_id = i.id AND m.status = 0
                     AND m.partition_key >= c.partitions
     GROUP BY c.name, m.partition_key
     ORDER BY c.name, m.partition_key)";
  conn.query(sql, {pb::bytesArray(pb::kText, names), pb::int4Array(counts)}, {1, 1},
             [cb](Result<PgResult> r) {
               if (!r) return cb(r.error());
               std::vector<StrandedLane> out;
               for (int i = 0; i < r->rows(); ++i)
                 out.push_back({std::string(r->text(i, 0)), static_cast<int32_t>(r->integer(i, 1)),
                                r->integer(i, 2)});
               cb(std::move(out));
             });
}

std::vector<std::string> describeStranded(const std::vector<StrandedLane>& lanes,
                                          const std::vector<LaneCount>& interfaces) {
  std::map<std::string, uint32_t> count;
  for (auto& i : interfaces) count[i.interface] = i.partitions;
  std::vector<std::string> out;
  for (size_t i = 0; i < lanes.size();) {
    const std::string& name = lanes[i].interface;
    int64_t waiting = 0;
    std::string list;
    int32_t highest = 0;
    for (; i < lanes.size() && lanes[i].interface == name; ++i) {
      waiting += lanes[i].waiting;
      highest = std::max(highest, lanes[i].lane);
      list += (list.empty() ? "" : ", ") + std::to_string(lanes[i].lane);
    }
    uint32_t n = count[name];
    out.push_back(name + ": ordering.partitions " + std::to_string(n) + " would leave " +
                  std::to_string(waiting) + " pending message(s) in lane(s) " + list +
                  ", which no delivery loop would read. Set ordering.partitions back to at least " +
                  std::to_string(highest + 1) +
                  " until they are delivered (or resend or dismiss them), then lower it");
  }
  return out;
}

std::string describeConflict(const ClaimConflict& c) {
  return c.interface + " is owned by engine " + c.owner.id + " (host " + c.owner.host + ", pid " +
         std::to_string(c.owner.pid) + ", version " + c.owner.version + ", started " +
         c.owner.startedAt + "), claimed since " + c.since;
}

}  // namespace ductus::store
