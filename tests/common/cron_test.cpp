#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <utility>

#include "common/cron.h"

namespace ductus {
namespace {

using std::chrono::system_clock;

// The tests pin the process to UTC so "server local time" is known.
class CronTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("TZ", "UTC", 1);
    tzset();
  }
  static system_clock::time_point at(int y, int mo, int d, int h, int mi, int s = 0) {
    std::tm tm{};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
    return system_clock::from_time_t(timegm(&tm));
  }
  static system_clock::time_point next(std::string_view expr, system_clock::time_point after) {
    auto c = parseCron(expr);
    EXPECT_TRUE(c) << expr << ": " << (c ? "" : c.error().message);
    return c ? c->next(after) : system_clock::time_point{};
  }
};

TEST_F(CronTest, EveryMinuteFiresAtTheNextWholeMinute) {
  EXPECT_EQ(next("* * * * *", at(2026, 3, 4, 10, 15, 30)), at(2026, 3, 4, 10, 16));
  EXPECT_EQ(next("* * * * *", at(2026, 3, 4, 10, 15, 0)), at(2026, 3, 4, 10, 16));
}

TEST_F(CronTest, DailyAtTwoFiresTomorrowOnceTodaysTimeHasPassed) {
  EXPECT_EQ(next("0 2 * * *", at(2026, 3, 4, 1, 0)), at(2026, 3, 4, 2, 0));
  EXPECT_EQ(next("0 2 * * *", at(2026, 3, 4, 2, 0)), at(2026, 3, 5, 2, 0));
}

TEST_F(CronTest, StepsRangesAndListsCombine) {
  EXPECT_EQ(next("*/15 * * * *", at(2026, 1, 1, 0, 46)), at(2026, 1, 1, 1, 0));
  EXPECT_EQ(next("10-20/5 8,17 * * *", at(2026, 1, 1, 8, 16)), at(2026, 1, 1, 8, 20));
  EXPECT_EQ(next("10-20/5 8,17 * * *", at(2026, 1, 1, 8, 21)), at(2026, 1, 1, 17, 10));
  EXPECT_EQ(next("5/20 * * * *", at(2026, 1, 1, 0, 26)), at(2026, 1, 1, 0, 45));
}

TEST_F(CronTest, MonthAndDayNamesAreAccepted) {
  // 2026-01-01 is a Thursday; the first Monday in February is the 2nd.
  EXPECT_EQ(next("30 9 * FEB mon", at(2026, 1, 1, 0, 0)), at(2026, 2, 2, 9, 30));
  EXPECT_EQ(next("0 0 * * sat-sun", at(2026, 1, 1, 0, 0)), at(2026, 1, 3, 0, 0));
  EXPECT_EQ(next("0 0 * * 7", at(2026, 1, 1, 0, 0)), at(2026, 1, 4, 0, 0));  // 7 = Sunday
}

TEST_F(CronTest, DayOfMonthOrDayOfWeekWhenBothAreRestricted) {
  // Vixie rule: the 15th OR any Monday. After Thu 2026-01-01: Mon the 5th.
  EXPECT_EQ(next("0 0 15 * mon", at(2026, 1, 1, 0, 0)), at(2026, 1, 5, 0, 0));
  // Day of week '*': only the 15th counts.
  EXPECT_EQ(next("0 0 15 * *", at(2026, 1, 1, 0, 0)), at(2026, 1, 15, 0, 0));
  // Day of month starting with '*' (even a step): AND, so odd days that are Mondays.
  EXPECT_EQ(next("0 0 */2 * mon", at(2026, 1, 1, 0, 0)), at(2026, 1, 5, 0, 0));  // OR would give the 3rd
}

TEST_F(CronTest, LeapDayAndMonthEndsAreFound) {
  EXPECT_EQ(next("0 0 29 2 *", at(2026, 3, 1, 0, 0)), at(2028, 2, 29, 0, 0));
  EXPECT_EQ(next("0 12 31 * *", at(2026, 4, 1, 0, 0)), at(2026, 5, 31, 12, 0));
  EXPECT_EQ(next("59 23 31 12 *", at(2026, 12, 31, 23, 59)), at(2027, 12, 31, 23, 59));
}

TEST_F(CronTest, MacrosExpandToTheirFiveFields) {
  EXPECT_EQ(next("@hourly", at(2026, 1, 1, 0, 1)), at(2026, 1, 1, 1, 0));
  EXPECT_EQ(next("@daily", at(2026, 1, 1, 0, 1)), at(2026, 1, 2, 0, 0));
  EXPECT_EQ(next("@weekly", at(2026, 1, 1, 0, 1)), at(2026, 1, 4, 0, 0));
  EXPECT_EQ(next("@monthly", at(2026, 1, 1, 0, 1)), at(2026, 2, 1, 0, 0));
  EXPECT_EQ(next("@yearly", at(2026, 1, 1, 0, 1)), at(2027, 1, 1, 0, 0));
}

TEST_F(CronTest, MalformedExpressionsAreRefusedWithTheField) {
  for (const char* bad : {"* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *",
                          "* * * 13 *", "* * * * 8", "5-1 * * * *", "*/0 * * * *", "a * * * *",
                          "1,,2 * * * *", "@often", "* * * foo *"}) {
    auto c = parseCron(bad);
    EXPECT_FALSE(c) << bad;
  }
  auto c = parseCron("0 25 * * *");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("hour"), std::string::npos) << c.error().message;
}

TEST_F(CronTest, ADayThatNeverExistsIsRefused) {
  EXPECT_FALSE(parseCron("0 0 30 2 *"));
  EXPECT_FALSE(parseCron("0 0 31 4,6 *"));
  EXPECT_TRUE(parseCron("0 0 31 4,5 *"));
}

TEST_F(CronTest, SkippedLocalTimeInSpringForwardDoesNotFireThatDay) {
  // Europe/Berlin jumps from 02:00 to 03:00 on 2026-03-29 (01:00 UTC).
  setenv("TZ", "Europe/Berlin", 1);
  tzset();
  auto t = next("30 2 * * *", at(2026, 3, 28, 12, 0));  // after 13:00 local on the 28th
  // The 29th has no 02:30; the next is 02:30 CEST on the 30th = 00:30 UTC.
  EXPECT_EQ(t, at(2026, 3, 30, 0, 30));
  // An ordinary time on the change day is still found: 04:00 CEST = 02:00 UTC.
  EXPECT_EQ(next("0 4 * * *", at(2026, 3, 28, 12, 0)), at(2026, 3, 29, 2, 0));
}

// mktime() resolves a time of the repeated hour (fall back) by a guess
// kept from its earlier calls, so next() must not leave the choice to it:
// whatever mktime was last asked, the earliest occurrence after `after` is
// the firing. Found by the cron fuzzer (the same input, two answers).
TEST_F(CronTest, ARepeatedHourFiresAtItsEarliestOccurrenceWhateverMktimeDidBefore) {
  // Europe/Berlin goes back from 03:00 CEST to 02:00 CET on 2026-10-25
  // (01:00 UTC): 02:30 local is 00:30 UTC, then again 01:30 UTC.
  setenv("TZ", "Europe/Berlin", 1);
  tzset();
  auto prime = [](int month, int isdst) {
    std::tm tm{};
    tm.tm_year = 2026 - 1900;
    tm.tm_mon = month - 1;
    tm.tm_mday = 15;
    tm.tm_hour = 12;
    tm.tm_isdst = isdst;
    (void)std::mktime(&tm);
  };
  for (auto [month, isdst] :
       {std::pair{1, 0}, std::pair{7, 1}, std::pair{12, 0}, std::pair{6, -1}}) {
    SCOPED_TRACE(testing::Message() << "mktime last asked for month " << month);
    prime(month, isdst);
    EXPECT_EQ(next("30 2 25 10 *", at(2026, 1, 1, 0, 0)), at(2026, 10, 25, 0, 30));
    prime(month, isdst);
    // From inside the second 02:xx (02:40 CET), 02:45 CET is 5 minutes away.
    EXPECT_EQ(next("45 2 * * *", at(2026, 10, 25, 1, 40)), at(2026, 10, 25, 1, 45));
  }
}

// 29 March is a Sunday only in years when it is the last Sunday of March,
// the day Europe's clocks spring over 02:xx: in Berlin "0 2 29 3 */7" names
// no time that exists, and next() says so instead of walking forever. The
// same expression fires in UTC (2037-03-29 is the next such Sunday after
// 2027). Found by the cron fuzzer.
TEST_F(CronTest, AnExpressionWhoseEveryTimeTheClockSkipsNeverFiresThereButDoesInUtc) {
  EXPECT_EQ(next("0 2 29 3 */7", at(2027, 1, 1, 0, 0)), at(2037, 3, 29, 2, 0));
  setenv("TZ", "Europe/Berlin", 1);
  tzset();
  EXPECT_EQ(next("0 2 29 3 */7", at(2027, 1, 1, 0, 0)), system_clock::time_point::max());
}

}  // namespace
}  // namespace ductus
