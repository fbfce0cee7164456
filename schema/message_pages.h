// What the API reads of messages and deliveries, as typed rows: the
// quarantine list, the message browser's pages, one message with its
// deliveries, its payload and saved outputs. The list and the pages are
// read through their indexes (migrations 0005 and 0006; tests/api EXPLAIN
// them), one message by its id. Each call runs on a connection of the pool
// given and answers on its loop.
#pragma once

#include <cstdint>
#include <functional>
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

// One page of an interface's messages, as the caller asked for it.
struct BrowseQuery {
  int64_t interfaceId = 0;
  std::optional<int64_t> before;  // ids below this one
  int64_t limit = 50;
  std::optional<MessageStatus> status;
  std::optional<std::string> from;  // received_at >= (timestamptz text)
  std::optional<std::string> to;    // received_at <
  // MSH-9 as stored ("ADT^A01^ADT_A01"): equal, or its first components
  // ("ADT^A01", "ADT"), never a part of one ("ADT^A0").
  std::optional<std::string> type;
  std::optional<std::string> controlId;  // equal (searchableText)
  std::optional<std::string> key;        // equal (searchableText)
};

// A message's delivery to one destination. A page's rows carry the first
// three fields; one message's (messageDetail) all of them.
struct DeliveryRow {
  std::string destination;
  MessageStatus status = MessageStatus::Pending;  // never Duplicate
  int64_t attempts = 0;
  std::optional<std::string> lastError;
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
};

// limit + 1 rows, newest first, columns id, received_at (RFC 3339), status,
// type, control id, key value, last_error, origin_id, the deliveries as
// JSON text [{destination, status (a number), attempts}]. Public for the
// test that EXPLAINs it.
SqlStatement browseSelect(const BrowseQuery& q);

struct MessagePage {
  std::vector<MessageRow> rows;  // at most q.limit
  std::optional<int64_t> next;   // `before` for the next page; nullopt: the last
};

// The page of the interface named (q.interfaceId is looked up); NotFound
// "no interface NAME" when there is none.
void messagePage(PgPool& pool, std::string interface, BrowseQuery q,
                 std::function<void(Result<MessagePage>)> cb);

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
