// The alerts as every engine on the database shares them (migration 0010):
// alert_state (one row per subject), alert_events (its history) and
// alert_deliveries (the outbox of e-mails and webhooks to send).
//
// - applyStep writes one step of the judge (common/monitor/alerts.h) in one
//   transaction: the alert's row, compare-and-set on the rev the step read
//   (a new subject: inserted unless another engine inserted it first), its
//   event row and the notifications it made. Two engines making the same
//   step: one applies, the other is told it did not (and reads again next
//   round), so one firing makes one notification.
// - The outbox is drained by whichever engine claims a row (claimDue: FOR
//   UPDATE SKIP LOCKED, then a lease): two senders never hold one row; a row
//   whose lease ran out (its engine died mid-send) is claimable again.
// - An operator's acknowledge and silence are written with their audit row
//   and an event row in one transaction (as message_actions.h does).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/monitor/alert_state.h"
#include "common/result.h"
#include "schema/message_actions.h"
#include "schema/pg_pool.h"

namespace ductus::store {

using AlertTime = std::chrono::system_clock::time_point;

// One notification to send, as the outbox keeps it.
struct OutboxRow {
  int64_t id = 0;       // 0 before it is stored
  int64_t alertId = 0;  // set by applyStep
  int64_t eventId = 0;
  std::string channel;      // the channel's name in alerts.channels
  std::string kind;         // "email" | "webhook"
  std::string target;       // e-mail: addresses, comma-separated; webhook: the URL
  std::string subject;      // e-mail subject (a webhook's too, for the log)
  std::string body;         // e-mail text, or the webhook's JSON
  std::string contentType;  // "" is text/plain
  AlertTime due{};          // not sent before (quiet hours); epoch: now
  int attempts = 0;         // claims so far, this one included
  std::string lastError;
};

// One step of the judge: `before` as it was read (its id and rev; id 0 for
// a subject not stored yet), `after` as the step made it.
struct AlertWrite {
  monitor::AlertState before;
  monitor::AlertState after;
  std::string change;  // "fired", "escalated", "recovered", ... (the event's change)
  std::string reason;  // why, for the event (the judge's words)
  std::vector<OutboxRow> notifications;
  // A recovery: the alert's notifications not yet sent are given up
  // ("recovered") before this step's own are written.
  bool cancelPending = false;
};

// Every stored alert, by id.
void loadAlerts(PgPool& pool, std::function<void(Result<std::vector<monitor::AlertState>>)> done);

// true: written; false: another engine changed (or created) the alert
// since `before` was read, and nothing was written.
void applyStep(PgPool& pool, AlertWrite write, std::function<void(Result<bool>)> done);

// ---- the outbox -----------------------------------------------------------------

// Claims up to `limit` rows due now, unsent, not given up and not leased
// (or leased until before now), oldest due first: each leased for `lease`
// and its attempts counted.
void claimDue(PgPool& pool, int limit, std::chrono::seconds lease,
              std::function<void(Result<std::vector<OutboxRow>>)> done);
// A send's error as kept (a server's words: database text, bounded).
inline constexpr size_t kMaxOutboxErrorBytes = 1000;
void markSent(PgPool& pool, int64_t id, std::function<void(Status)> done);
// Not sent: tried again at `nextDue`, or given up for good.
void markFailed(PgPool& pool, int64_t id, std::string error, AlertTime nextDue, bool giveUp,
                std::function<void(Status)> done);

// ---- the API --------------------------------------------------------------------

struct AlertEvent {
  AlertTime at{};
  std::string change, phase, state, severity, reason;
};

struct AlertListItem {
  monitor::AlertState alert;
  std::vector<AlertEvent> events;  // newest first
};

// Bounds of listAlerts.
inline constexpr int kMaxAlertsListed = 500;
inline constexpr int kEventsPerAlert = 10;

// The alerts, firing and recovering first, then by their last change
// (newest first), at most kMaxAlertsListed, each with its last
// kEventsPerAlert events.
void listAlerts(PgPool& pool, std::function<void(Result<std::vector<AlertListItem>>)> done);

// The alert acknowledged by `by` (no more reminders for this firing), or
// silenced until `until` (no notifications before then; its unsent ones
// given up). NotFound: no such alert; Conflict: it is not firing. The
// audit statement is made from the alert as changed and runs last in the
// same transaction: when it fails, nothing changed.
void acknowledgeAlert(PgPool& pool, int64_t alertId, std::string by,
                      AuditStatement<monitor::AlertState> audit,
                      std::function<void(Result<monitor::AlertState>)> done);
void silenceAlert(PgPool& pool, int64_t alertId, AlertTime until, std::string by,
                  AuditStatement<monitor::AlertState> audit,
                  std::function<void(Result<monitor::AlertState>)> done);

// History older than `keep`: events, sent and given-up outbox rows.
// Answers how many rows went.
void purgeAlerts(PgPool& pool, std::chrono::seconds keep,
                 std::function<void(Result<int64_t>)> done);

}  // namespace ductus::store
