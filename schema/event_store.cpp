#include "schema/event_store.h"

#include <memory>

#include "schema/pg_values.h"

namespace ductus::store {

namespace {

using pgvalue::arrayLiteral;

// The rows as parallel arrays, unnested: one statement whatever their number.
constexpr const char* kAddEvents =
    "INSERT INTO events (at, kind, interface, destination, message_id, detail) "
    "SELECT 'epoch'::timestamptz + u.t * interval '1 microsecond', u.k, u.i, u.d, u.m, u.x "
    "FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::int8[], $6::text[]) "
    "AS u(t, k, i, d, m, x)";

// The oldest first, a batch a statement (by the `at` index).
constexpr const char* kPurgeEventsByAge =
    "DELETE FROM events WHERE id = ANY (ARRAY(SELECT id FROM events "
    "WHERE at < now() - make_interval(secs => $1::int8) ORDER BY at LIMIT $2::int8))";

// Everything older than the newest $1 (by id, the primary key's order).
constexpr const char* kPurgeEventsByCount =
    "DELETE FROM events WHERE id = ANY (ARRAY(SELECT id FROM events WHERE id <= "
    "(SELECT id FROM events ORDER BY id DESC OFFSET $1::int8 LIMIT 1) ORDER BY id LIMIT $2::int8))";

// Each filter only when given ($n IS NULL), newest first.
constexpr const char* kReadEvents =
    "SELECT id, (extract(epoch FROM at) * 1000000)::int8, kind, interface, destination, "
    "message_id, detail FROM events "
    "WHERE ($1::text IS NULL OR kind = $1) AND ($2::text IS NULL OR interface = $2) "
    "AND ($3::timestamptz IS NULL OR at >= $3::timestamptz) "
    "AND ($4::int8 IS NULL OR id < $4::int8) "
    "ORDER BY id DESC LIMIT $5::int8";

Param eventTextOrNull(const std::string& s) { return s.empty() ? Param{} : Param{s}; }

// Runs `sql` until a statement deletes fewer than `batch` rows; adds what
// each deleted to *total.
void purgeEventsLoop(PgPool::LeasePtr l, const char* sql, std::vector<Param> params, int64_t batch,
                     std::shared_ptr<int64_t> total, std::function<void(Status)> done) {
  l->conn().query(sql, params, [l, sql, params, batch, total, done](Result<PgResult> r) {
    if (!r) return done(r.error());
    auto n = static_cast<int64_t>(r->affected());
    *total += n;
    if (n < batch) return done({});
    purgeEventsLoop(l, sql, params, batch, total, done);
  });
}

}  // namespace

void addEvents(PgPool& pool, const std::vector<events::Event>& rows,
               std::function<void(Status)> done) {
  if (rows.empty()) return done({});
  std::vector<Param> t, k, i, d, m, x;
  for (const auto& e : rows) {
    t.push_back(std::to_string(pgvalue::micros(e.at)));
    k.push_back(std::string(events::kindName(e.kind)));
    i.push_back(eventTextOrNull(pgvalue::boundedText(e.interface, 200)));
    d.push_back(eventTextOrNull(pgvalue::boundedText(e.destination, 200)));
    m.push_back(e.messageId > 0 ? Param{std::to_string(e.messageId)} : Param{});
    x.push_back(pgvalue::boundedText(e.detail, events::kMaxDetail));
  }
  std::vector<Param> params{arrayLiteral(t), arrayLiteral(k), arrayLiteral(i),
                            arrayLiteral(d), arrayLiteral(m), arrayLiteral(x)};
  pool.acquire([params = std::move(params), done](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    l->conn().query(kAddEvents, params, [l, done](Result<PgResult> res) {
      if (!res) return done(res.error());
      done({});
    });
  });
}

void purgeEvents(PgPool& pool, std::chrono::seconds keep, int64_t maxRows, int64_t batch,
                 std::function<void(Result<int64_t>)> done) {
  pool.acquire([keep, maxRows, batch, done](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    auto total = std::make_shared<int64_t>(0);
    std::string b = std::to_string(batch);
    purgeEventsLoop(l, kPurgeEventsByAge, {std::to_string(keep.count()), b}, batch, total,
                    [l, maxRows, b, batch, total, done](Status s) {
                      if (!s) return done(s.error());
                      purgeEventsLoop(l, kPurgeEventsByCount, {std::to_string(maxRows), b}, batch,
                                      total, [total, done](Status s2) {
                                        if (!s2) return done(s2.error());
                                        done(*total);
                                      });
                    });
  });
}

void readEvents(PgPool& pool, const EventQuery& q,
                std::function<void(Result<std::vector<EventRow>>)> done) {
  std::vector<Param> params{
      q.kind ? Param{*q.kind} : Param{}, q.interface ? Param{*q.interface} : Param{},
      q.since ? Param{*q.since} : Param{},
      q.beforeId ? Param{std::to_string(*q.beforeId)} : Param{}, std::to_string(q.limit)};
  pool.acquire([params = std::move(params), done](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    l->conn().query(kReadEvents, params, [l, done](Result<PgResult> r) {
      if (!r) return done(r.error());
      std::vector<EventRow> out;
      out.reserve(static_cast<size_t>(r->rows()));
      for (int k = 0; k < r->rows(); ++k) {
        EventRow e;
        e.id = r->integer(k, 0);
        e.at = std::chrono::system_clock::time_point(
            std::chrono::duration_cast<std::chrono::system_clock::duration>(
                std::chrono::microseconds(r->integer(k, 1))));
        e.kind = std::string(r->text(k, 2));
        e.interface = r->optText(k, 3);
        e.destination = r->optText(k, 4);
        if (!r->isNull(k, 5)) e.messageId = r->integer(k, 5);
        e.detail = std::string(r->text(k, 6));
        out.push_back(std::move(e));
      }
      done(std::move(out));
    });
  });
}

}  // namespace ductus::store
