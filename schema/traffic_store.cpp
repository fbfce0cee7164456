#include "schema/traffic_store.h"

#include "schema/pg_values.h"

namespace ductus::store {

namespace {

using pgvalue::arrayLiteral;

// The rows as parallel arrays, unnested: one statement whatever their number.
constexpr const char* kAdd =
    "INSERT INTO traffic_minutes AS t (interface_id, destination_id, minute, received, sent, "
    "filtered, quarantined) "
    "SELECT u.i, u.d, to_timestamp(u.m), u.r, u.s, u.f, u.q "
    "FROM unnest($1::int8[], $2::int8[], $3::int8[], $4::int8[], $5::int8[], $6::int8[], "
    "$7::int8[]) AS u(i, d, m, r, s, f, q) "
    // An interface the database no longer has (dropped under a running
    // engine) would fail the whole statement on its foreign key.
    "WHERE EXISTS (SELECT 1 FROM interfaces WHERE id = u.i) "
    "ON CONFLICT (interface_id, destination_id, minute) DO UPDATE SET "
    "received = t.received + EXCLUDED.received, sent = t.sent + EXCLUDED.sent, "
    "filtered = t.filtered + EXCLUDED.filtered, quarantined = t.quarantined + EXCLUDED.quarantined";

// By the minute index, the oldest first, a batch at a time.
constexpr const char* kPurge =
    "DELETE FROM traffic_minutes WHERE ctid = ANY (ARRAY("
    "SELECT ctid FROM traffic_minutes WHERE minute < now() - make_interval(hours => $1::int) "
    "ORDER BY minute LIMIT $2::int8))";

constexpr const char* kDestinations =
    "SELECT i.id, d.name, d.id FROM interfaces i LEFT JOIN destinations d ON d.interface_id = i.id "
    "WHERE i.name = $1 ORDER BY d.name";

// Steps aligned to the epoch (a minute, an hour: also to UTC's clock).
// destination_id 0 is the intake: its name reads as ''.
constexpr const char* kRead =
    "SELECT (floor(extract(epoch FROM t.minute) / $4::int8) * $4::int8)::int8 AS at, "
    "COALESCE(d.name, ''), sum(t.received)::int8, sum(t.sent)::int8, sum(t.filtered)::int8, "
    "sum(t.quarantined)::int8 "
    "FROM traffic_minutes t LEFT JOIN destinations d ON d.id = t.destination_id "
    "WHERE t.interface_id = $1::int8 AND t.minute >= to_timestamp($2::int8) "
    "AND t.minute < to_timestamp($3::int8) "
    "GROUP BY 1, 2 ORDER BY 1, 2";

}  // namespace

void addTraffic(PgPool& pool, const std::vector<TrafficRow>& rows,
                std::function<void(Status)> done) {
  if (rows.empty()) return done({});
  std::vector<Param> i, d, m, r, s, f, q;
  for (const auto& row : rows) {
    i.push_back(std::to_string(row.interfaceId));
    d.push_back(std::to_string(row.destinationId));
    m.push_back(std::to_string(row.minute));
    r.push_back(std::to_string(row.received));
    s.push_back(std::to_string(row.sent));
    f.push_back(std::to_string(row.filtered));
    q.push_back(std::to_string(row.quarantined));
  }
  std::vector<Param> params{arrayLiteral(i), arrayLiteral(d), arrayLiteral(m), arrayLiteral(r),
                            arrayLiteral(s), arrayLiteral(f), arrayLiteral(q)};
  pool.acquire([params = std::move(params), done](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    l->conn().query(kAdd, params, [l, done](Result<PgResult> res) {
      if (!res) return done(res.error());
      done({});
    });
  });
}

void purgeTraffic(PgPool& pool, std::chrono::hours keep, int64_t batch,
                  std::function<void(Result<int64_t>)> done) {
  std::vector<Param> params{std::to_string(keep.count()), std::to_string(batch)};
  pool.acquire([params = std::move(params), done](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    l->conn().query(kPurge, params, [l, done](Result<PgResult> res) {
      if (!res) return done(res.error());
      done(static_cast<int64_t>(res->affected()));
    });
  });
}

void readTraffic(PgPool& pool, const std::string& interfaceName, int64_t from, int64_t to,
                 int64_t stepSeconds, std::function<void(Result<TrafficSeries>)> done) {
  pool.acquire([interfaceName, from, to, stepSeconds, done](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    l->conn().query(
        kDestinations, {interfaceName},
        [l, from, to, stepSeconds, done](Result<PgResult> names) {
          if (!names) return done(names.error());
          TrafficSeries out;
          if (names->rows() == 0) return done(std::move(out));
          out.interfaceFound = true;
          for (int k = 0; k < names->rows(); ++k)
            if (!names->isNull(k, 1)) {
              out.destinations.emplace_back(names->text(k, 1));
              out.destinationNames[names->integer(k, 2)] = std::string(names->text(k, 1));
            }
          out.interfaceId = names->integer(0, 0);
          std::string id(names->text(0, 0));
          l->conn().query(
              kRead,
              {id, std::to_string(from), std::to_string(to), std::to_string(stepSeconds)},
              [l, out = std::move(out), done](Result<PgResult> r) mutable {
                if (!r) return done(r.error());
                for (int k = 0; k < r->rows(); ++k) {
                  TrafficPoint p;
                  p.at = r->integer(k, 0);
                  p.destination = std::string(r->text(k, 1));
                  p.received = r->integer(k, 2);
                  p.sent = r->integer(k, 3);
                  p.filtered = r->integer(k, 4);
                  p.quarantined = r->integer(k, 5);
                  out.points.push_back(std::move(p));
                }
                done(std::move(out));
              });
        });
  });
}

}  // namespace ductus::store
