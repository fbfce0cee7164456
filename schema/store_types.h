// The store's own input and output types. They name ids, not config
// objects: the caller (intake, delivery loops) maps its project model onto
// these, so the store does not depend on the config code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ductus::store {

// Retention tier: the window in days (1w, 3w, 7w). Also the LIST partition
// value of messages and deliveries.
enum class Tier : int16_t { Week1 = 7, Week3 = 21, Week7 = 49 };

// messages.status and deliveries.status (deliveries never hold Duplicate).
enum class MessageStatus : int16_t {
  Pending = 0,
  Sent = 1,
  Filtered = 2,
  Quarantined = 3,
  Duplicate = 4,
};

// A message's full primary key: every statement that names one message
// passes all three, so Postgres touches one partition instead of all.
// receivedAt is Postgres' own text of the timestamp (exact to the
// microsecond, read back with ::timestamptz).
struct MessageRef {
  int64_t id = 0;
  Tier tier = Tier::Week7;
  std::string receivedAt;
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
