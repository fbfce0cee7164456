// What an operator changes of stored messages (the API's resend, dismiss
// and edit), each in one transaction on a connection of the pool given:
// the messages' rows locked first in id order, as Store::settle locks them,
// so a settle running beside an action sees its change instead of
// overwriting it; then the deliveries, the messages' statuses, and last the
// caller's audit row (AuditStatement): if that fails, nothing changed. A
// transaction that loses a race (a delivery flush locks a delivery, then
// its message: a deadlock Postgres ends) runs again from BEGIN.
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

// The audit row's statement, made from what the action changed; an Error
// (or a failing statement) rolls the action back with it.
template <typename T>
using AuditStatement = std::function<Result<SqlStatement>(const T&)>;

// Runs of an action's transaction at most when it loses a race.
inline constexpr int kActionTries = 3;

// ---- resend -------------------------------------------------------------------

struct MessageInterface {
  int64_t id = 0;
  std::string interface;
};

struct ResentDelivery {
  int64_t messageId = 0;
  std::string interface;
  std::string destination;
};

struct Resent {
  std::vector<MessageInterface> messages;  // every message asked for, in id order
  std::vector<ResentDelivery> deliveries;  // moved back to pending
  int64_t messagesResent = 0;              // messages moved back to pending
};

// Moves the messages' quarantined deliveries (or, named, those to
// `destinations` that are not pending) back to pending in place, attempts
// kept, and their messages with them (not a duplicate). `ids` sorted and
// distinct. NotFound naming the ids that are no message's;
// NothingToChange when no delivery moved.
void resendMessages(PgPool& pool, std::vector<int64_t> ids,
                    std::optional<std::vector<std::string>> destinations,
                    AuditStatement<Resent> audit, std::function<void(Result<Resent>)> cb);

// ---- dismiss ------------------------------------------------------------------

struct Dismissed {
  int64_t messageId = 0;
  std::string interface;
  std::vector<std::string> destinations;  // the deliveries filtered
  // The message's status as settle would set it; nullopt: a duplicate, left as it is.
  std::optional<MessageStatus> messageStatus;
};

// Filters the message's quarantined deliveries with `why` as their
// last_error, and settles the message. NotFound, or NothingToChange when
// none was quarantined.
void dismissMessage(PgPool& pool, int64_t id, std::string why, AuditStatement<Dismissed> audit,
                    std::function<void(Result<Dismissed>)> cb);

// ---- edit ---------------------------------------------------------------------

// A corrected copy of `original`, with the keys the engine read from it.
struct EditedCopy {
  int64_t original = 0;
  int16_t tier = 49;
  int32_t lane = 0;
  std::optional<std::string> dedupeKey;  // stored, not claimed
  std::vector<int64_t> destinationIds;   // one pending delivery each; none: filtered
  std::string payload;                   // bytes
  MessageColumns columns;
};

struct CopyStored {
  int64_t copyId = 0;
  MessageStatus copyStatus = MessageStatus::Pending;
  std::vector<std::string> replaced;  // the original's quarantined destinations, sorted
  std::optional<MessageStatus> originalStatus;  // nullopt: left as it was
};

// Stores the copy (origin_id the original, of its interface) with its
// deliveries, filters the original's quarantined deliveries as "replaced
// by edited copy N" and settles the original. NotFound; StillPending
// (naming the destinations) while a delivery of the original is pending.
void storeEditedCopy(PgPool& pool, EditedCopy copy, AuditStatement<CopyStored> audit,
                     std::function<void(Result<CopyStored>)> cb);

}  // namespace ductus::store
