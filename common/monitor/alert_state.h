// One alert as it is stored (alert_state, a row per subject) and as the
// judge's step (common/monitor/alerts.h) reads and rewrites it, and the
// notifications a step makes (written to the outbox, alert_deliveries, in
// the same transaction). Plain data, shared by the pure step, the store
// (schema/alert_store.*) and the API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/monitor/settings.h"

namespace ductus::monitor {

// What an alert is about: an interface ("adt-in"), one of its
// destinations ("adt-in/lab") or a certificate ("certificate:server").
// The subject is its key: two engines on one database share one row.
struct Subject {
  std::string interface;    // "" for a certificate
  std::string destination;  // "" for an interface or a certificate
  std::string certificate;  // the certificates: entry's name, else ""
  std::string key() const {
    if (!certificate.empty()) return "certificate:" + certificate;
    return destination.empty() ? interface : interface + "/" + destination;
  }
};

// ok: nothing wrong (or never was). firing: bad, told (or waiting for
// quiet hours to end). recovering: good again, waiting `settle` before
// recovering; bad again within it reopens without a new notification.
enum class Phase : uint8_t { Ok, Firing, Recovering };
constexpr std::string_view phaseName(Phase p) {
  return p == Phase::Firing ? "firing" : p == Phase::Recovering ? "recovering" : "ok";
}

struct AlertState {
  int64_t id = 0;  // alert_state.id; 0 before it is stored
  Subject subject;
  Phase phase = Phase::Ok;
  State state = State::Ok;           // the bad state it fired for (or last changed to)
  Severity severity = Severity::Info;
  std::optional<TimePoint> openedAt;    // when it last fired
  std::optional<TimePoint> changedAt;   // the last change of phase, state or severity
  std::optional<TimePoint> goodSince;   // recovering: good since
  std::optional<TimePoint> remindAt;    // the next reminder while firing and not acknowledged
  std::optional<TimePoint> acknowledgedAt;
  std::string acknowledgedBy;
  std::optional<TimePoint> silencedUntil;  // no notifications before this
  std::string silencedBy;
  bool told = false;  // a notification of this firing was made: a recovery is sent only then
  int stage = 0;      // certificates: how many warn_days steps have fired
  int64_t rev = 0;    // compare-and-set: a step applies only to the rev it read
};

// What a step tells: made as rows of the outbox, one per channel's
// recipient kind, due now or when quiet hours end.
enum class NotificationKind : uint8_t { Fired, Escalated, Reminder, Recovered };
constexpr std::string_view notificationKindName(NotificationKind k) {
  switch (k) {
    case NotificationKind::Fired: return "fired";
    case NotificationKind::Escalated: return "escalated";
    case NotificationKind::Reminder: return "reminder";
    case NotificationKind::Recovered: return "recovered";
  }
  return "fired";
}

struct Notification {
  NotificationKind kind = NotificationKind::Fired;
  std::string channel;  // the channel's name in alerts.channels
  TimePoint due{};      // now, or the end of quiet hours
  // Composed by common/monitor/alert_text.h: an e-mail's subject and text,
  // a webhook's JSON body in the channel's format.
  std::string subject, text, webhookBody;
};

}  // namespace ductus::monitor
