// The alert step: a small state machine over (phase, observed state), and
// the certificates' variant over days left. Notifications are made here,
// one per channel of the rule, their text composed at once, so what the
// outbox holds is exactly what was decided.
#include "common/monitor/alerts.h"

#include <algorithm>
#include <ctime>

#include "common/monitor/alert_text.h"
#include "common/time_text.h"

namespace ductus::monitor {

std::string_view changeName(Change c) {
  switch (c) {
    case Change::None:
      return "none";
    case Change::Fire:
      return "fire";
    case Change::Escalate:
      return "escalate";
    case Change::ChangeQuietly:
      return "change-quietly";
    case Change::Reopen:
      return "reopen";
    case Change::Recovering:
      return "recovering";
    case Change::Recover:
      return "recover";
    case Change::Remind:
      return "remind";
    case Change::Hold:
      return "hold";
  }
  return "none";
}

const Rule* ruleFor(State s, const AlertSettings& settings) {
  for (const auto& r : settings.rules)
    if (std::find(r.when.begin(), r.when.end(), s) != r.when.end()) return &r;
  return nullptr;
}

bool needsWatching(State s) {
  return s == State::Stalled || s == State::Behind || s == State::Late || s == State::Quiet;
}

namespace {

bool inWindow(int minute, const DayWindow& w) {
  if (w.startMinute == w.endMinute) return false;
  if (w.startMinute < w.endMinute) return minute >= w.startMinute && minute < w.endMinute;
  return minute >= w.startMinute || minute < w.endMinute;  // wraps midnight
}

}  // namespace

TimePoint dueAfterQuietHours(TimePoint at, Severity severity,
                             const std::optional<QuietHours>& quiet) {
  if (!quiet) return at;
  if (std::find(quiet->hold.begin(), quiet->hold.end(), severity) == quiet->hold.end()) return at;
  std::time_t t = Clock::to_time_t(at);
  std::tm local{};
  if (!localtime_r(&t, &local)) return at;
  const int minute = local.tm_hour * 60 + local.tm_min;
  const DayWindow& w = quiet->between;
  if (!inWindow(minute, w)) return at;
  // The window's end on the wall clock: today, or tomorrow when it wraps
  // midnight and we are before midnight. mktime with tm_isdst = -1 finds
  // the offset of that day, so a DST change inside the window is counted.
  std::tm end = local;
  end.tm_hour = w.endMinute / 60;
  end.tm_min = w.endMinute % 60;
  end.tm_sec = 0;
  end.tm_isdst = -1;
  if (minute >= w.endMinute) end.tm_mday += 1;
  std::time_t e = std::mktime(&end);
  if (e == static_cast<std::time_t>(-1)) return at;
  TimePoint due = Clock::from_time_t(e);
  return due > at ? due : at;
}

namespace {

// The notifications of one change to one rule's channels (a channel the
// settings don't have is skipped: config checks refuse that).
void notifyChannels(Step& s, const std::vector<std::string>& channels, NotificationKind kind,
                    TimePoint now, const AlertSettings& settings, std::string_view reason,
                    std::string_view engineHost) {
  const std::string why(reason);
  for (const auto& name : channels) {
    const Channel* ch = settings.channel(name);
    if (!ch) continue;
    Notification n;
    n.kind = kind;
    n.channel = name;
    n.due = dueAfterQuietHours(now, s.next.severity, settings.quietHours);
    compose(n, s.next, why, ch->format, engineHost);
    s.notify.push_back(std::move(n));
  }
}

bool silenced(const AlertState& a, TimePoint now) {
  return a.silencedUntil && *a.silencedUntil > now;
}

// Made after the next state is settled: a silenced alert records the
// change and tells no one (told stays as it was).
void tell(Step& s, const Rule* rule, NotificationKind kind, TimePoint now,
          const AlertSettings& settings, std::string_view reason, std::string_view engineHost) {
  if (!rule || silenced(s.next, now)) return;
  notifyChannels(s, rule->notify, kind, now, settings, reason, engineHost);
  if (!s.notify.empty()) s.next.told = true;
}

// Fire and escalate: firing at this state and severity, reminding from
// now, and an acknowledgement dropped (a new or worse state is news it
// didn't cover).
void openFiring(Step& s, Change c, State observed, Severity severity, TimePoint now,
                const AlertSettings& settings) {
  s.change = c;
  s.next.phase = Phase::Firing;
  s.next.state = observed;
  s.next.severity = severity;
  s.next.goodSince.reset();
  s.next.remindAt = now + settings.remind;
  s.next.acknowledgedAt.reset();
  s.next.acknowledgedBy.clear();
  if (c == Change::Fire) {
    s.next.openedAt = now;
    s.next.told = false;
  }
}

// Recovered to those told, then the slate is clean for the next firing.
void recover(Step& s, const Rule* toldRule, TimePoint now, const AlertSettings& settings,
             std::string_view reason, std::string_view engineHost) {
  s.change = Change::Recover;
  s.next.phase = Phase::Ok;
  if (s.next.told && toldRule && !silenced(s.next, now))
    notifyChannels(s, toldRule->notify, NotificationKind::Recovered, now, settings, reason,
                   engineHost);
  s.next.told = false;
  s.next.goodSince.reset();
  s.next.remindAt.reset();
  s.next.acknowledgedAt.reset();
  s.next.acknowledgedBy.clear();
  s.next.silencedUntil.reset();
  s.next.silencedBy.clear();
}

bool reminderDue(const AlertState& a, TimePoint now) {
  return !a.acknowledgedAt && a.remindAt && now >= *a.remindAt;
}

// The next reminder: one interval on, or one interval from now when the
// engine was away longer (never a burst of overdue reminders).
TimePoint nextReminder(TimePoint was, TimePoint now, Seconds remind) {
  TimePoint next = was + remind;
  return next > now ? next : now + remind;
}

}  // namespace

Step step(const AlertState& now_, State observed, TimePoint now, TimePoint engineStartedAt,
          const AlertSettings& settings, std::string_view reason, std::string_view engineHost) {
  Step s;
  s.next = now_;
  if (observed == State::Paused) {
    s.change = Change::Hold;
    return s;
  }
  const Rule* rule = ruleFor(observed, settings);
  // An operator stopped the interface's intake on purpose: news only to a
  // rule that names intake_stopped. Otherwise the alert stays as it was,
  // as a paused destination's does: no fire, and a late or quiet it was
  // firing for neither reminds nor turns "recovered" for a stop (after the
  // start it is judged again, deadlines counted from the start).
  if (observed == State::IntakeStopped && !rule) {
    s.change = Change::Hold;
    return s;
  }
  if (needsWatching(observed) && now < engineStartedAt + kWatchFirst) rule = nullptr;
  const bool bad = rule != nullptr;

  switch (now_.phase) {
    case Phase::Ok:
      if (!bad) return s;
      openFiring(s, Change::Fire, observed, rule->severity, now, settings);
      tell(s, rule, NotificationKind::Fired, now, settings, reason, engineHost);
      break;

    case Phase::Firing:
      if (!bad) {
        s.change = Change::Recovering;
        s.next.phase = Phase::Recovering;
        s.next.goodSince = now;
        break;
      }
      if (rule->severity > now_.severity) {
        openFiring(s, Change::Escalate, observed, rule->severity, now, settings);
        tell(s, rule, NotificationKind::Escalated, now, settings, reason, engineHost);
        break;
      }
      if (observed != now_.state) {
        s.change = Change::ChangeQuietly;
        s.next.state = observed;  // severity stays the highest reached
        break;
      }
      if (reminderDue(now_, now)) {
        s.change = Change::Remind;
        s.next.remindAt = nextReminder(*now_.remindAt, now, settings.remind);
        tell(s, rule, NotificationKind::Reminder, now, settings, reason, engineHost);
        break;
      }
      return s;

    case Phase::Recovering:
      if (bad) {
        if (rule->severity > now_.severity) {
          openFiring(s, Change::Escalate, observed, rule->severity, now, settings);
          tell(s, rule, NotificationKind::Escalated, now, settings, reason, engineHost);
        } else {
          s.change = Change::Reopen;
          s.next.phase = Phase::Firing;
          s.next.state = observed;
          s.next.goodSince.reset();
        }
        break;
      }
      if (now_.goodSince && now - *now_.goodSince >= settings.settle) {
        recover(s, ruleFor(now_.state, settings), now, settings, reason, engineHost);
        break;
      }
      return s;
  }
  s.next.changedAt = now;
  return s;
}

int64_t daysLeft(TimePoint notAfter, TimePoint now) {
  using std::chrono::days;
  return (std::chrono::floor<days>(notAfter) - std::chrono::floor<days>(now)).count();
}

namespace {

// How many warn-days steps `left` has reached; one more once expired.
int stageOf(int64_t left, bool expired, const std::vector<int>& steps) {
  int k = 0;
  for (int d : steps)
    if (left <= d) ++k;
  if (expired) k = static_cast<int>(steps.size()) + 1;
  return k;
}

Severity certificateSeverity(int stage, size_t steps) {
  return stage >= static_cast<int>(steps) ? Severity::Critical : Severity::Warning;
}

std::string certificateReason(int64_t left, bool expired, TimePoint notAfter) {
  if (expired) return "the certificate expired (not after " + rfc3339(notAfter) + ")";
  return "the certificate expires in " + std::to_string(left) + (left == 1 ? " day" : " days") +
         " (not after " + rfc3339(notAfter) + ")";
}

}  // namespace

Step certificateStep(const AlertState& now_, TimePoint notAfter, TimePoint now,
                     const AlertSettings& settings, std::string_view engineHost) {
  Step s;
  s.next = now_;
  const Rule* rule = ruleFor(State::Expiring, settings);
  const bool expired = notAfter <= now;
  const int64_t left = daysLeft(notAfter, now);
  const int stage = rule ? stageOf(left, expired, settings.certificateDays) : 0;
  const size_t steps = settings.certificateDays.size();
  const std::string reason = certificateReason(left, expired, notAfter);

  auto atStage = [&](Change c) {
    s.change = c;
    s.next.phase = Phase::Firing;
    s.next.state = State::Expiring;
    s.next.stage = stage;
    s.next.severity = certificateSeverity(stage, steps);
    s.next.goodSince.reset();
    // No reminders before expiry: the steps are the reminders.
    if (expired)
      s.next.remindAt = now + settings.remind;
    else
      s.next.remindAt.reset();
  };

  switch (now_.phase) {
    case Phase::Ok:
      if (stage == 0) return s;
      openFiring(s, Change::Fire, State::Expiring, certificateSeverity(stage, steps), now,
                 settings);
      atStage(Change::Fire);
      tell(s, rule, NotificationKind::Fired, now, settings, reason, engineHost);
      break;

    case Phase::Firing:
    case Phase::Recovering:
      if (stage == 0) {
        if (now_.phase == Phase::Firing) {
          s.change = Change::Recovering;
          s.next.phase = Phase::Recovering;
          s.next.goodSince = now;
          break;
        }
        if (now_.goodSince && now - *now_.goodSince >= settings.settle) {
          recover(s, ruleFor(State::Expiring, settings), now, settings,
                  "the certificate was renewed", engineHost);
          s.next.stage = 0;
          break;
        }
        return s;
      }
      if (stage > now_.stage) {
        openFiring(s, Change::Escalate, State::Expiring, certificateSeverity(stage, steps), now,
                   settings);
        atStage(Change::Escalate);
        tell(s, rule, NotificationKind::Escalated, now, settings, reason, engineHost);
        break;
      }
      if (now_.phase == Phase::Recovering) {  // bad again within settle
        atStage(Change::Reopen);
        break;
      }
      if (stage < now_.stage) {  // renewed, still within a step
        atStage(Change::ChangeQuietly);
        break;
      }
      if (expired && reminderDue(now_, now)) {
        s.change = Change::Remind;
        s.next.remindAt = nextReminder(*now_.remindAt, now, settings.remind);
        tell(s, rule, NotificationKind::Reminder, now, settings, reason, engineHost);
        break;
      }
      return s;
  }
  s.next.changedAt = now;
  return s;
}

}  // namespace ductus::monitor
