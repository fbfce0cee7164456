// The store's statements. Each is prepared once per connection under its
// name. Batches travel as binary arrays; unnest(...) WITH ORDINALITY keeps
// the caller's order.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace ductus::store::sql {

// String literals joined at compile time: statements that share a part
// spell it once.
template <size_t... N>
consteval std::array<char, (N + ...) - sizeof...(N) + 1> concat(const char (&... parts)[N]) {
  std::array<char, (N + ...) - sizeof...(N) + 1> out{};
  size_t at = 0;
  for (std::string_view p : {std::string_view(parts, N - 1)...})
    for (char c : p) out[at++] = c;
  return out;
}

// The message insert, for one message or a batch of one interface.
// $1 interface, $2 tier, $3 destination ids, $4 relaxed, $5 payloads,
// $6 partition keys, $7 dedupe keys (NULL elements: none), $8 origin ids
// (0: none), $9 source_state key (NULL: none), $10 its JSON, $11..$14 the
// browser's columns (MessageColumns: types, control ids, key values,
// charsets; NULL elements: none).
// - cfg: synchronous_commit off for this transaction only when relaxed
//   (set_config(..., true) lasts until the commit, which reads it);
// - sel: ids drawn in the batch's order (volatile expressions are evaluated
//   after ORDER BY), so ids keep the batch's order;
// - claim: the dedupe keys; a key claimed earlier, or earlier in this batch,
//   inserts nothing and its message is a duplicate (status 4, no deliveries).
//   A concurrent claim of the same key waits for the other's commit;
// - m: the messages; then kInsertTail: one delivery per destination, the
//   source state.
inline constexpr char kInsertBody[] = R"(
WITH cfg AS MATERIALIZED (
  SELECT set_config('synchronous_commit',
           CASE WHEN $4::bool THEN 'off' ELSE current_setting('synchronous_commit') END, true) AS sc
), input AS (
  SELECT * FROM unnest($5::bytea[], $6::int4[], $7::text[], $8::int8[], $11::text[],
                       $12::text[], $13::text[], $14::text[])
    WITH ORDINALITY AS t(payload, pkey, dkey, origin, mtype, ctl, kval, cs, n)
), sel AS (
  SELECT n, payload, pkey, dkey, nullif(origin, 0) AS origin, mtype, ctl, kval, cs,
         nextval('messages_id_seq') AS id
  FROM input CROSS JOIN cfg ORDER BY n
), claim AS (
  INSERT INTO dedupe_keys (interface_id, key, message_id)
  SELECT $1::int8, dkey, id FROM sel WHERE dkey IS NOT NULL ORDER BY n
  ON CONFLICT DO NOTHING
  RETURNING message_id
), m AS (
  INSERT INTO messages (id, tier, interface_id, partition_key, dedupe_key, status, last_error,
                        origin_id, payload, message_type, control_id, key_value, charset)
  SELECT id, $2::int2, $1::int8, pkey, dkey, s.status,
         CASE s.status WHEN 4 THEN 'duplicate: dedupe key seen before'
                       WHEN 2 THEN 'no destination' END,
         origin, payload, mtype, ctl, kval, cs
  FROM (SELECT sel.*,
               CASE WHEN dkey IS NOT NULL AND id NOT IN (SELECT message_id FROM claim) THEN 4
                    WHEN cardinality($3::int8[]) = 0 THEN 2
                    ELSE 0 END AS status
        FROM sel) s
  ORDER BY n
  RETURNING id, tier, received_at, partition_key, status
)";

// What follows either insert's messages CTE (m): a delivery per destination
// (dl), the source state (st).
inline constexpr char kInsertTail[] = R"(), dl AS (
  INSERT INTO deliveries (message_id, destination_id, tier, received_at, partition_key)
  SELECT m.id, dest, m.tier, m.received_at, m.partition_key
  FROM m CROSS JOIN unnest($3::int8[]) AS dest
  WHERE m.status = 0
), st AS (
  INSERT INTO source_state (interface_id, key, value)
  SELECT $1::int8, $9::text, $10::jsonb WHERE $9::text IS NOT NULL
  ON CONFLICT (interface_id, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
)
)";

// kInsertBody for messages none of which has a dedupe key: no claim, and
// no per-row test against it. $7 is not read (send NULL). ~5-8% of a
// 500-row batch's time, and the common case for files and MLLP groups.
inline constexpr char kInsertPlainBody[] = R"(
WITH cfg AS MATERIALIZED (
  SELECT set_config('synchronous_commit',
           CASE WHEN $4::bool THEN 'off' ELSE current_setting('synchronous_commit') END, true) AS sc,
         $7::text[] AS unread
), sel AS (
  SELECT n, payload, pkey, nullif(origin, 0) AS origin, mtype, ctl, kval, cs,
         nextval('messages_id_seq') AS id
  FROM unnest($5::bytea[], $6::int4[], $8::int8[], $11::text[], $12::text[], $13::text[],
              $14::text[]) WITH ORDINALITY AS t(payload, pkey, origin, mtype, ctl, kval, cs, n)
    CROSS JOIN cfg
  ORDER BY n
), m AS (
  INSERT INTO messages (id, tier, interface_id, partition_key, status, last_error, origin_id,
                        payload, message_type, control_id, key_value, charset)
  SELECT id, $2::int2, $1::int8, pkey,
         CASE WHEN cardinality($3::int8[]) = 0 THEN 2 ELSE 0 END,
         CASE WHEN cardinality($3::int8[]) = 0 THEN 'no destination' END,
         origin, payload, mtype, ctl, kval, cs
  FROM sel
  ORDER BY n
  RETURNING id, tier, received_at, partition_key, status
)";

inline constexpr auto kInsertMessagesText =
    concat(kInsertBody, kInsertTail, R"(SELECT id, tier, received_at::text, status FROM m ORDER BY id
)");
constexpr const char* kInsertMessages = kInsertMessagesText.data();
inline constexpr auto kInsertPlainMessagesText =
    concat(kInsertPlainBody, kInsertTail, R"(SELECT id, tier, received_at::text, status FROM m ORDER BY id
)");
constexpr const char* kInsertPlainMessages = kInsertPlainMessagesText.data();

// kInsertMessages for a source's batch (files, schedules), answering only
// how many were stored and how many were duplicates: nobody reads a
// batch's rows, and returning 500 of them (a sort, a timestamp as text
// each, parsing them here) cost ~10% of a 500-row batch.
inline constexpr auto kInsertBatchText = concat(kInsertBody, kInsertTail, R"(
SELECT count(*), count(*) FILTER (WHERE status = 4) FROM m
)");
constexpr const char* kInsertBatch = kInsertBatchText.data();
inline constexpr auto kInsertPlainBatchText = concat(kInsertPlainBody, kInsertTail, R"(
SELECT count(*), 0 FROM m
)");
constexpr const char* kInsertPlainBatch = kInsertPlainBatchText.data();

// The common case of kInsertMessages, one message without a dedupe key or
// source state, as a plain statement: the unnest/ordinality/claim machinery
// cost about a sixth of the insert's time at one connection. $1 interface,
// $2 tier, $3 destination ids, $4 relaxed, $5 partition key, $6 origin id
// (0: none), $7 payload, $8..$11 type, control id, key value, charset.
constexpr const char* kInsertOneMessage = R"(
WITH m AS (
  INSERT INTO messages (id, tier, interface_id, partition_key, status, last_error, origin_id,
                        payload, message_type, control_id, key_value, charset)
  SELECT nextval('messages_id_seq'), $2::int2, $1::int8, $5::int4,
         CASE WHEN cardinality($3::int8[]) = 0 THEN 2 ELSE 0 END,
         CASE WHEN cardinality($3::int8[]) = 0 THEN 'no destination' END,
         nullif($6::int8, 0), $7::bytea, $8::text, $9::text, $10::text, $11::text
  FROM (SELECT set_config('synchronous_commit',
                 CASE WHEN $4::bool THEN 'off' ELSE current_setting('synchronous_commit') END,
                 true)) AS cfg
  RETURNING id, tier, received_at, partition_key, status
), dl AS (
  INSERT INTO deliveries (message_id, destination_id, tier, received_at, partition_key)
  SELECT m.id, dest, m.tier, m.received_at, m.partition_key
  FROM m CROSS JOIN unnest($3::int8[]) AS dest
  WHERE m.status = 0
)
SELECT id, tier, received_at::text, status FROM m
)";

// A message intake refuses to deliver but keeps for an operator to see (a
// file's record holding an MLLP framing byte): stored quarantined (status 3)
// with the reason in last_error, no delivery, its dedupe key not claimed (a
// corrected copy must not be a duplicate), with the source's progress in
// the same statement. $1 interface, $2 tier, $3 partition key, $4 reason,
// $5 payload, $6..$9 type, control id, key value, charset, $10 source_state
// key (NULL: none), $11 its JSON.
constexpr const char* kInsertRefusedMessage = R"(
WITH m AS (
  INSERT INTO messages (id, tier, interface_id, partition_key, status, last_error, payload,
                        message_type, control_id, key_value, charset)
  VALUES (nextval('messages_id_seq'), $2::int2, $1::int8, $3::int4, 3, $4::text, $5::bytea,
          $6::text, $7::text, $8::text, $9::text)
  RETURNING id, tier, received_at, status
), st AS (
  INSERT INTO source_state (interface_id, key, value)
  SELECT $1::int8, $10::text, $11::jsonb WHERE $10::text IS NOT NULL
  ON CONFLICT (interface_id, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
)
SELECT id, tier, received_at::text, status FROM m
)";

// A destination's queue: the partial index deliveries_queue walked in
// message order, stopping after 50 rows (Store::kQueueReadRows); then each
// row's message by its full key (one partition each). Both written for the
// generic plan: a LIMIT parameter it cannot see made it sort the whole
// backlog, and a join it hash-joined against a scan of every message
// (25 ms with 100,000 stored); LIMIT 1 keeps the lookup from being
// flattened into that join. `(destination_id, message_id) > ($1, $2)` rather
// than `message_id > $2`: the latter let it walk the primary key (message
// id first) past every delivered row (128 ms with 1,000,000 ahead).
//
// The read also stops at $4 bytes of payload (StoreOptions::queueReadBytes; the
// first row always comes, whatever its size): fifty 64 MB messages would
// be 3.2 GB in the supervisor at once. octet_length() reads a stored
// value's size without fetching it, so the rows left out are never read
// from TOAST. `rows_seen` (the rows before that cut) tells the caller
// whether more are waiting. Results come back binary (bytea as its bytes,
// not hex text at twice the size).
constexpr const char* kReadQueue = R"(
SELECT q.message_id, q.tier, q.received_at::text, q.partition_key, q.attempts, q.payload,
       q.origin_id, q.rows_seen
FROM (SELECT d.message_id, d.tier, d.received_at, d.partition_key, d.attempts, m.payload,
             m.origin_id,
             sum(octet_length(m.payload)) OVER (ORDER BY d.message_id)
               - octet_length(m.payload) AS bytes_before,
             count(*) OVER () AS rows_seen
      FROM (SELECT message_id, tier, received_at, partition_key, attempts
            FROM deliveries
            WHERE destination_id = $1 AND status = 0 AND (destination_id, message_id) > ($1, $2)
              AND (cardinality($3::int4[]) = 0 OR partition_key = ANY ($3::int4[]))
            ORDER BY message_id
            LIMIT 50) d
      CROSS JOIN LATERAL (SELECT payload, origin_id FROM messages
                          WHERE id = d.message_id AND tier = d.tier
                            AND received_at = d.received_at
                          LIMIT 1) m) q
WHERE q.bytes_before < $4::int8
ORDER BY q.message_id
)";

// Statements that find deliveries of given messages say `d.status + 0 = 0`,
// not `d.status = 0`: the generic plan otherwise picks the partial queue
// index (its predicate is status = 0) and filters a destination's whole
// backlog (74 ms a call with 100,000 waiting) instead of looking the
// messages up in the primary key.
//
// Statements that find rows by (id, tier, received_at) also carry the batch's
// tiers and received_at span as plain parameters: the store's connections use
// generic plans (planning on every call cost more than the statements), and
// only parameters let the executor skip the other partitions at start-up.
//
// Each of them also finds its rows in the held area (tier 0, the literal 0
// beside the tiers): retention may move a message and its deliveries there
// between a loop's read and its flush (schema/retention.h). Matching
// nothing then would leave the delivery pending, to be sent again after
// newer messages of its lane. A statement that waited on a row while it
// moved fails with 40001 and is run again (Store::retryable), and finds it.

// The part both flushes share (kFlushUpdate after kFlushCfg), written once
// so the two can't drift: the cfg CTE that turns the flush wait off (why:
// below), and the update of this destination's pending deliveries.
inline constexpr char kFlushCfg[] = R"(
WITH cfg AS MATERIALIZED (
  SELECT set_config('synchronous_commit', 'off', true) AS sc
))";
inline constexpr char kFlushUpdate[] = R"(
UPDATE deliveries d
SET status = u.status,
    attempts = d.attempts + 1,
    last_error = u.err,
    output = u.out,
    updated_at = now()
FROM unnest($2::int8[], $3::int2[], $4::text[], $5::int2[], $6::text[], $7::bytea[])
       AS u(id, tier, at, status, err, out), cfg
WHERE d.destination_id = $1 AND d.message_id = u.id AND d.tier IN (u.tier, 0)
  AND d.received_at = u.at::timestamptz AND d.status + 0 = 0
  AND d.message_id = ANY ($2::int8[]) AND d.tier IN ($10::int2, $11::int2, $12::int2, 0)
  AND d.received_at BETWEEN $8::timestamptz AND $9::timestamptz
)";

// The status flush: only rows still pending change. $8, $9: the span;
// $10..$12 the distinct tiers (RefArrays::tierA..C), for pruning.
// Like kFlushSettleOnly, and the settle after it, its commit does not wait
// for the WAL flush: a database crash can only make deliveries pending
// again (sent again: at least once); the settle comes later in the WAL, so
// it is never kept without the flush it read. bench-fanout, 25 destinations:
// 1,683-1,794 ACKs/s against 1,267-1,450 with both waiting.
inline constexpr auto kFlushStatusesText = concat(kFlushCfg, kFlushUpdate, R"(RETURNING d.message_id
)");
constexpr const char* kFlushStatuses = kFlushStatusesText.data();

// The status flush of an interface's only destination, with the settle in
// the same statement: with one delivery per message there is no other
// destination to race (the write skew the separate settle guards against),
// so the message takes its delivery's final status as that row changes.
// Same parameters as kFlushStatuses; answers the messages whose delivery
// changed. A resend (message lock, then delivery) and this statement
// (delivery, then message) can deadlock: the retry on 40P01 covers it.
// Its commit skips the WAL flush wait (synchronous_commit off), as a route's
// commit (finishRouted) does: the delivery and its message are lost or kept
// together, and only a crash of the database server itself (not of the
// engine) can lose them, within ~0.6 s of the commit; those deliveries are
// then pending again and sent again, which at-least-once allows. Waiting
// instead put a second fsync beside every batch of acknowledgements:
// bench-ingest strict at 16 connections 0.61-0.64 of pgbench with it,
// 0.76-0.81 without (same runs, alternated). The message update finds each
// row by the delivery's key alone: with `m.id = ANY ($2)` beside it, the
// generic plan re-scanned the whole batch for every delivery (50 x 50
// lookups, 4 ms a batch; 1 ms without).
inline constexpr auto kFlushSettleOnlyText = concat(kFlushCfg, R"(, d AS ()", kFlushUpdate, R"(
  RETURNING d.message_id, d.tier, d.received_at, d.status
), m AS (
  UPDATE messages m
  SET status = d.status
  FROM d
  WHERE m.id = d.message_id AND m.tier = d.tier AND m.received_at = d.received_at
    AND m.tier IN ($10::int2, $11::int2, $12::int2, 0)
    AND m.received_at BETWEEN $8::timestamptz AND $9::timestamptz
    AND d.status <> 0 AND m.status + 0 = 0
)
SELECT message_id FROM d
)");
constexpr const char* kFlushSettleOnly = kFlushSettleOnlyText.data();

// Before settling, without locks: which of these messages still have a
// delivery pending ($1 ids, $2 $5 $6 the distinct tiers, $3..$4 the span).
constexpr const char* kSettlePending = R"(
SELECT DISTINCT d.message_id
FROM deliveries d
WHERE d.message_id = ANY ($1::int8[]) AND d.tier IN ($2::int2, $5::int2, $6::int2, 0)
  AND d.received_at BETWEEN $3::timestamptz AND $4::timestamptz AND d.status + 0 = 0
)";

// Settle, first statement: the message rows locked in id order. $1 ids, $2
// $5 $6 the distinct tiers, $3..$4 the span (ids are unique: the span and
// tiers only prune).
constexpr const char* kSettleLock = R"(
WITH cfg AS MATERIALIZED (
  SELECT set_config('synchronous_commit', 'off', true) AS sc
)
SELECT m.id
FROM messages m, cfg
WHERE m.id = ANY ($1::int8[]) AND m.tier IN ($2::int2, $5::int2, $6::int2, 0)
  AND m.received_at BETWEEN $3::timestamptz AND $4::timestamptz
ORDER BY m.id
FOR UPDATE OF m
)";

// Settle, second statement (a fresh snapshot, taken after the locks): the
// overall status from the deliveries: pending while any is, then
// quarantined if any is, else sent if any is, else filtered. OFFSET 0 keeps
// s a subquery of its own: pulled up, its status subplan ran twice a row
// (once for SET, once for the filter beside it).
constexpr const char* kSettleWrite = R"(
UPDATE messages m
SET status = s.status
FROM (SELECT m2.id, m2.tier, m2.received_at,
             (SELECT CASE WHEN bool_or(d.status = 0) THEN 0
                          WHEN bool_or(d.status = 3) THEN 3
                          WHEN bool_or(d.status = 1) THEN 1
                          ELSE 2 END
              FROM deliveries d
              WHERE d.message_id = m2.id AND d.tier = m2.tier
                AND d.received_at = m2.received_at) AS status
      FROM messages m2
      WHERE m2.id = ANY ($1::int8[]) AND m2.tier IN ($2::int2, $5::int2, $6::int2, 0)
        AND m2.received_at BETWEEN $3::timestamptz AND $4::timestamptz
      OFFSET 0) s
WHERE m.id = s.id AND m.tier = s.tier AND m.received_at = s.received_at
  AND m.id = ANY ($1::int8[]) AND m.tier IN ($2::int2, $5::int2, $6::int2, 0)
  AND m.received_at BETWEEN $3::timestamptz AND $4::timestamptz
  AND m.status <> 4 AND m.status <> s.status
)";

// A route's flush ($1..$3 the source messages' keys, $4 the route
// destination, $5..$7 the target payloads, lanes and dedupe keys, $8 target
// interface, $9 its tier, $10 its destinations, $11..$12 the source span,
// $13..$16 the targets' MessageColumns). Target messages are stored
// for exactly the deliveries this statement finished (done); a retry after
// the commit finds them done and stores nothing.
constexpr const char* kFinishRouted = R"(
WITH cfg AS MATERIALIZED (
  SELECT set_config('synchronous_commit', 'off', true) AS sc
), done AS (
  UPDATE deliveries d
  SET status = 1, attempts = d.attempts + 1, last_error = NULL, updated_at = now()
  FROM unnest($1::int8[], $2::int2[], $3::text[]) AS u(id, tier, at), cfg
  WHERE d.destination_id = $4 AND d.message_id = u.id AND d.tier IN (u.tier, 0)
    AND d.received_at = u.at::timestamptz AND d.status + 0 = 0
    AND d.message_id = ANY ($1::int8[]) AND (d.tier = ANY ($2::int2[]) OR d.tier = 0)
    AND d.received_at BETWEEN $11::timestamptz AND $12::timestamptz
  RETURNING d.message_id
), input AS (
  SELECT * FROM unnest($1::int8[], $5::bytea[], $6::int4[], $7::text[], $13::text[], $14::text[],
                       $15::text[], $16::text[])
    WITH ORDINALITY AS t(origin, payload, pkey, dkey, mtype, ctl, kval, cs, n)
), sel AS (
  SELECT n, payload, pkey, dkey, origin, mtype, ctl, kval, cs, nextval('messages_id_seq') AS id
  FROM input WHERE origin IN (SELECT message_id FROM done) ORDER BY n
), claim AS (
  INSERT INTO dedupe_keys (interface_id, key, message_id)
  SELECT $8::int8, dkey, id FROM sel WHERE dkey IS NOT NULL ORDER BY n
  ON CONFLICT DO NOTHING
  RETURNING message_id
), m AS (
  INSERT INTO messages (id, tier, interface_id, partition_key, dedupe_key, status, last_error,
                        origin_id, payload, message_type, control_id, key_value, charset)
  SELECT id, $9::int2, $8::int8, pkey, dkey, s.status,
         CASE s.status WHEN 4 THEN 'duplicate: dedupe key seen before'
                       WHEN 2 THEN 'no destination' END,
         origin, payload, mtype, ctl, kval, cs
  FROM (SELECT sel.*,
               CASE WHEN dkey IS NOT NULL AND id NOT IN (SELECT message_id FROM claim) THEN 4
                    WHEN cardinality($10::int8[]) = 0 THEN 2
                    ELSE 0 END AS status
        FROM sel) s
  ORDER BY n
  RETURNING id, tier, received_at, partition_key, status, origin_id
), dl AS (
  INSERT INTO deliveries (message_id, destination_id, tier, received_at, partition_key)
  SELECT m.id, dest, m.tier, m.received_at, m.partition_key
  FROM m CROSS JOIN unnest($10::int8[]) AS dest
  WHERE m.status = 0
)
SELECT id, tier, received_at::text, status, origin_id FROM m ORDER BY id
)";

// Resend, after the message lock: the delivery back to pending.
constexpr const char* kResendDelivery = R"(
UPDATE deliveries SET status = 0, last_error = NULL, updated_at = now()
WHERE message_id = $1 AND tier IN ($2::int2, 0) AND received_at = $3::timestamptz
  AND destination_id = $4 AND status <> 0
)";
constexpr const char* kResendMessage = R"(
UPDATE messages SET status = 0
WHERE id = $1 AND tier IN ($2::int2, 0) AND received_at = $3::timestamptz AND status <> 0
)";
constexpr const char* kLockOneMessage = R"(
SELECT id FROM messages
WHERE id = $1 AND tier IN ($2::int2, 0) AND received_at = $3::timestamptz
FOR UPDATE
)";

// Start-up reconcile, each step in pages of at most $3 rows, a statement
// each, repeated until a page comes back short: a backlog of a million
// messages and a new destination would otherwise be one statement past the
// store's statement_timeout, and the engine could never start. Each page
// leaves what it did out of the next (NOT EXISTS, status = 0).
//
// Reconcile 1: pending messages lacking a delivery to a destination. The
// messages are locked (FOR KEY SHARE) while their deliveries are added:
// retention's move to the held area skips a locked message, and a message
// it moved meanwhile fails this statement with 40001 (run again, it reads
// the message where it is now), so a delivery is never inserted beside a
// message that has left its partition.
constexpr const char* kReconcileMissing = R"(
INSERT INTO deliveries (message_id, destination_id, tier, received_at, partition_key)
SELECT m.id, dest, m.tier, m.received_at, m.partition_key
FROM messages m CROSS JOIN unnest($2::int8[]) AS dest
WHERE m.interface_id = $1 AND m.status = 0
  AND NOT EXISTS (SELECT 1 FROM deliveries d
                  WHERE d.message_id = m.id AND d.destination_id = dest
                    AND d.tier = m.tier AND d.received_at = m.received_at)
ORDER BY m.id
LIMIT $3
FOR KEY SHARE OF m
ON CONFLICT DO NOTHING
)";

// Reconcile 2: pending deliveries to destinations the project no longer has.
constexpr const char* kReconcileRemoved = R"(
UPDATE deliveries d
SET status = 2, last_error = 'destination removed', updated_at = now()
FROM (SELECT p.message_id, p.destination_id, p.tier, p.received_at
      FROM deliveries p JOIN destinations ds ON p.destination_id = ds.id
      WHERE ds.interface_id = $1 AND NOT (ds.id = ANY ($2::int8[])) AND p.status = 0
      LIMIT $3) page
WHERE d.message_id = page.message_id AND d.destination_id = page.destination_id
  AND d.tier = page.tier AND d.received_at = page.received_at
)";

// Reconcile 3: pending deliveries whose message is already finished (an
// older version finished it) take the message's status.
constexpr const char* kReconcileFinished = R"(
UPDATE deliveries d
SET status = page.status, updated_at = now()
FROM (SELECT p.message_id, p.destination_id, p.tier, p.received_at, m.status
      FROM messages m JOIN deliveries p
        ON p.message_id = m.id AND p.tier = m.tier AND p.received_at = m.received_at
      WHERE m.interface_id = $1 AND m.status IN (1, 2, 3) AND p.status = 0
      LIMIT $2) page
WHERE d.message_id = page.message_id AND d.destination_id = page.destination_id
  AND d.tier = page.tier AND d.received_at = page.received_at
)";

// Messages left pending with no pending delivery.
constexpr const char* kFinishedButPending = R"(
SELECT m.id, m.tier, m.received_at::text
FROM messages m
WHERE m.interface_id = $1 AND m.status = 0
  AND NOT EXISTS (SELECT 1 FROM deliveries d
                  WHERE d.message_id = m.id AND d.tier = m.tier
                    AND d.received_at = m.received_at AND d.status = 0)
ORDER BY m.id
LIMIT $2
)";

// Pending deliveries per destination: the partial queue index holds only
// pending rows (status = 0), so this reads what waits and nothing else.
constexpr const char* kWaitingCounts = R"(
SELECT destination_id, count(*) FROM deliveries WHERE status = 0 GROUP BY destination_id
)";

constexpr const char* kQuarantinedCounts = R"(
SELECT destination_id, count(*) FROM deliveries WHERE status = 3 GROUP BY destination_id
)";

// Interfaces with something waiting: two loose index scans (one step per
// distinct value) over the pending partial indexes; each with whether it
// has a pending delivery (else only pending messages, whose deliveries are
// all done).
constexpr const char* kWithWaiting = R"(
WITH RECURSIVE mi AS (
  (SELECT interface_id FROM messages WHERE status = 0 ORDER BY interface_id LIMIT 1)
  UNION ALL
  SELECT (SELECT interface_id FROM messages
          WHERE status = 0 AND interface_id > mi.interface_id
          ORDER BY interface_id LIMIT 1)
  FROM mi WHERE mi.interface_id IS NOT NULL
), dd AS (
  (SELECT destination_id FROM deliveries WHERE status = 0 ORDER BY destination_id LIMIT 1)
  UNION ALL
  SELECT (SELECT destination_id FROM deliveries
          WHERE status = 0 AND destination_id > dd.destination_id
          ORDER BY destination_id LIMIT 1)
  FROM dd WHERE dd.destination_id IS NOT NULL
)
SELECT w.interface_id, bool_or(w.delivery)
FROM (SELECT interface_id, false AS delivery FROM mi WHERE interface_id IS NOT NULL
      UNION ALL
      SELECT ds.interface_id, true FROM dd JOIN destinations ds ON ds.id = dd.destination_id) w
GROUP BY w.interface_id
ORDER BY 1
)";

constexpr const char* kHasPending = R"(
SELECT EXISTS (SELECT 1 FROM messages WHERE interface_id = $1 AND status = 0)
)";

// Every name of a project in one statement each (1,001 interfaces took
// 2,002 round trips one by one at start-up). The insert adds only names the
// snapshot lacks, so a start that registers nothing new writes and locks
// nothing; the SELECT sees the snapshot from before the insert, so the two
// halves never repeat a row. A name another engine added meanwhile is
// skipped by ON CONFLICT and missing from both halves: the caller asks
// again.
constexpr const char* kRegisterInterfaces = R"(
WITH want AS (SELECT DISTINCT unnest($1::text[]) AS name),
added AS (
  INSERT INTO interfaces (name)
  SELECT name FROM want WHERE NOT EXISTS (SELECT 1 FROM interfaces i WHERE i.name = want.name)
  ON CONFLICT (name) DO NOTHING
  RETURNING id, name)
SELECT id, name FROM added
UNION ALL
SELECT i.id, i.name FROM interfaces i JOIN want USING (name)
)";
// The same for destinations: $1 their interfaces' ids, $2 their names, in
// pairs.
constexpr const char* kRegisterDestinations = R"(
WITH want AS (SELECT DISTINCT * FROM unnest($1::int8[], $2::text[]) AS w(interface_id, name)),
added AS (
  INSERT INTO destinations (interface_id, name)
  SELECT interface_id, name FROM want
  WHERE NOT EXISTS (SELECT 1 FROM destinations d
                    WHERE d.interface_id = want.interface_id AND d.name = want.name)
  ON CONFLICT (interface_id, name) DO NOTHING
  RETURNING id, interface_id, name)
SELECT id, interface_id, name FROM added
UNION ALL
SELECT d.id, d.interface_id, d.name FROM destinations d JOIN want USING (interface_id, name)
)";

constexpr const char* kGetSourceState =
    "SELECT value::text FROM source_state WHERE interface_id = $1 AND key = $2";
constexpr const char* kPutSourceState = R"(
INSERT INTO source_state (interface_id, key, value) VALUES ($1, $2, $3::jsonb)
ON CONFLICT (interface_id, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
)";

constexpr const char* kPurgeDedupeKeys = R"(
DELETE FROM dedupe_keys WHERE seen_at < now() - $1::int8 * interval '1 second'
)";

constexpr const char* kEnsurePartitions = R"(
SELECT created, waited FROM ductus_ensure_partitions($1::text, $2::int2, $3::date, $4::int4, $5::int4)
)";

}  // namespace ductus::store::sql
