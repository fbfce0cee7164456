#include "schema/retention.h"
#include "schema/pg_error.h"

#include <chrono>
#include <cstdio>
#include <iterator>
#include <map>
#include <utility>

namespace ductus::store {
namespace {

// pg_advisory_lock key of a retention run ("ductusRe").
constexpr const char* kRunLockKey = "7310595005420971365";

// Every time partition, attached or left behind by an interrupted drop. Names
// are ductus_ensure_partitions' (migration 0001): <table>_t<tier>_<YYYYMMDD>,
// the period's first day; the held area's are months (<table>_t0_<YYYYMM01>,
// migration 0013), which may go once over. Rows are the statistics'
// estimate (no scan).
constexpr const char* kListPartitions = R"(
SELECT relname, kind, tier, lo::text, hi::text, (hi + tier)::text,
       hi + tier <= (now() AT TIME ZONE 'UTC')::date, attached, detaching, n_live, bytes
FROM (
  SELECT c.relname, split_part(c.relname, '_', 1) AS kind,
         substring(c.relname FROM '_t([0-9]+)_')::int AS tier,
         to_date(right(c.relname, 8), 'YYYYMMDD') AS lo,
         CASE WHEN c.relname ~ '_t0_'
              THEN (to_date(right(c.relname, 8), 'YYYYMMDD') + interval '1 month')::date
              ELSE to_date(right(c.relname, 8), 'YYYYMMDD')
                     + CASE WHEN c.relname ~ '_t7_' THEN 1 ELSE 7 END END AS hi,
         c.relispartition AS attached,
         coalesce(i.inhdetachpending, false) AS detaching,
         coalesce(s.n_live_tup, 0) AS n_live,
         pg_total_relation_size(c.oid) AS bytes
  FROM pg_class c
  LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
  LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
  WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace
    AND c.relname ~ '^(messages|deliveries)_t(0|7|21|49)_[0-9]{8}$'
) p
ORDER BY tier, lo, kind DESC
)";

constexpr const char* kReadTiers = R"(
SELECT interface_id, tier, requested_tier,
       to_char(requested_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
FROM interface_retention WHERE interface_id = ANY($1::int8[])
)";

constexpr const char* kWriteTiers = R"(
INSERT INTO interface_retention AS r (interface_id, tier, requested_tier, requested_at)
SELECT id, tier, requested, CASE WHEN requested IS NULL THEN NULL ELSE now() END
FROM unnest($1::int8[], $2::int2[], $3::int2[]) AS u (id, tier, requested)
ON CONFLICT (interface_id) DO UPDATE
SET tier = EXCLUDED.tier,
    requested_tier = EXCLUDED.requested_tier,
    requested_at = CASE WHEN EXCLUDED.requested_tier IS NULL THEN NULL
                        WHEN r.requested_tier = EXCLUDED.requested_tier THEN r.requested_at
                        ELSE now() END,
    updated_at = now()
RETURNING interface_id, to_char(requested_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
)";

// Only ever shortens: a longer tier applies at a start without asking.
constexpr const char* kConfirm = R"(
INSERT INTO interface_retention AS r (interface_id, tier) VALUES ($1, $2)
ON CONFLICT (interface_id) DO UPDATE
SET tier = EXCLUDED.tier, requested_tier = NULL, requested_at = NULL, updated_at = now()
WHERE r.tier > EXCLUDED.tier
)";

// Every interface of one window at once: the keys are found through
// their seen_at index, which a statement per interface walked once each
// (1,001 statements 5 s after every start of 1,001 interfaces).
constexpr const char* kPurgeDedupe = R"(
DELETE FROM dedupe_keys d
USING (SELECT interface_id, key FROM dedupe_keys
       WHERE interface_id = ANY ($1::int8[]) AND seen_at < now() - $2::int8 * interval '1 second'
       LIMIT $3) doomed
WHERE d.interface_id = doomed.interface_id AND d.key = doomed.key
)";

constexpr const char* kPurgeDedupeOthers = R"(
DELETE FROM dedupe_keys d
USING (SELECT interface_id, key FROM dedupe_keys
       WHERE interface_id <> ALL($1::int8[]) AND seen_at < now() - $2::int8 * interval '1 second'
       LIMIT $3) doomed
WHERE d.interface_id = doomed.interface_id AND d.key = doomed.key
)";

// One batch of the move to the held area ({M} and {D}: the period's
// messages and deliveries partitions). Messages are locked first, in id
// order, then their deliveries, all with SKIP LOCKED: the move never waits
// on a row (so it is never part of a deadlock), and a message is moved only
// with every one of its deliveries (one of them locked by someone else: the
// message waits for the next batch or run). The updates go through the
// parents, so PostgreSQL moves each row to the held partition of its
// received_at. A message quarantined at intake has no delivery to resend
// or dismiss: nothing could ever take it out of the held area, so it goes
// with its period. $1 the interfaces whose quarantined messages are not kept,
// $2 the batch, $3 the tier, $4..$5 the period, $6 the last id of the batch
// before. Answers the messages moved, the messages looked at, and the last
// id looked at.
constexpr const char* kMoveBatch = R"(
WITH m AS (
  SELECT m.id FROM {M} m
  WHERE m.id > $6::int8
    AND (m.status = 0
         OR (m.status = 3 AND m.interface_id <> ALL ($1::int8[])
             AND EXISTS (SELECT 1 FROM {D} x WHERE x.message_id = m.id AND x.status = 3))
         OR EXISTS (SELECT 1 FROM {D} x WHERE x.message_id = m.id AND x.status = 0))
  ORDER BY m.id
  LIMIT $2::int8
  FOR UPDATE OF m SKIP LOCKED
), d AS (
  SELECT d.message_id FROM {D} d
  WHERE d.message_id IN (SELECT id FROM m)
  ORDER BY d.message_id, d.destination_id
  FOR UPDATE OF d SKIP LOCKED
), whole AS MATERIALIZED (
  SELECT m.id FROM m
  WHERE (SELECT count(*) FROM d WHERE d.message_id = m.id)
        = (SELECT count(*) FROM {D} x WHERE x.message_id = m.id)
), moved_d AS (
  UPDATE deliveries SET tier = 0
  WHERE tier = $3::int2 AND received_at >= $4::timestamptz AND received_at < $5::timestamptz
    AND message_id IN (SELECT id FROM whole)
), moved_m AS (
  UPDATE messages SET tier = 0
  WHERE tier = $3::int2 AND received_at >= $4::timestamptz AND received_at < $5::timestamptz
    AND id IN (SELECT id FROM whole)
  RETURNING id
)
SELECT (SELECT count(*) FROM moved_m), (SELECT count(*) FROM m),
       coalesce((SELECT max(id) FROM m), $6::int8)
)";

// Deliveries left in the period after their message moved (a reconcile of
// an engine from before the held area, which doesn't lock the message):
// they follow it. One the held area already has a twin of (the queue reads
// only the one beside its message) goes. $1 the tier, $2..$3 the period.
constexpr const char* kDropStrayTwins = R"(
DELETE FROM {D} d
WHERE EXISTS (SELECT 1 FROM deliveries_t0 t
              WHERE t.message_id = d.message_id AND t.destination_id = d.destination_id)
)";
constexpr const char* kMoveStrays = R"(
WITH d AS (
  SELECT d.message_id, d.destination_id FROM {D} d
  WHERE EXISTS (SELECT 1 FROM messages_t0 m
                WHERE m.id = d.message_id AND m.received_at = d.received_at)
  ORDER BY d.message_id, d.destination_id
  FOR UPDATE OF d SKIP LOCKED
)
UPDATE deliveries SET tier = 0
WHERE tier = $1::int2 AND received_at >= $2::timestamptz AND received_at < $3::timestamptz
  AND (message_id, destination_id) IN (SELECT message_id, destination_id FROM d)
)";

// One batch of an interface's finished messages stored in another
// retention tier than the one that applies now ($1 interface, $2 the tier
// they are in, $3 the tier that applies, $4 the batch, $5 the last id of
// the batch before, $6 whether its quarantined messages are purged). Each
// is judged by the period it would have in the new tier: over (the new
// tier would have dropped it): deleted with its deliveries, unless
// quarantined and kept (then it stays, and the held area takes it when its
// own period expires); not over: moved, with its deliveries, to the new
// tier. Pending messages are left alone (a delivery loop holds their keys)
// and move once finished. `span`, the batch, is the next ids of the
// interface in that tier in the browse index's order (interface_id, id):
// an index scan that stops after the batch, whatever share of the tier is
// pending. Locks as the move to the held area does: messages, then
// deliveries, SKIP LOCKED, whole messages only. Answers the messages
// moved, deleted, looked at, and the last id looked at.
constexpr const char* kApplyTierBatch = R"(
WITH span AS MATERIALIZED (
  SELECT id FROM messages
  WHERE interface_id = $1 AND tier = $2::int2 AND id > $5::int8
  ORDER BY id
  LIMIT $4::int8
), m AS (
  SELECT m.id, m.status,
         (CASE WHEN $3::int2 = 7 THEN (m.received_at AT TIME ZONE 'UTC')::date + 1
               ELSE date_trunc('week', m.received_at AT TIME ZONE 'UTC')::date + 7 END)
           + $3::int2 <= (now() AT TIME ZONE 'UTC')::date AS over,
         EXISTS (SELECT 1 FROM deliveries x
                 WHERE x.message_id = m.id AND x.tier = m.tier AND x.received_at = m.received_at
                   AND x.status = 3) AS quarantined_delivery
  FROM messages m
  WHERE m.interface_id = $1 AND m.tier = $2::int2 AND m.status <> 0
    AND m.id IN (SELECT id FROM span)
    AND NOT EXISTS (SELECT 1 FROM deliveries x
                    WHERE x.message_id = m.id AND x.tier = m.tier
                      AND x.received_at = m.received_at AND x.status = 0)
  ORDER BY m.id
  FOR UPDATE OF m SKIP LOCKED
), d AS (
  SELECT d.message_id FROM deliveries d
  WHERE d.tier = $2::int2 AND d.message_id IN (SELECT id FROM m)
  ORDER BY d.message_id, d.destination_id
  FOR UPDATE OF d SKIP LOCKED
), whole AS MATERIALIZED (
  SELECT m.id,
         CASE WHEN NOT m.over THEN 'move'
              WHEN m.status = 3 AND m.quarantined_delivery AND NOT $6::bool THEN 'stay'
              ELSE 'delete' END AS fate
  FROM m
  WHERE (SELECT count(*) FROM d WHERE d.message_id = m.id)
        = (SELECT count(*) FROM deliveries x WHERE x.tier = $2::int2 AND x.message_id = m.id)
), gone_d AS (
  DELETE FROM deliveries WHERE tier = $2::int2
    AND message_id IN (SELECT id FROM whole WHERE fate = 'delete')
), gone_m AS (
  DELETE FROM messages WHERE tier = $2::int2
    AND id IN (SELECT id FROM whole WHERE fate = 'delete')
  RETURNING id
), moved_d AS (
  UPDATE deliveries SET tier = $3::int2 WHERE tier = $2::int2
    AND message_id IN (SELECT id FROM whole WHERE fate = 'move')
), moved_m AS (
  UPDATE messages SET tier = $3::int2 WHERE tier = $2::int2
    AND id IN (SELECT id FROM whole WHERE fate = 'move')
  RETURNING id
)
SELECT (SELECT count(*) FROM moved_m), (SELECT count(*) FROM gone_m), (SELECT count(*) FROM span),
       coalesce((SELECT max(id) FROM span), $5::int8)
)";

// Whether an interface has messages in a tier (the browse index, per
// partition of that tier).
constexpr const char* kHasTier = R"(
SELECT EXISTS (SELECT 1 FROM messages WHERE interface_id = $1 AND tier = $2::int2)
)";

// The held area, every row: after each run, never per request.
constexpr const char* kCountHeld = R"(
SELECT (SELECT count(*) FILTER (WHERE status = 0) FROM messages_t0),
       (SELECT count(*) FILTER (WHERE status = 3) FROM messages_t0),
       (SELECT count(*) FILTER (WHERE status NOT IN (0, 3)) FROM messages_t0),
       (SELECT count(*) FROM deliveries_t0),
       (SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)), 0)::int8
        FROM pg_inherits i
        WHERE i.inhparent IN ('messages_t0'::regclass, 'deliveries_t0'::regclass)),
       (SELECT count(*) FROM pg_inherits i WHERE i.inhparent = 'messages_t0'::regclass)
)";

std::string replaced(std::string sql, const std::string& key, const std::string& value) {
  for (size_t at = sql.find(key); at != std::string::npos; at = sql.find(key, at + value.size()))
    sql.replace(at, key.size(), value);
  return sql;
}

std::string num(int64_t v) { return std::to_string(v); }

std::string arrayText(const std::vector<std::string>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
  return out + "}";
}

std::optional<Tier> tierOf(long long days) {
  switch (days) {
    case 0:
      return Tier::Held;
    case 7: return Tier::Week1;
    case 21: return Tier::Week3;
    case 49: return Tier::Week7;
  }
  return std::nullopt;
}

// A lock not had within lock_timeout (55P03), or a statement cancelled while
// it waited (57014): worth another try after a pause.
bool lockWait(const Error& e) { return pg::lockNotAvailable(e) || pg::queryCanceled(e); }

std::string quoted(const std::string& name) { return "\"" + name + "\""; }

}  // namespace

const char* tierName(Tier t) {
  switch (t) {
    case Tier::Held:
      return "held";
    case Tier::Week1: return "1w";
    case Tier::Week3: return "3w";
    case Tier::Week7: return "7w";
  }
  return "?";
}

std::optional<Tier> tierNamed(std::string_view name) {
  for (Tier t : {Tier::Week1, Tier::Week3, Tier::Week7})
    if (name == tierName(t)) return t;
  return std::nullopt;
}

SqlStatement confirmTierStatement(const std::string& interface, Tier tier) {
  // As kConfirm, by the interface's name.
  return {R"(
INSERT INTO interface_retention AS r (interface_id, tier)
SELECT id, $2::int2 FROM interfaces WHERE name = $1
ON CONFLICT (interface_id) DO UPDATE
SET tier = EXCLUDED.tier, requested_tier = NULL, requested_at = NULL, updated_at = now()
WHERE r.tier > EXCLUDED.tier
RETURNING interface_id
)",
          {interface, num(static_cast<int16_t>(tier))}};
}

std::string describeBytes(int64_t b) {
  const char* units[] = {"bytes", "kB", "MB", "GB", "TB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(b));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

// One table of a period as the catalog has it.
struct Retention::Table {
  std::string name;    // messages_t7_20250101
  std::string parent;  // messages_t7
  bool attached = false;
  bool detaching = false;  // DETACH ... CONCURRENTLY interrupted
  int64_t rows = 0;        // estimate
  int64_t bytes = 0;
};

struct Retention::Period {
  PeriodInfo info;
  std::optional<Table> messages, deliveries;
  // Deliveries first: a message is never gone while a delivery of it stays.
  std::vector<Table*> tables() {
    std::vector<Table*> out;
    if (deliveries) out.push_back(&*deliveries);
    if (messages) out.push_back(&*messages);
    return out;
  }
  std::string label() const { return std::string(tierName(info.tier)) + " " + info.from; }
};

Retention::Retention(uv_loop_t* loop, RetentionOptions options)
    : loop_(loop), options_(std::move(options)) {}

Retention::~Retention() { *alive_ = false; }

// Callers that come while the connection is being made wait for it: a
// second connection made meanwhile would replace the first, and whoever
// waited on that one would never hear back.
void Retention::withConnection(std::function<void(Result<PgConnection*>)> cb) {
  if (conn_ && conn_->connected()) return cb(conn_.get());
  waiting_.push_back(std::move(cb));
  if (waiting_.size() > 1) return;
  conn_ = std::make_unique<PgConnection>(loop_);
  auto alive = alive_;
  auto answer = [this, alive](Result<PgConnection*> r) {
    if (!*alive) return;
    auto waiting = std::exchange(waiting_, {});
    for (auto& w : waiting) w(r);
  };
  conn_->connect(options_.conninfo, [this, alive, answer](Status s) {
    if (!*alive) return;
    if (!s) return answer(s.error());
    // Session settings: every DDL of this connection gives up on a lock
    // after lock_timeout rather than queue inserts behind it.
    std::string set = "SET lock_timeout = '" + num(options_.lockTimeout.count()) +
                      "ms'; SET statement_timeout = 0; SET application_name = 'ductus retention'";
    conn_->script(set, [this, alive, answer](Result<PgResult> r) {
      if (!*alive) return;
      if (!r) return answer(r.error());
      answer(conn_.get());
    });
  });
}

void Retention::after(std::chrono::milliseconds delay, std::function<void()> fn) {
  if (!timer_) timer_ = makeTimer(loop_, this);
  onTimer_ = std::move(fn);
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        auto* self = static_cast<Retention*>(t->data);
        if (!self) return;
        auto fn = std::move(self->onTimer_);
        self->onTimer_ = nullptr;
        if (fn) fn();
      },
      static_cast<uint64_t>(delay.count()), 0);
}

// ---- Tiers --------------------------------------------------------------------

void Retention::applyTiers(std::vector<InterfaceTier> interfaces,
                           Callback<std::vector<TierState>> cb) {
  judge(std::move(interfaces), true, std::move(cb));
}

void Retention::readTiers(std::vector<InterfaceTier> interfaces,
                          Callback<std::vector<TierState>> cb) {
  judge(std::move(interfaces), false, std::move(cb));
}

void Retention::judge(std::vector<InterfaceTier> interfaces, bool write,
                      Callback<std::vector<TierState>> cb) {
  auto alive = alive_;
  withConnection([this, alive, interfaces, write, cb](Result<PgConnection*> c) {
    if (!*alive) return;
    if (!c) return cb(c.error());
    std::vector<std::string> ids;
    for (auto& i : interfaces) ids.push_back(num(i.interfaceId));
    (*c)->query(kReadTiers, {arrayText(ids)}, [this, alive, interfaces, write,
                                               cb](Result<PgResult> r) {
      if (!*alive) return;
      if (!r) return cb(r.error());
      struct Stored {
        Tier tier;
        std::optional<Tier> requested;
        std::optional<std::string> requestedAt;
      };
      std::map<int64_t, Stored> stored;
      for (int row = 0; row < r->rows(); ++row) {
        auto tier = tierOf(r->integer(row, 1));
        if (!tier) continue;
        Stored s{*tier, std::nullopt, r->optText(row, 3)};
        if (!r->isNull(row, 2)) s.requested = tierOf(r->integer(row, 2));
        stored[r->integer(row, 0)] = s;
      }
      auto states = std::make_shared<std::vector<TierState>>();
      std::vector<std::string> wIds, wTiers, wRequested;
      for (auto& i : interfaces) {
        TierState t;
        t.interfaceId = i.interfaceId;
        t.name = i.name;
        t.configured = i.configured;
        auto it = stored.find(i.interfaceId);
        bool changed = false;
        if (it == stored.end()) {
          t.applied = i.configured;
          t.change = TierState::Change::New;
          changed = true;
        } else if (i.configured == it->second.tier) {
          t.applied = i.configured;
          changed = it->second.requested.has_value();  // the project went back
        } else if (i.configured > it->second.tier) {
          t.applied = i.configured;
          t.change = TierState::Change::Lengthened;
          changed = true;
        } else {
          t.applied = it->second.tier;
          t.change = TierState::Change::Waiting;
          changed = it->second.requested != i.configured;
          if (!changed) t.requestedAt = it->second.requestedAt;
        }
        if (changed) {
          wIds.push_back(num(t.interfaceId));
          wTiers.push_back(num(static_cast<int16_t>(t.applied)));
          wRequested.push_back(t.change == TierState::Change::Waiting
                                   ? num(static_cast<int16_t>(t.configured))
                                   : "NULL");
        }
        states->push_back(std::move(t));
      }
      if (!write || wIds.empty()) return cb(std::move(*states));
      conn_->query(kWriteTiers, {arrayText(wIds), arrayText(wTiers), arrayText(wRequested)},
                   [alive, states, cb](Result<PgResult> w) {
                     if (!*alive) return;
                     if (!w) return cb(w.error());
                     std::map<int64_t, std::optional<std::string>> since;
                     for (int row = 0; row < w->rows(); ++row)
                       since[w->integer(row, 0)] = w->optText(row, 1);
                     for (auto& t : *states)
                       if (auto it = since.find(t.interfaceId); it != since.end())
                         t.requestedAt = it->second;
                     cb(std::move(*states));
                   });
    });
  });
}

void Retention::confirm(int64_t interfaceId, Tier tier, Callback<bool> cb) {
  auto alive = alive_;
  withConnection([alive, interfaceId, tier, cb](Result<PgConnection*> c) {
    if (!*alive) return;
    if (!c) return cb(c.error());
    (*c)->query(kConfirm, {num(interfaceId), num(static_cast<int16_t>(tier))},
                [alive, cb](Result<PgResult> r) {
                  if (!*alive) return;
                  if (!r) return cb(r.error());
                  cb(r->affected() > 0);
                });
  });
}

// ---- Periods ------------------------------------------------------------------

void Retention::listPeriods(Callback<std::vector<std::shared_ptr<Period>>> cb) {
  auto alive = alive_;
  withConnection([alive, cb](Result<PgConnection*> c) {
    if (!*alive) return;
    if (!c) return cb(c.error());
    (*c)->query(kListPartitions, {}, [alive, cb](Result<PgResult> r) {
      if (!*alive) return;
      if (!r) return cb(r.error());
      std::vector<std::shared_ptr<Period>> out;
      for (int row = 0; row < r->rows(); ++row) {
        auto tier = tierOf(r->integer(row, 2));
        if (!tier) continue;
        std::string from(r->text(row, 3));
        if (out.empty() || out.back()->info.tier != *tier || out.back()->info.from != from) {
          auto p = std::make_shared<Period>();
          p->info.tier = *tier;
          p->info.from = from;
          p->info.to = r->text(row, 4);
          p->info.dropsOn = r->text(row, 5);
          p->info.expired = r->text(row, 6) == "t";
          out.push_back(p);
        }
        Period& p = *out.back();
        Table t;
        t.name = r->text(row, 0);
        std::string kind(r->text(row, 1));
        t.parent = kind + "_t" + num(r->integer(row, 2));
        t.attached = r->text(row, 7) == "t";
        t.detaching = r->text(row, 8) == "t";
        t.rows = r->integer(row, 9);
        t.bytes = r->integer(row, 10);
        p.info.bytes += t.bytes;
        if (!t.attached || t.detaching) p.info.detached = true;
        if (kind == "messages") {
          p.info.messages = t.rows;
          p.messages = std::move(t);
        } else {
          p.info.deliveries = t.rows;
          p.deliveries = std::move(t);
        }
      }
      cb(std::move(out));
    });
  });
}

// The messages a period (or a held month) still has someone waiting for:
// pending ones and their deliveries (through the partial indexes
// messages_pending and deliveries_queue: what is pending, not the period's
// size), and quarantined messages that are kept (a scan of the partition,
// once a run and only for expired periods), but not those quarantined at
// intake: with no delivery, nothing can resend or dismiss them.
std::string Retention::unfinishedMessages(const std::string& messages,
                                          const std::string& deliveries) const {
  std::vector<std::string> ids;
  for (int64_t id : options_.quarantinePurged) ids.push_back(num(id));
  return "(SELECT count(*) FROM " + quoted(messages) +
         " m WHERE status = 0 OR (status = 3 AND interface_id <> ALL ('" + arrayText(ids) +
         "'::int8[]) AND EXISTS (SELECT 1 FROM " + quoted(deliveries) +
         " x WHERE x.message_id = m.id AND x.status = 3)))";
}

void Retention::countUnfinished(std::shared_ptr<Period> p, Callback<int64_t> cb) {
  std::string sql = "SELECT 0::int8";
  if (p->messages && p->deliveries)
    sql += " + " + unfinishedMessages(p->messages->name, p->deliveries->name);
  else if (p->messages)
    sql += " + (SELECT count(*) FROM " + quoted(p->messages->name) + " WHERE status = 0)";
  if (p->deliveries)
    sql += " + (SELECT count(*) FROM " + quoted(p->deliveries->name) + " WHERE status = 0)";
  auto alive = alive_;
  withConnection([alive, sql, cb](Result<PgConnection*> c) {
    if (!*alive) return;
    if (!c) return cb(c.error());
    (*c)->query(sql, {}, [alive, cb](Result<PgResult> r) {
      if (!*alive) return;
      if (!r) return cb(r.error());
      cb(static_cast<int64_t>(r->integer(0, 0)));
    });
  });
}

void Retention::plan(Callback<RetentionPlan> cb) {
  auto alive = alive_;
  listPeriods([this, alive, cb](Result<std::vector<std::shared_ptr<Period>>> r) {
    if (!*alive) return;
    if (!r) return cb(r.error());
    auto periods = std::make_shared<std::vector<std::shared_ptr<Period>>>(std::move(*r));
    auto next = std::make_shared<std::function<void(size_t)>>();
    std::weak_ptr<std::function<void(size_t)>> weak = next;
    *next = [this, alive, periods, weak, cb](size_t i) {
      auto keep = weak.lock();
      if (i == periods->size()) {
        RetentionPlan plan;
        for (auto& p : *periods) plan.periods.push_back(p->info);
        return cb(std::move(plan));
      }
      auto p = (*periods)[i];
      if (!p->info.expired) return (*keep)(i + 1);
      countUnfinished(p, [alive, p, keep, i, cb](Result<int64_t> n) {
        if (!*alive) return;
        if (!n) return cb(n.error());
        p->info.unfinished = *n;
        (*keep)(i + 1);
      });
    };
    auto first = *next;
    first(0);
  });
}

void Retention::dropExpired(Callback<DropReport> cb) {
  auto alive = alive_;
  withConnection([this, alive, cb](Result<PgConnection*> c) {
    if (!*alive) return;
    if (!c) return cb(c.error());
    (*c)->query("SELECT pg_try_advisory_lock($1::int8)", {std::string(kRunLockKey)},
                [this, alive, cb](Result<PgResult> lock) {
      if (!*alive) return;
      if (!lock) return cb(lock.error());
      if (lock->text(0, 0) != "t") {
        DropReport busy;
        busy.busy = true;
        return cb(std::move(busy));
      }
      auto finish = [this, alive, cb](Result<DropReport> r) {
        if (!*alive) return;
        // Unlocked even after a failure; a broken connection has let go anyway.
        if (!conn_ || !conn_->connected()) return cb(std::move(r));
        conn_->query("SELECT pg_advisory_unlock($1::int8)", {std::string(kRunLockKey)},
                     [alive, r = std::move(r), cb](Result<PgResult>) mutable {
                       if (!*alive) return;
                       cb(std::move(r));
                     });
      };
      listPeriods([this, alive, finish](Result<std::vector<std::shared_ptr<Period>>> r) {
        if (!*alive) return;
        if (!r) return finish(r.error());
        // The held months last: a period's move may fill one of them.
        auto expired = std::make_shared<std::vector<std::shared_ptr<Period>>>();
        for (bool held : {false, true})
          for (auto& p : *r)
            if (p->info.expired && (p->info.tier == Tier::Held) == held) expired->push_back(p);
        auto report = std::make_shared<DropReport>();
        dropEach(expired, 0, report, [this, alive, report, finish](Status s) {
          if (!*alive) return;
          if (!s) return finish(s.error());
          // Under the same lock: two runners moving one interface's rows
          // would meet each other's moved rows.
          applyTiersToStored(storedTiers_, [report, finish](Result<TierMoves> m) {
            if (!m)
              report->failed.push_back("moving stored messages to their tier: " +
                                       m.error().message);
            else
              report->tierMoves = *m;
            finish(std::move(*report));
          });
        });
      });
    });
  });
}

void Retention::dropEach(std::shared_ptr<std::vector<std::shared_ptr<Period>>> periods, size_t i,
                         std::shared_ptr<DropReport> report, Done done) {
  if (i == periods->size()) return done({});
  auto alive = alive_;
  dropPeriod((*periods)[i], 0, report, [this, alive, periods, i, report, done](Status s) {
    if (!*alive) return;
    if (!s) return done(s);
    dropEach(periods, i + 1, report, done);
  });
}

// One period, tried again after a pause while a lock wasn't had in time;
// anything else is reported and left for the next run. `done` fails only
// when the connection is gone (nothing more can be done this run).
void Retention::dropPeriod(std::shared_ptr<Period> p, int attempt,
                           std::shared_ptr<DropReport> report, Done done) {
  auto alive = alive_;
  auto stepsDone = [this, alive, p, attempt, report, done](Status s) {
    if (!*alive) return;
    if (s) {
      report->moved += p->info.moved;
      // A held month with something unfinished in it is what the held
      // area is for; a retention period still there is news.
      if (p->info.unfinished == 0)
        report->dropped.push_back(p->info);
      else if (p->info.tier != Tier::Held)
        report->held.push_back(p->info);
      return done({});
    }
    if (lockWait(s.error()) && attempt + 1 < options_.attempts) {
      return after(options_.retryDelay, [this, p, attempt, report, done] {
        // The catalog again: the last try may have detached a table.
        refreshThenDrop(p, attempt + 1, report, done);
      });
    }
    report->moved += p->info.moved;
    report->failed.push_back(p->label() + ": " + s.error().message);
    if (!conn_ || !conn_->connected()) return done(s);
    done({});
  };
  if (p->info.tier == Tier::Held) return dropSteps(p, stepsDone);
  holdPeriod(p, [this, alive, p, stepsDone](Status s) {
    if (!*alive) return;
    if (!s) return stepsDone(s);
    dropSteps(p, stepsDone);
  });
}

void Retention::refreshThenDrop(std::shared_ptr<Period> p, int attempt,
                                std::shared_ptr<DropReport> report, Done done) {
  auto alive = alive_;
  listPeriods([this, alive, p, attempt, report, done](
                  Result<std::vector<std::shared_ptr<Period>>> r) {
    if (!*alive) return;
    if (!r) {
      report->failed.push_back(p->label() + ": " + r.error().message);
      return done(r.error());
    }
    for (auto& fresh : *r)
      if (fresh->info.tier == p->info.tier && fresh->info.from == p->info.from) {
        p->messages = fresh->messages;
        p->deliveries = fresh->deliveries;
        return dropPeriod(p, attempt, report, done);
      }
    // Gone already (another run finished it).
    done({});
  });
}

void Retention::exec(std::string sql, Callback<PgResult> cb) {
  auto alive = alive_;
  withConnection([alive, sql = std::move(sql), cb](Result<PgConnection*> c) mutable {
    if (!*alive) return;
    if (!c) return cb(c.error());
    (*c)->query(std::move(sql), {}, [alive, cb](Result<PgResult> r) {
      if (!*alive) return;
      cb(std::move(r));
    });
  });
}

// Unfinished? -> count what goes -> detach both -> unfinished again? (re-attach:
// held) -> drop both. p->info.unfinished > 0 afterwards means kept.
void Retention::dropSteps(std::shared_ptr<Period> p, Done done) {
  auto alive = alive_;
  countUnfinished(p, [this, alive, p, done](Result<int64_t> n) {
    if (!*alive) return;
    if (!n) return done(n.error());
    p->info.unfinished = *n;
    // An interrupted drop left a table detached that still holds rows
    // someone waits for (a resend, then a crash): back where it was, or
    // the queues would never see them.
    if (*n > 0 && !p->info.detached) return done({});
    if (*n > 0)
      return detachEach(
          p, 0,
          [this, alive, p, done](Status s) {
            if (!*alive) return;
            if (!s) return done(s);
            reattachEach(p, 0, done);
          },
          /*onlyInterrupted=*/true);
    // Exact rows for the log line; the tables are about to go, and reading
    // them takes no lock that anything else waits for.
    std::string count = "SELECT ";
    count += p->messages ? "(SELECT count(*) FROM " + quoted(p->messages->name) + ")" : "0";
    count += ", ";
    count += p->deliveries ? "(SELECT count(*) FROM " + quoted(p->deliveries->name) + ")" : "0";
    exec(count, [this, alive, p, done](Result<PgResult> c) {
      if (!*alive) return;
      if (!c) return done(c.error());
      p->info.messages = c->integer(0, 0);
      p->info.deliveries = c->integer(0, 1);
      detachEach(p, 0, [this, alive, p, done](Status s) {
        if (!*alive) return;
        if (!s) return done(s);
        // A resend may have made a row pending between the check and the
        // detach: then the period goes back where it was.
        countUnfinished(p, [this, alive, p, done](Result<int64_t> n) {
          if (!*alive) return;
          if (!n) return done(n.error());
          p->info.unfinished = *n;
          if (*n > 0) return reattachEach(p, 0, done);
          std::string drop = "DROP TABLE IF EXISTS ";
          auto tables = p->tables();
          for (size_t i = 0; i < tables.size(); ++i)
            drop += (i ? ", " : "") + quoted(tables[i]->name);
          if (tables.empty()) return done({});
          exec(drop, [done](Result<PgResult> d) {
            if (!d) return done(d.error());
            done({});
          });
        });
      });
    });
  });
}

void Retention::detachEach(std::shared_ptr<Period> p, size_t i, Done done, bool onlyInterrupted) {
  auto tables = p->tables();
  if (i == tables.size()) return done({});
  Table* t = tables[i];
  if ((!t->attached && !t->detaching) || (onlyInterrupted && !t->detaching))
    return detachEach(p, i + 1, done, onlyInterrupted);
  std::string sql = "ALTER TABLE " + quoted(t->parent) + " DETACH PARTITION " + quoted(t->name) +
                    (t->detaching ? " FINALIZE" : " CONCURRENTLY");
  auto alive = alive_;
  exec(sql, [this, alive, p, i, done, onlyInterrupted](Result<PgResult> r) {
    if (!*alive) return;
    if (!r) return done(r.error());
    Table* t = p->tables()[i];
    t->attached = false;
    t->detaching = false;
    detachEach(p, i + 1, done, onlyInterrupted);
  });
}

void Retention::reattachEach(std::shared_ptr<Period> p, size_t i, Done done) {
  auto tables = p->tables();
  if (i == tables.size()) return done({});
  Table* t = tables[i];
  if (t->attached) return reattachEach(p, i + 1, done);
  std::string sql = "ALTER TABLE " + quoted(t->parent) + " ATTACH PARTITION " + quoted(t->name) +
                    " FOR VALUES FROM ('" + p->info.from + " 00:00:00+00') TO ('" + p->info.to +
                    " 00:00:00+00')";
  auto alive = alive_;
  exec(sql, [this, alive, p, i, done](Result<PgResult> r) {
    if (!*alive) return;
    if (!r) return done(r.error());
    p->tables()[i]->attached = true;
    reattachEach(p, i + 1, done);
  });
}

// ---- The held area -------------------------------------------------------------

// Unfinished messages of an expired period -> their held months' tables
// (made when first needed) -> batches -> strays.
void Retention::holdPeriod(std::shared_ptr<Period> p, Done done) {
  if (!p->messages || !p->deliveries || !p->messages->attached || !p->deliveries->attached ||
      p->messages->detaching || p->deliveries->detaching)
    return done({});  // an interrupted drop: finished by dropSteps as it is
  auto alive = alive_;
  countUnfinished(p, [this, alive, p, done](Result<int64_t> n) {
    if (!*alive) return;
    if (!n) return done(n.error());
    if (*n == 0) return done({});
    ensureHeld(p, 0, [this, alive, p, done](Status s) {
      if (!*alive) return;
      if (!s) return done(s);
      moveBatches(p, std::make_shared<int64_t>(0), done);
    });
  });
}

// The held months of the period's first and last day (a week may straddle
// two), made when missing: one table per statement, so per transaction,
// messages first, each waiting at most lockTimeout for its parent.
void Retention::ensureHeld(std::shared_ptr<Period> p, size_t i, Done done) {
  static const char* const kSteps[] = {
      "SELECT ductus_ensure_held_partition('messages', $1::date, $2::int4)",
      "SELECT ductus_ensure_held_partition('messages', $1::date - 1, $2::int4)",
      "SELECT ductus_ensure_held_partition('deliveries', $1::date, $2::int4)",
      "SELECT ductus_ensure_held_partition('deliveries', $1::date - 1, $2::int4)",
  };
  if (i == std::size(kSteps)) return done({});
  auto alive = alive_;
  withConnection([this, alive, p, i, done](Result<PgConnection*> c) {
    if (!*alive) return;
    if (!c) return done(c.error());
    (*c)->query(kSteps[i],
                {i % 2 == 0 ? p->info.from : p->info.to, num(options_.lockTimeout.count())},
                [this, alive, p, i, done](Result<PgResult> r) {
                  if (!*alive) return;
                  if (!r) return done(r.error());
                  ensureHeld(p, i + 1, done);
                });
  });
}

// A batch, then a pause as long as it took (busy at most half the time),
// until a batch finds fewer than moveBatch messages; then the strays.
void Retention::moveBatches(std::shared_ptr<Period> p, std::shared_ptr<int64_t> afterId,
                            Done done) {
  std::vector<std::string> purged;
  for (int64_t id : options_.quarantinePurged) purged.push_back(num(id));
  std::string sql = replaced(replaced(kMoveBatch, "{M}", quoted(p->messages->name)), "{D}",
                             quoted(p->deliveries->name));
  std::string from = p->info.from + " 00:00:00+00", to = p->info.to + " 00:00:00+00";
  std::vector<Param> params{
      arrayText(purged), num(options_.moveBatch), num(static_cast<int16_t>(p->info.tier)), from, to,
      num(*afterId)};
  auto alive = alive_;
  auto began = std::chrono::steady_clock::now();
  withConnection([this, alive, p, afterId, done, sql, params, began](Result<PgConnection*> c) {
    if (!*alive) return;
    if (!c) return done(c.error());
    (*c)->query(sql, params, [this, alive, p, afterId, done, began](Result<PgResult> r) {
      if (!*alive) return;
      if (!r) return done(r.error());
      p->info.moved += r->integer(0, 0);
      int64_t looked = r->integer(0, 1);
      *afterId = r->integer(0, 2);
      if (looked < options_.moveBatch) return moveStrays(p, done);
      auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - began);
      after(took, [this, p, afterId, done] { moveBatches(p, afterId, done); });
    });
  });
}

void Retention::moveStrays(std::shared_ptr<Period> p, Done done) {
  std::string table = quoted(p->deliveries->name);
  std::string sql = replaced(kMoveStrays, "{D}", table);
  std::vector<Param> params{num(static_cast<int16_t>(p->info.tier)), p->info.from + " 00:00:00+00",
                            p->info.to + " 00:00:00+00"};
  auto alive = alive_;
  exec(replaced(kDropStrayTwins, "{D}", table),
       [this, alive, sql, params, done](Result<PgResult> r) {
         if (!*alive) return;
         if (!r) return done(r.error());
         withConnection([alive, sql, params, done](Result<PgConnection*> c) {
           if (!*alive) return;
           if (!c) return done(c.error());
           (*c)->query(sql, params, [alive, done](Result<PgResult> r) {
             if (!*alive) return;
             if (!r) return done(r.error());
             done({});
           });
         });
       });
}

void Retention::countHeld(Callback<HeldCounts> cb) {
  auto alive = alive_;
  withConnection([alive, cb](Result<PgConnection*> c) {
    if (!*alive) return;
    if (!c) return cb(c.error());
    (*c)->query(kCountHeld, {}, [alive, cb](Result<PgResult> r) {
      if (!*alive) return;
      if (!r) return cb(r.error());
      HeldCounts h;
      h.pending = r->integer(0, 0);
      h.quarantined = r->integer(0, 1);
      h.finished = r->integer(0, 2);
      h.deliveries = r->integer(0, 3);
      h.bytes = r->integer(0, 4);
      h.months = static_cast<int>(r->integer(0, 5));
      cb(h);
    });
  });
}

// ---- Stored messages follow their interface's tier ----------------------------

void Retention::applyTiersToStored(std::vector<StoredTier> interfaces, Callback<TierMoves> cb) {
  auto work = std::make_shared<std::vector<std::pair<StoredTier, Tier>>>();
  for (auto& i : interfaces)
    for (Tier from : {Tier::Week1, Tier::Week3, Tier::Week7})
      if (from != i.applied) work->push_back({i, from});
  auto total = std::make_shared<TierMoves>();
  auto next = std::make_shared<std::function<void(size_t)>>();
  std::weak_ptr<std::function<void(size_t)>> weak = next;
  auto alive = alive_;
  *next = [this, alive, work, total, weak, cb](size_t k) {
    auto keep = weak.lock();
    if (k == work->size()) return cb(*total);
    // Named copies: clang 14 can't capture structured bindings.
    const StoredTier iface = (*work)[k].first;
    const Tier from = (*work)[k].second;
    withConnection([this, alive, work, total, keep, k, cb, iface, from](Result<PgConnection*> c) {
      if (!*alive) return;
      if (!c) return cb(c.error());
      (*c)->query(kHasTier, {num(iface.interfaceId), num(static_cast<int16_t>(from))},
                  [this, alive, total, keep, k, cb, iface, from](Result<PgResult> has) {
                    if (!*alive) return;
                    if (!has) return cb(has.error());
                    if (has->text(0, 0) != "t") return (*keep)(k + 1);
                    // A lock not had in time, or a row moved under a batch:
                    // this interface waits for the next run.
                    auto next = [total, keep, k, cb](Status s) {
                      if (!s && !lockWait(s.error()) && !pg::retryable(s.error()))
                        return cb(s.error());
                      if (!s) ++total->deferred;
                      (*keep)(k + 1);
                    };
                    ensureWindow(
                        iface.applied, 0, [this, alive, total, iface, from, next](Status s) {
                          if (!*alive) return;
                          if (!s) return next(s);
                          applyTierBatches(iface, from, std::make_shared<int64_t>(0), total, next);
                        });
                  });
    });
  };
  auto first = *next;
  first(0);
}

// The tier's partitions over its whole window up to today, where moved
// messages go (migration 0013's ductus_ensure_window). One table per
// statement, messages first.
void Retention::ensureWindow(Tier tier, size_t i, Done done) {
  static const char* const kTables[] = {"messages", "deliveries"};
  if (i == std::size(kTables)) return done({});
  int days = static_cast<int>(tier) + 7;
  std::string sql =
      std::string("SELECT ductus_ensure_window('") + kTables[i] + "', $1::int2, $2::int, $3::int)";
  auto alive = alive_;
  withConnection([this, alive, sql, tier, days, i, done](Result<PgConnection*> c) {
    if (!*alive) return;
    if (!c) return done(c.error());
    (*c)->query(sql,
                {num(static_cast<int16_t>(tier)), num(days), num(options_.lockTimeout.count())},
                [this, alive, tier, i, done](Result<PgResult> r) {
                  if (!*alive) return;
                  if (!r) return done(r.error());
                  ensureWindow(tier, i + 1, done);
                });
  });
}

void Retention::applyTierBatches(StoredTier iface, Tier from, std::shared_ptr<int64_t> afterId,
                                 std::shared_ptr<TierMoves> total, Done done) {
  std::vector<Param> params{num(iface.interfaceId),
                            num(static_cast<int16_t>(from)),
                            num(static_cast<int16_t>(iface.applied)),
                            num(options_.moveBatch),
                            num(*afterId),
                            iface.purgeQuarantined ? "true" : "false"};
  auto alive = alive_;
  auto began = std::chrono::steady_clock::now();
  withConnection(
      [this, alive, iface, from, afterId, total, done, params, began](Result<PgConnection*> c) {
        if (!*alive) return;
        if (!c) return done(c.error());
        (*c)->query(kApplyTierBatch, params,
                    [this, alive, iface, from, afterId, total, done, began](Result<PgResult> r) {
                      if (!*alive) return;
                      if (!r) return done(r.error());
                      total->moved += r->integer(0, 0);
                      total->deleted += r->integer(0, 1);
                      int64_t looked = r->integer(0, 2);
                      *afterId = r->integer(0, 3);
                      if (looked < options_.moveBatch) return done({});
                      auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - began);
                      after(took, [this, iface, from, afterId, total, done] {
                        applyTierBatches(iface, from, afterId, total, done);
                      });
                    });
      });
}

// ---- Dedupe keys -------------------------------------------------------------

void Retention::purgeDedupeKeys(std::vector<DedupeWindow> windows, int64_t othersSeconds,
                                Callback<int64_t> cb) {
  // The interfaces by window: one statement (and its batches) each.
  std::map<int64_t, std::vector<std::string>> byWindow;
  for (auto& w : windows) byWindow[w.seconds].push_back(num(w.interfaceId));
  std::vector<std::pair<int64_t, std::string>> groups;
  for (auto& [seconds, ids] : byWindow) groups.push_back({seconds, arrayText(ids)});
  auto alive = alive_;
  auto total = std::make_shared<int64_t>(0);
  auto next = std::make_shared<std::function<void(size_t)>>();
  std::weak_ptr<std::function<void(size_t)>> weak = next;
  *next = [this, alive, windows, groups, othersSeconds, total, weak, cb](size_t i) {
    auto keep = weak.lock();
    auto add = [alive, total, keep, i, cb](Result<int64_t> n) {
      if (!*alive) return;
      if (!n) return cb(n.error());
      *total += *n;
      (*keep)(i + 1);
    };
    if (i < groups.size())
      return purgeBatches(kPurgeDedupe,
                          {groups[i].second, num(groups[i].first), num(options_.dedupeBatch)}, 0,
                          add);
    if (i == groups.size()) {
      std::vector<std::string> ids;
      for (auto& w : windows) ids.push_back(num(w.interfaceId));
      return purgeBatches(kPurgeDedupeOthers,
                          {arrayText(ids), num(othersSeconds), num(options_.dedupeBatch)}, 0, add);
    }
    cb(*total);
  };
  auto first = *next;
  first(0);
}

// One batch per statement (each its own short transaction, so a purge of
// millions never holds a long one), until a batch comes back short.
void Retention::purgeBatches(std::string sql, std::vector<Param> params, int64_t sofar,
                             Callback<int64_t> cb) {
  auto alive = alive_;
  withConnection([this, alive, sql, params, sofar, cb](Result<PgConnection*> c) {
    if (!*alive) return;
    if (!c) return cb(c.error());
    (*c)->query(sql, params, [this, alive, sql, params, sofar, cb](Result<PgResult> r) {
      if (!*alive) return;
      if (!r) return cb(r.error());
      int64_t n = r->affected();
      if (n < options_.dedupeBatch) return cb(sofar + n);
      purgeBatches(sql, params, sofar + n, cb);
    });
  });
}

}  // namespace ductus::store
