// The store's own input and output types. They name ids, not config
// objects: the caller (intake, delivery loops) maps its project model onto
// these, so the store does not depend on the config code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ductus::store {

// Retention tier: the window in days (1w, 3w, 7w). Also the LIST partition
// value of messages and deliveries. Held (0) is no window: the held area,
// where retention moves the unfinished messages of an expired period
// (schema/retention.h); nothing is stored there directly.
enum class Tier : int16_t { Held = 0, Week1 = 7, Week3 = 21, Week7 = 49 };

// messages.status and deliveries.status (deliveries never hold Duplicate).
enum class MessageStatus : int16_t {
  Pending = 0,
  Sent = 1,
  Filtered = 2,
  Quarantined = 3,
  Duplicate = 4,
};

// "pending", "sent", "filtered", "quarantined", "duplicate": the name the
// API gives a status.
constexpr const char* statusName(MessageStatus s) {
  switch (s) {
    case MessageStatus::Pending:
      return "pending";
    case MessageStatus::Sent:
      return "sent";
    case MessageStatus::Filtered:
      return "filtered";
    case MessageStatus::Quarantined:
      return "quarantined";
    case MessageStatus::Duplicate:
      return "duplicate";
  }
  return "duplicate";
}

// The status of that name; nullopt for any other text.
constexpr std::optional<MessageStatus> parseStatus(std::string_view name) {
  for (auto s : {MessageStatus::Pending, MessageStatus::Sent, MessageStatus::Filtered,
                 MessageStatus::Quarantined, MessageStatus::Duplicate})
    if (name == statusName(s)) return s;
  return std::nullopt;
}

// A status column's value; one this version doesn't know reads as the
// last (Duplicate), as the API has always shown it.
constexpr MessageStatus statusFromColumn(long long v) {
  return v >= 0 && v <= 4 ? static_cast<MessageStatus>(v) : MessageStatus::Duplicate;
}

// A message's full primary key: every statement that names one message
// passes all three, so Postgres touches one partition instead of all.
// receivedAt is Postgres' own text of the timestamp (exact to the
// microsecond, read back with ::timestamptz).
struct MessageRef {
  int64_t id = 0;
  Tier tier = Tier::Week7;
  std::string receivedAt;
};

// A value read from a message as a text column under a btree index keeps
// it (dedupe keys, the browser's columns): ISO-8859-1 bytes already read
// as UTF-8, each NUL written as \X00\ (text refuses NUL), and a value longer
// than kMaxSearchableBytes as "sha256:<hex>" of that text (an index row has
// a size limit). A search applies the same to what it looks for.
// (Defined in store.cpp.)
constexpr size_t kMaxSearchableBytes = 512;
std::string searchableText(std::string_view raw);

// What the API's message browser searches by, read at intake with the keys
// (intake/message_keys.h) and stored in their own columns (migration 0006);
// nullopt: NULL. Text as searchableText() makes it.
struct MessageColumns {
  std::optional<std::string> type;       // HL7 MSH-9, components joined by '^'
  std::optional<std::string> controlId;  // HL7 MSH-10
  std::optional<std::string> keyValue;   // the ordering key's value (its lane's input)
  // "iso-8859-1" when the interface or MSH-18 said so; nullopt: UTF-8 where
  // the bytes are UTF-8, else ISO-8859-1 (how the SDK reads them).
  std::optional<std::string> charset;
  bool any() const { return type || controlId || keyValue || charset; }
};

struct NewMessage {
  int64_t interfaceId = 0;
  Tier tier = Tier::Week7;
  std::string payload;  // bytes, stored as they came
  int32_t partitionKey = 0;  // the lane (common/partition.h)
  std::optional<std::string> dedupeKey;
  std::vector<int64_t> destinationIds;  // one delivery each; none: stored filtered
  bool relaxed = false;  // durability: relaxed (synchronous_commit off, this commit only)
  std::optional<int64_t> originId;  // the source message of a routed one
  MessageColumns columns;
};

struct StoredMessage {
  MessageRef ref;
  MessageStatus status = MessageStatus::Pending;  // Duplicate for a dedupe hit
};

// What a batch stored: its messages, and how many of them were duplicates.
struct BatchStored {
  int64_t messages = 0;
  int64_t duplicates = 0;
};

struct BatchItem {
  std::string payload;
  int32_t partitionKey = 0;
  std::optional<std::string> dedupeKey;
  MessageColumns columns;
};

// source_state(interface, key) = value, written with the batch it accounts for.
struct SourceStateWrite {
  std::string key;
  std::string json;  // a JSON document
};

struct NewBatch {
  int64_t interfaceId = 0;
  Tier tier = Tier::Week7;
  std::vector<int64_t> destinationIds;
  bool relaxed = false;
  std::vector<BatchItem> items;
  std::optional<SourceStateWrite> state;
};

// One row of a destination's queue, with its message's payload.
struct QueuedDelivery {
  MessageRef message;
  int32_t partitionKey = 0;
  int32_t attempts = 0;
  std::string payload;
  std::optional<int64_t> originId;
};

// One read of a destination's queue: its first rows in message order, and
// whether more were waiting behind them (the read stopped at its row or
// byte limit), so the reader reads again at once instead of idling.
struct QueueRead {
  std::vector<QueuedDelivery> rows;
  bool more = false;
};

// A delivery's outcome for the status flush. Pending records an attempt
// (attempts + 1, last_error) and leaves the delivery queued.
struct DeliveryOutcome {
  MessageRef message;
  MessageStatus status = MessageStatus::Sent;
  std::optional<std::string> lastError;
  std::optional<std::string> output;  // save_output
};

struct RoutedItem {
  MessageRef source;  // the message whose delivery to the route finishes
  std::string payload;
  int32_t partitionKey = 0;
  std::optional<std::string> dedupeKey;
};

// A route destination's flush batch: its pending deliveries become sent, and
// for exactly those the target interface's messages are stored.
struct RoutedBatch {
  int64_t sourceDestinationId = 0;
  int64_t targetInterfaceId = 0;
  Tier targetTier = Tier::Week7;
  std::vector<int64_t> targetDestinationIds;
  std::vector<RoutedItem> items;
  // The browser's columns of each item, in the items' order (Intake reads
  // them with the target's keys); empty: none stored.
  std::vector<MessageColumns> columns;
};

struct RoutedMessage {
  int64_t sourceId = 0;
  StoredMessage stored;
};

struct ReconcileReport {
  int64_t deliveriesAdded = 0;     // pending messages lacking a delivery to a destination
  int64_t deliveriesFiltered = 0;  // pending deliveries to removed destinations
  int64_t deliveriesFinished = 0;  // pending deliveries of messages already finished
};

// An interface with something pending (Store::withWaiting).
struct WaitingInterface {
  int64_t id = 0;
  // A delivery of its is pending. When none is, every message of it that
  // is pending has all its deliveries done: left unsettled.
  bool deliveriesPending = false;
};

struct PartitionOptions {
  std::optional<std::string> firstDay;  // "YYYY-MM-DD"; default: today (UTC)
  int daysAhead = 3;
  int waitMs = 2000;  // lock_timeout, unless tomorrow's partition is missing
};

struct PartitionReport {
  int created = 0;
  int blocked = 0;   // table+tier pairs that gave up on the lock (retry next hour)
  bool waited = false;  // the last-resort rule applied somewhere
  std::vector<std::string> errors;  // anything else, one line per table+tier
};

struct StoreStats {
  int64_t serializationRetries = 0;  // 40001
  int64_t deadlockRetries = 0;       // 40P01
};

}  // namespace ductus::store
