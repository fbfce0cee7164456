#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>

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

}  // namespace
}  // namespace ductus
