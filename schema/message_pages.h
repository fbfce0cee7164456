// What the API reads of messages and deliveries, as typed rows: the
// quarantine list, the message browser's pages, one message with its
// deliveries, its payload and saved outputs. The list and the pages are
// read through their indexes (migrations 0005 and 0006; tests/api EXPLAIN
// them), one message by its id. Each call runs on a connection of the pool
// given and answers on its loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "schema/pg_pool.h"
#include "schema/pg_transaction.h"
#include "schema/store_types.h"

namespace ductus::store {

// ---- the quarantine list --------------------------------------------------

struct QuarantinedDelivery {
  int64_t messageId = 0;
  std::string interface;
  std::string destination;
  std::string receivedAt;  // RFC 3339, UTC, microseconds
  int64_t attempts = 0;
  std::optional<std::string> lastError;
  std::optional<std::string> updatedAt;  // RFC 3339
};

// Columns message id, interface, destination, received_at, attempts,
// last_error, updated_at: `limit` messages (ids below `before`, of
// `interface` only when named) with all their quarantined deliveries,
// newest first. Public for the test that EXPLAINs it.
SqlStatement quarantineSelect(std::optional<int64_t> before, int64_t limit,
                              const std::optional<std::string>& interface);

// quarantineSelect's rows, in its order.
void quarantinePage(PgPool& pool, std::optional<int64_t> before, int64_t limit,
                    std::optional<std::string> interface,
                    std::function<void(Result<std::vector<QuarantinedDelivery>>)> cb);

// ---- the message browser --------------------------------------------------

enum class BrowseOrder { NewestFirst, OldestFirst };

// A content search reads at most this many messages of its window a page
// (each payload read whole): a page that stops there says so (complete =
// false) and its `next` goes on from where it stopped.
inline constexpr int64_t kContentScanRows = 20000;

// A total is counted exactly up to this many messages; beyond, "at least".
inline constexpr int64_t kTotalCountCap = 1000;

// One page of messages, as the caller asked for it: an interface's (the
// browser) or every interface's (a search).
struct BrowseQuery {
  // nullopt: every interface (a search by control id, key value or
  // content; messagePage sets it from the name).
  std::optional<int64_t> interfaceId;
  std::optional<int64_t> before;  // ids below this one
  std::optional<int64_t> after;   // ids above this one
  BrowseOrder order = BrowseOrder::NewestFirst;
  int64_t limit = 50;
  std::optional<MessageStatus> status;
  // Messages with a delivery that failed: quarantined, or pending after
  // at least one try (it waits for its retry). Instead of `status`.
  bool errors = false;
  std::optional<std::string> from;  // received_at >= (timestamptz text)
  std::optional<std::string> to;    // received_at <
  // MSH-9 as stored ("ADT^A01^ADT_A01"): equal, or its first components
  // ("ADT^A01", "ADT"), never a part of one ("ADT^A0").
  std::optional<std::string> type;
  std::optional<std::string> controlId;  // equal (searchableText)
  std::optional<std::string> key;        // equal (searchableText)
  // A content search: messages whose payload holds any of these byte
  // strings (the text as UTF-8, and as ISO-8859-1 where that differs).
  // Empty: none. The caller bounds the window (from, to); a page reads at
  // most scanRows messages of it.
  std::vector<std::string> contains;
  int64_t scanRows = kContentScanRows;
  // Count the total (MessagePage::total); an export walking page after
  // page counted once, at its start (exportScope).
  bool total = true;
};

// A message's delivery to one destination. A page's rows carry all but
// updatedAt and outputSaved, lastError cut to kListErrorChars characters;
// one message's (messageDetail) all of them, whole.
inline constexpr int kListErrorChars = 500;
struct DeliveryRow {
  std::string destination;
  MessageStatus status = MessageStatus::Pending;  // never Duplicate
  int64_t attempts = 0;
  std::optional<std::string> lastError;
  // Pending, and its destination is paused (destination_pauses): it waits
  // for an operator's resume, not for a retry.
  bool paused = false;
  std::optional<std::string> updatedAt;  // RFC 3339
  bool outputSaved = false;
};

struct MessageRow {
  int64_t id = 0;
  std::string receivedAt;  // RFC 3339
  MessageStatus status = MessageStatus::Pending;
  std::optional<std::string> type, controlId, key, lastError;
  std::optional<int64_t> originId;
  std::vector<DeliveryRow> deliveries;  // by destination name
  std::string interface;
  // A duplicate's original: the message that holds the dedupe key's claim
  // (dedupe_keys), while the claim is kept; nullopt otherwise.
  std::optional<int64_t> duplicateOf;
  // An edited copy's original (origin_id in the same interface: a routed
  // copy's origin is another interface's message, since route loops are
  // refused), and a message's edited copies, oldest first.
  std::optional<int64_t> editedFrom;
  std::vector<int64_t> editedTo;
};

// Columns: see pageRow() in message_pages.cpp; at most limit + 1 messages
// in the order asked (a content search: the matches, and the last message
// it read). Public for the test that EXPLAINs it.
SqlStatement browseSelect(const BrowseQuery& q);

// The count of the messages the query's filters match (its cursor, before
// and after, left out), stopping at kTotalCountCap + 1. Public for the
// test that EXPLAINs it.
SqlStatement browseCount(const BrowseQuery& q);

struct MessageTotal {
  int64_t count = 0;
  bool exact = true;  // false: at least `count`
};

struct MessagePage {
  std::vector<MessageRow> rows;  // at most q.limit
  // `before` (newest first) or `after` (oldest first) for the next page;
  // nullopt: the last.
  std::optional<int64_t> next;
  // Of the whole list (cursor aside); nullopt for a content search, whose
  // count would read every payload of its window.
  std::optional<MessageTotal> total;
  // A content search: the messages this page read, and false when it
  // stopped at scanRows (fewer than `limit` rows then says nothing of the
  // rest of the window; `next` goes on).
  int64_t scanned = 0;
  bool complete = true;
};

// The page of the interface named (q.interfaceId is looked up); NotFound
// "no interface NAME" when there is none.
void messagePage(PgPool& pool, std::string interface, BrowseQuery q,
                 std::function<void(Result<MessagePage>)> cb);

// The page of every interface's messages (q.interfaceId ignored).
void messageSearch(PgPool& pool, BrowseQuery q, std::function<void(Result<MessagePage>)> cb);

// ---- an export ------------------------------------------------------------

// What an export (api/message_export.h) finds before its first row: the
// messages its filters match (q's cursor aside), counted up to `cap` (more:
// at least one beyond), and the newest of them, below which a newest-first
// walk starts (messages stored meanwhile are not in it). NotFound "no
// interface NAME" when there is none.
struct ExportScope {
  int64_t interfaceId = 0;
  int64_t count = 0;  // at most cap
  bool more = false;
  std::optional<int64_t> newest;
};
void exportScope(PgPool& pool, std::string interface, BrowseQuery q, int64_t cap,
                 std::function<void(Result<ExportScope>)> cb);

// The payloads of `ids` (bytes as stored, and the charset intake
// recorded), by id; an id no message has is left out (retention dropped it).
struct StoredPayload {
  std::string bytes;
  std::optional<std::string> charset;
};
void messagePayloads(PgPool& pool, std::vector<int64_t> ids,
                     std::function<void(Result<std::map<int64_t, StoredPayload>>)> cb);

// ---- one message ------------------------------------------------------------

struct MessageDetail {
  MessageRow row;  // deliveries with every field
  std::string interface;
  std::optional<std::string> dedupeKey;
  int64_t lane = 0;
  int64_t tier = 0;
  int64_t bytes = 0;  // the payload's
  std::optional<std::string> charset;
};

// NotFound "no message ID" when there is none.
void messageDetail(PgPool& pool, int64_t id, std::function<void(Result<MessageDetail>)> cb);

// The payload and each saved output, as stored (bytes).
struct MessagePayload {
  std::string interface;
  std::string payload;
  std::optional<std::string> charset;
  struct Output {
    std::string destination;
    std::string bytes;
  };
  std::vector<Output> outputs;
};

// NotFound "no message ID" when there is none.
void messagePayload(PgPool& pool, int64_t id, std::function<void(Result<MessagePayload>)> cb);

// What an edit starts from: the original's interface (whose keys the copy
// is read with) and the charset it was read in. NotFound when none.
struct EditSource {
  std::string interface;
  std::optional<std::string> charset;
};
void editSource(PgPool& pool, int64_t id, std::function<void(Result<EditSource>)> cb);

}  // namespace ductus::store
