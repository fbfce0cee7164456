// The expectations of monitor: that are about time: active_within (something
// received within every so long, optionally counted only inside a part of
// each day) and active_by (something received by each deadline). Pure
// functions of the times given, in the process's local time zone, so a
// deadline is the wall-clock time an operator wrote, across DST changes.
#pragma once

#include <optional>

#include "common/cron.h"
#include "common/monitor/settings.h"

namespace ductus::monitor {

// Whether nothing was received for longer than `within`, counted from the
// later of the last message and `watchedSince` (an interface an engine has
// only just begun to run is not quiet), and with `between` only inside that
// part of each local day (the clock stops outside it; a window that wraps
// midnight runs into the next day).
bool activeWithinMissed(const ActiveWithin& a, std::optional<TimePoint> lastReceived,
                        TimePoint watchedSince, TimePoint now);

// The latest deadline at or before `now`, its window's start (local
// midnight of the deadline's day, or `from` that day; a `from` later in
// the day than the deadline is the day before), and whether it was missed:
// no message received since the window's start (one received after the
// deadline clears it: late, but here), and the deadline after
// `watchedSince`. `cron` is active_by's cron, parsed (null for daily and
// weekly). A deadline at a time the clock skips (spring forward) is the
// first minute the clock shows after it (02:30 -> 03:00); one in an hour
// the clock repeats (fall back) is its first occurrence.
struct DeadlineCheck {
  std::optional<TimePoint> deadline;
  TimePoint windowStart{};
  bool missed = false;
};
DeadlineCheck activeByCheck(const ActiveBy& a, const Cron* cron,
                            std::optional<TimePoint> lastReceived, TimePoint watchedSince,
                            TimePoint now);

// A local wall-clock time on the day of `day` (its date in local time) at
// minuteOfDay, shifted by `addDays` days: a skipped time is the first
// minute shown after it, a repeated one its first occurrence.
TimePoint localTimeOn(TimePoint day, int minuteOfDay, int addDays = 0);

}  // namespace ductus::monitor
