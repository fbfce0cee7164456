// Cron: a 5-field schedule ("minute hour day-of-month month day-of-week")
// and its next firing time in server local time, as Vixie cron reads it:
//
// * Each field takes '*', numbers, ranges "a-b", lists "a,b,c" and steps
//   "*/n", "a-b/n", "a/n" (from a to the field's maximum).
// * Months take jan-dec and days of week sun-sat (case-insensitive);
//   day of week 0 and 7 are both Sunday.
// * Day of month and day of week: when both are restricted (neither starts
//   with '*'), a day matches if EITHER matches ("0 0 1,15 * mon" fires on
//   the 1st, the 15th and every Monday); when one starts with '*', only the
//   other one counts.
// * @yearly (@annually), @monthly, @weekly, @daily (@midnight), @hourly.
//
// Daylight saving time: times are computed on the local calendar (mktime).
// A time inside a skipped hour (spring forward) does not exist and does not
// fire that day; a time inside a repeated hour (fall back) fires at its
// earliest occurrence after the start of the walk, and again in the second
// occurrence when the walk starts inside it: the answer depends on `after`
// alone, never on earlier calls of mktime. Schedules that must fire exactly once a day should avoid
// 01:00-03:00 local time, as with Vixie cron.
#pragma once

#include <bitset>
#include <chrono>
#include <string>
#include <string_view>

#include "common/result.h"

namespace ductus {

class Cron {
 public:
  // The first firing time strictly after `after` (whole minutes, local time).
  // Parsing refuses expressions whose days never come (e.g. "0 0 30 2 *").
  // time_point::max() when every time the expression names is one the local
  // clock skips: "0 2 29 3 sun" in Europe's zones (29 March is a Sunday only
  // when it is the day the clock springs forward over 02:xx). The walk gives
  // up after thousands of years' worth of candidates; in UTC it always finds
  // one.
  std::chrono::system_clock::time_point next(std::chrono::system_clock::time_point after) const;

  const std::string& text() const { return text_; }

 private:
  friend Result<Cron> parseCron(std::string_view);
  bool dayMatches(int mday, int mon0, int wday) const;

  std::string text_;
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> daysOfMonth_;  // 1..31
  std::bitset<12> months_;       // 0..11
  std::bitset<7> daysOfWeek_;    // 0..6, Sunday = 0
  bool domStar_ = false;
  bool dowStar_ = false;
};

// Parses a 5-field expression or an @macro; errors name the field and the
// offending text.
Result<Cron> parseCron(std::string_view text);

}  // namespace ductus
