#include "schema/queue_probes.h"

#include <algorithm>

#include "schema/pg_values.h"

namespace ductus::store {

std::string oldestWaitingSql() {
  // Per destination an ORDER BY message_id LIMIT 1 on the partial index:
  // a merge of the partitions' index scans that stops at the first row.
  return "SELECT d.id, " + pgvalue::microsSql("q.received_at") +
         " FROM unnest($1::int8[]) AS d(id) CROSS JOIN LATERAL ("
         "SELECT received_at FROM deliveries "
         "WHERE destination_id = d.id AND status = 0 ORDER BY message_id LIMIT 1) q";
}

std::string lanesSql() {
  // The counts read the index alone (its last column is the lane); each
  // lane's first message is the first index entry of that lane, then its
  // delivery and message rows.
  return "WITH l AS (SELECT partition_key AS lane, count(*) AS waiting FROM deliveries "
         "WHERE destination_id = $1::int8 AND status = 0 GROUP BY partition_key "
         "ORDER BY count(*) DESC, partition_key LIMIT $2::int) "
         "SELECT l.lane, l.waiting, f.message_id, coalesce(m.key_value, ''), f.attempts, "
         "coalesce(f.last_error, ''), " +
         pgvalue::microsSql("f.received_at") +
         " FROM l CROSS JOIN LATERAL (SELECT message_id, tier, received_at, attempts, last_error "
         "FROM deliveries WHERE destination_id = $1::int8 AND status = 0 "
         "AND partition_key = l.lane ORDER BY message_id LIMIT 1) f "
         "LEFT JOIN messages m ON m.id = f.message_id AND m.tier = f.tier "
         "AND m.received_at = f.received_at "
         "ORDER BY l.waiting DESC, l.lane";
}

void oldestWaiting(PgPool& pool, std::vector<int64_t> destinationIds,
                   std::function<void(Result<std::map<int64_t, QueueTime>>)> done) {
  if (destinationIds.empty()) return done(std::map<int64_t, QueueTime>{});
  std::vector<Param> ids;
  for (auto id : destinationIds) ids.push_back(std::to_string(id));
  pool.acquire([ids = std::move(ids), done](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    l->conn().query(oldestWaitingSql(), {pgvalue::arrayLiteral(ids)},
                    [l, done](Result<PgResult> r) {
                      if (!r) return done(r.error());
                      std::map<int64_t, QueueTime> out;
                      for (int i = 0; i < r->rows(); ++i)
                        if (auto t = pgvalue::momentAt(*r, i, 1)) out[r->integer(i, 0)] = *t;
                      done(std::move(out));
                    });
  });
}

void lanes(PgPool& pool, int64_t destinationId, int limit,
           std::function<void(Result<std::vector<LaneRow>>)> done) {
  limit = std::clamp(limit, 1, kMaxLanesProbed);
  pool.acquire([destinationId, limit, done](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    l->conn().query(lanesSql(), {std::to_string(destinationId), std::to_string(limit)},
                    [l, done](Result<PgResult> r) {
                      if (!r) return done(r.error());
                      std::vector<LaneRow> out;
                      for (int i = 0; i < r->rows(); ++i) {
                        LaneRow row;
                        row.lane = static_cast<int32_t>(r->integer(i, 0));
                        row.waiting = r->integer(i, 1);
                        row.firstMessageId = r->integer(i, 2);
                        row.key = std::string(r->text(i, 3));
                        row.attempts = static_cast<int32_t>(r->integer(i, 4));
                        row.lastError = std::string(r->text(i, 5));
                        row.receivedAt = pgvalue::momentAt(*r, i, 6).value_or(QueueTime{});
                        out.push_back(std::move(row));
                      }
                      done(std::move(out));
                    });
  });
}

}  // namespace ductus::store
