// The life of one alert, judged every 15 s: from the stored AlertState,
// what was observed now and the alert settings, the next state and the
// notifications to make. Pure: no clock, no I/O (quiet hours read the
// local time zone through localtime_r/mktime, nothing else). The engine
// writes the result with compare-and-set on rev, so two engines on one
// database record a change once.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/monitor/alert_state.h"
#include "common/monitor/settings.h"

namespace ductus::monitor {

enum class Change : uint8_t {
  None,           // nothing to write
  Fire,           // ok -> firing
  Escalate,       // firing (or recovering) at a higher severity
  ChangeQuietly,  // another bad state of the same or lower severity
  Reopen,         // recovering -> firing again within settle
  Recovering,     // firing -> good, waiting settle
  Recover,        // good for settle -> ok
  Remind,         // firing, unacknowledged, remindAt passed
  Hold,           // paused, or an intake stopped no rule names: nothing moves, nothing reminds
};
std::string_view changeName(Change c);

struct Step {
  Change change = Change::None;
  AlertState next;
  std::vector<Notification> notify;
};

// The first rule naming the state; nullptr: the state raises no alert.
const Rule* ruleFor(State s, const AlertSettings& settings);

// States judged from the passing of time (stalled, behind, late, quiet):
// right after a start the engine hasn't watched long enough to say them,
// so they count as good for the first minute. Error, stopped, paused and
// intake_stopped are facts and count at once.
bool needsWatching(State s);

// The first minute after a start in which needsWatching states count as good.
inline constexpr Seconds kWatchFirst{60};

// When a notification made at `at` of this severity is due: `at`, or the
// end of the quiet-hours window (local time, DST-correct: the window's end
// is a wall-clock time, not at + a fixed length) when `at` is inside it
// and the severity is held. A window whose start equals its end is empty.
TimePoint dueAfterQuietHours(TimePoint at, Severity severity,
                             const std::optional<QuietHours>& quiet);

// One step of a destination's or an interface's alert. `reason` is the
// diagnosis' sentence (hostile text: it may quote a receiver's error);
// `engineHost` names the engine in the texts.
//
// While firing, `severity` is the highest reached since it fired: a state
// changing back and forth between a critical and a warning rule escalates
// once, not at every swing. A reminder also moves changedAt (any change
// does), so a notification's "at" is the moment it was made.
Step step(const AlertState& now_, State observed, TimePoint now, TimePoint engineStartedAt,
          const AlertSettings& settings, std::string_view reason = {},
          std::string_view engineHost = {});

// One step of a certificate's alert from its end (the earliest notAfter of
// its chain): whole UTC days left against certificateDays (30/14/7, in any
// order). Fires (warning) at the first step reached, escalates at each
// closer one (stage counts the steps reached), critical at the last step
// and when expired; reminds only once expired. A renewal out of every step
// recovers after settle; one that still leaves it within a step changes
// quietly. The channels are those of the rule naming expiring; no rule, no
// alert.
Step certificateStep(const AlertState& now_, TimePoint notAfter, TimePoint now,
                     const AlertSettings& settings, std::string_view engineHost = {});

// Whole UTC days from now to notAfter (calendar days; negative once past).
int64_t daysLeft(TimePoint notAfter, TimePoint now);

}  // namespace ductus::monitor
