#include "common/monitor/deadlines.h"

#include <algorithm>
#include <ctime>
#include <tuple>

namespace ductus::monitor {

namespace {

std::tm localOf(TimePoint t) {
  std::time_t s = Clock::to_time_t(t);
  std::tm tm{};
  localtime_r(&s, &tm);
  return tm;
}

int minuteOfDayOf(TimePoint t) {
  std::tm tm = localOf(t);
  return tm.tm_hour * 60 + tm.tm_min;
}

// The latest firing of `cron` at or before `now`: looked for in the last
// hour, then the last day, then the last 8 days, so a frequent schedule
// walks few firings and a weekly one is still found.
std::optional<TimePoint> lastFiring(const Cron& cron, TimePoint now) {
  for (auto back : {std::chrono::hours(1), std::chrono::hours(24), std::chrono::hours(24 * 8)}) {
    std::optional<TimePoint> last;
    TimePoint t = now - back;
    for (int i = 0; i < 100000; ++i) {
      TimePoint next = cron.next(t);
      if (next > now || next == TimePoint::max()) break;
      last = next;
      t = next;
    }
    if (last) return last;
  }
  return std::nullopt;
}

}  // namespace

// mktime is asked with each tm_isdst and its answer converted back, as
// common/cron.cpp does: with tm_isdst = -1 glibc resolves a repeated hour
// by a guess kept from its earlier calls, and a skipped time to an hour
// after it (02:30 becomes 03:30, when the clock showed 03:00 first).
TimePoint localTimeOn(TimePoint day, int minuteOfDay, int addDays) {
  std::tm date = localOf(day);
  date.tm_mday += addDays;
  date.tm_hour = 12;  // noon: a day's date is normalised where no clock change falls
  date.tm_min = date.tm_sec = 0;
  date.tm_isdst = -1;
  std::mktime(&date);
  const auto wall = [](const std::tm& t) {
    return std::tuple(t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min);
  };
  std::tm want = date;
  want.tm_hour = minuteOfDay / 60;
  want.tm_min = minuteOfDay % 60;
  const auto wanted = wall(want);
  std::optional<std::time_t> first, earliest;
  for (int isdst : {0, 1}) {
    std::tm cand = want;
    cand.tm_isdst = isdst;
    std::time_t t = std::mktime(&cand);
    std::tm back{};
    if (t == -1 || !localtime_r(&t, &back)) continue;
    if (!earliest || t < *earliest) earliest = t;
    if (wall(back) == wanted && (!first || t < *first)) first = t;  // a repeated hour: the first
  }
  if (first) return Clock::from_time_t(*first);
  if (!earliest) return Clock::from_time_t(std::mktime(&want));
  // The clock skipped the time: the first minute it shows after it, found
  // walking on from the earlier reading (before the gap; a gap is at most
  // a few hours, the bound only guards against a broken zone file).
  std::time_t t = *earliest;
  for (int i = 0; i < 24 * 60; ++i, t += 60) {
    std::tm at{};
    localtime_r(&t, &at);
    if (wall(at) >= wanted) break;
  }
  return Clock::from_time_t(t);
}

bool activeWithinMissed(const ActiveWithin& a, std::optional<TimePoint> lastReceived,
                        TimePoint watchedSince, TimePoint now) {
  TimePoint since = lastReceived ? std::max(*lastReceived, watchedSince) : watchedSince;
  if (since >= now) return false;
  if (!a.between) return now - since > a.within;
  // Only the window's time counts: add up each day's window within
  // [since, now], from the day before since's (a wrapping window started
  // then) to now's day. Past 60 days of quiet, 60 days are enough to say.
  since = std::max(since, now - std::chrono::hours(24 * 60));
  const int start = a.between->startMinute, end = a.between->endMinute;
  const bool wraps = end <= start;
  Clock::duration quiet{0};
  for (int d = -1;; ++d) {
    TimePoint ws = localTimeOn(since, start, d);
    if (ws > now) break;
    TimePoint we = localTimeOn(since, end, wraps ? d + 1 : d);
    TimePoint from = std::max(ws, since), to = std::min(we, now);
    if (to > from) quiet += to - from;
    if (quiet > a.within) return true;
  }
  return quiet > a.within;
}

DeadlineCheck activeByCheck(const ActiveBy& a, const Cron* cron,
                            std::optional<TimePoint> lastReceived, TimePoint watchedSince,
                            TimePoint now) {
  DeadlineCheck c;
  switch (a.kind) {
    case ActiveBy::Kind::Daily: {
      TimePoint today = localTimeOn(now, a.minuteOfDay);
      c.deadline = today <= now ? today : localTimeOn(now, a.minuteOfDay, -1);
      break;
    }
    case ActiveBy::Kind::Weekly:
      for (int back = 0; back <= 7; ++back) {
        TimePoint t = localTimeOn(now, a.minuteOfDay, -back);
        if (t <= now && localOf(t).tm_wday == a.weekday) {
          c.deadline = t;
          break;
        }
      }
      break;
    case ActiveBy::Kind::Cron:
      if (cron) c.deadline = lastFiring(*cron, now);
      break;
  }
  if (!c.deadline) return c;
  int from = a.fromMinute.value_or(0);
  c.windowStart = localTimeOn(*c.deadline, from, from > minuteOfDayOf(*c.deadline) ? -1 : 0);
  bool arrived = lastReceived && *lastReceived >= c.windowStart;
  c.missed = *c.deadline > watchedSince && !arrived;
  return c;
}

}  // namespace ductus::monitor
