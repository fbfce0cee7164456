// The diagnosis as tables: every destination state, both causes and their
// floors, the trend and its ETA, every interface state, and the deadline
// rules of active_within and active_by in local time, DST days included.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

#include <cmath>
#include <ctime>
#include <string>

#include "common/monitor/deadlines.h"
#include "common/monitor/diagnosis.h"
#include "common/monitor/trends.h"

namespace ductus::monitor {
namespace {

using namespace std::chrono_literals;

// The process's time zone for one test.
class Zone {
 public:
  explicit Zone(const char* tz) {
    if (const char* old = getenv("TZ")) old_ = old, had_ = true;
    setenv("TZ", tz, 1);
    tzset();
  }
  ~Zone() {
    if (had_) setenv("TZ", old_.c_str(), 1);
    else unsetenv("TZ");
    tzset();
  }

 private:
  std::string old_;
  bool had_ = false;
};

std::tm fields(int y, int mo, int d, int h, int mi) {
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_isdst = -1;
  return tm;
}

// A local wall-clock time in the zone set now.
TimePoint local(int y, int mo, int d, int h, int mi) {
  std::tm tm = fields(y, mo, d, h, mi);
  return Clock::from_time_t(std::mktime(&tm));
}

// An instant given as its UTC time, for the local times mktime can't name
// for sure (the repeated and the skipped hours).
TimePoint utc(int y, int mo, int d, int h, int mi) {
  std::tm tm = fields(y, mo, d, h, mi);
  return Clock::from_time_t(timegm(&tm));
}

const TimePoint kNow = Clock::from_time_t(1'800'000'000);

DestinationFacts facts() {
  DestinationFacts f;
  f.watchedFrom = kNow - 1h;
  f.lastFinished = kNow - 1s;
  return f;
}

TEST(Diagnose, EveryStateWorstWins) {
  struct Row {
    const char* name;
    DestinationFacts f;
    State want;
  };
  auto ok = facts();
  auto paused = facts();
  paused.paused = true;
  paused.waiting = 20;
  paused.oldest = 10min;
  paused.lastFinished = kNow - 10min;
  auto stalled = facts();
  stalled.waiting = 3;
  stalled.oldest = 2min;
  stalled.lastFinished = kNow - 2min;
  stalled.quarantined = 4;  // error is less bad than stalled
  auto notStalledYet = stalled;
  notStalledYet.lastFinished = kNow - 30s;  // it finished something recently
  notStalledYet.quarantined = 0;
  auto youngBacklog = facts();
  youngBacklog.waiting = 3;
  youngBacklog.oldest = 30s;
  youngBacklog.lastFinished = kNow - 5min;
  auto error = facts();
  error.quarantined = 1;
  error.waiting = 100;
  error.behind = Behind{5, std::nullopt};
  auto behindCount = facts();
  behindCount.waiting = 6;
  behindCount.oldest = 5s;
  behindCount.behind = Behind{5, std::nullopt};
  auto atTheLimit = behindCount;
  atTheLimit.waiting = 5;  // "more than 5"
  auto behindAge = facts();
  behindAge.waiting = 1;
  behindAge.oldest = 11min;
  behindAge.behind = Behind{std::nullopt, Seconds(600)};
  auto idleNeverWatched = facts();
  idleNeverWatched.waiting = 2;
  idleNeverWatched.oldest = 5min;
  idleNeverWatched.lastFinished.reset();
  idleNeverWatched.watchedFrom = kNow - 20s;  // the engine has just started
  for (const Row& r : std::initializer_list<Row>{
           {"ok", ok, State::Ok},
           {"paused", paused, State::Paused},
           {"stalled beats error", stalled, State::Stalled},
           {"finished lately: not stalled", notStalledYet, State::Ok},
           {"a backlog under a minute old", youngBacklog, State::Ok},
           {"error beats behind", error, State::Error},
           {"behind by count", behindCount, State::Behind},
           {"at the limit is not past it", atTheLimit, State::Ok},
           {"behind by age", behindAge, State::Behind},
           {"watched 20 s: not stalled", idleNeverWatched, State::Ok},
       })
    EXPECT_EQ(stateName(diagnose(r.f, kNow).state), stateName(r.want)) << r.name;
}

TEST(Diagnose, TheReasonSaysWhatWaitsSinceWhenAndTheLastError) {
  auto f = facts();
  f.waiting = 20;
  f.oldest = 3min;
  f.lastFinished = kNow - 3min;
  f.lastError = kNow - 40s;
  f.lastErrorText = "connect 127.0.0.1:5555: connection refused\r\nX-Injected: 1";
  auto d = diagnose(f, kNow);
  EXPECT_EQ(d.state, State::Stalled);
  EXPECT_NE(d.reason.find("20 waiting, the oldest 3m"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("nothing finished for 3m"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("last error 40s ago: connect 127.0.0.1:5555: connection refused"),
            std::string::npos)
      << d.reason;
  EXPECT_EQ(d.reason.find('\n'), std::string::npos) << "one line, whatever the error says";
  // An error older than the stall's start is not the stall's.
  f.lastError = kNow - 10min;
  EXPECT_EQ(diagnose(f, kNow).reason.find("last error"), std::string::npos);
  EXPECT_EQ(diagnose(facts(), kNow).reason, "");
}

TEST(Diagnose, ABacklogOverAMinuteOldSaysWhetherItCatchesUpAndWhen) {
  auto f = facts();
  f.waiting = 600;
  f.oldest = 2min;
  f.recent = Rates{10, 70, std::nullopt, 5};  // 60 a minute more out than in
  auto d = diagnose(f, kNow);
  ASSERT_TRUE(d.catchingUp);
  EXPECT_TRUE(*d.catchingUp);
  ASSERT_TRUE(d.eta);
  EXPECT_EQ(d.eta->count(), 600);  // 600 / 60 a minute = 10 minutes
  f.recent = Rates{70, 10, std::nullopt, 5};
  f.behind = Behind{100, std::nullopt};  // so the reason is said
  d = diagnose(f, kNow);
  ASSERT_TRUE(d.catchingUp);
  EXPECT_FALSE(*d.catchingUp);
  EXPECT_FALSE(d.eta);
  EXPECT_NE(d.reason.find("not catching up"), std::string::npos) << d.reason;
  f.oldest = 30s;  // a young backlog: no trend
  EXPECT_FALSE(diagnose(f, kNow).catchingUp);
}

TEST(Diagnose, CausesNeedTwiceTheNormalAndAFloor) {
  struct Row {
    const char* name;
    double in, normalIn;
    std::optional<double> sendMs, normalSendMs;
    std::vector<std::string> want;
  };
  for (const Row& r : std::initializer_list<Row>{
           {"a burst", 30, 10, std::nullopt, std::nullopt, {"burst"}},
           {"twice, but under 5 a minute more", 4, 1, std::nullopt, std::nullopt, {}},
           {"not twice", 19, 10, std::nullopt, std::nullopt, {}},
           {"no normal yet", 100, -1, std::nullopt, std::nullopt, {}},
           {"a slow receiver", 1, 1, 50.0, 10.0, {"slow receiver"}},
           {"twice, but under 5 ms more", 1, 1, 6.0, 2.0, {}},
           {"both", 40, 10, 50.0, 10.0, {"burst", "slow receiver"}},
       }) {
    auto f = facts();
    f.waiting = 50;
    f.oldest = 2min;
    f.recent = Rates{r.in, 1, r.sendMs, 5};
    if (r.normalIn >= 0) f.normalInPerMinute = r.normalIn;
    f.normalSendMs = r.normalSendMs;
    EXPECT_EQ(diagnose(f, kNow).causes, r.want) << r.name;
  }
}

TEST(JudgeInterface, StoppedThenTheWorstOfItsDestinationsThenLateAndQuiet) {
  Expectations none;
  InterfaceFacts f;
  f.watchedSince = kNow - 24h;
  f.lastReceived = kNow - 1min;
  f.expectations = &none;
  f.destinations = {State::Ok, State::Behind, State::Error};
  EXPECT_EQ(judgeInterface(f, kNow).state, State::Error);
  f.stopped = true;
  EXPECT_EQ(judgeInterface(f, kNow).state, State::Stopped);
  EXPECT_NE(judgeInterface(f, kNow).reason.find("runaway"), std::string::npos);

  Expectations quiet;
  quiet.activeWithin = ActiveWithin{Seconds(1800), std::nullopt};
  InterfaceFacts q;
  q.watchedSince = kNow - 24h;
  q.lastReceived = kNow - 31min;
  q.expectations = &quiet;
  EXPECT_EQ(judgeInterface(q, kNow).state, State::Quiet);
  EXPECT_NE(judgeInterface(q, kNow).reason.find("nothing received for 31m"), std::string::npos);
  q.destinations = {State::Behind};
  EXPECT_EQ(judgeInterface(q, kNow).state, State::Behind) << "behind is worse than quiet";
  q.destinations.clear();
  q.lastReceived = kNow - 29min;
  EXPECT_EQ(judgeInterface(q, kNow).state, State::Ok);
}

// An operator's stop of the intake: its own state with who, how long, why
// and the way out; never late nor quiet while stopped, whatever the
// expectations; its destinations judged as ever.
TEST(JudgeInterface, AnIntakeStoppedIsNeitherLateNorQuiet) {
  Zone z("UTC");
  Expectations e;
  e.activeWithin = ActiveWithin{Seconds(60), std::nullopt};
  ActiveBy by;
  by.kind = ActiveBy::Kind::Daily;
  by.minuteOfDay = 6 * 60;
  e.activeBy = by;
  const TimePoint now = utc(2026, 6, 2, 7, 0);
  InterfaceFacts f;
  f.name = "adt";
  f.watchedSince = utc(2026, 6, 1, 0, 0);
  f.lastReceived = utc(2026, 6, 1, 23, 0);
  f.expectations = &e;
  ASSERT_EQ(stateName(judgeInterface(f, now).state), "late") << "the case the stop must change";

  f.intakeStopped = IntakeStop{utc(2026, 6, 2, 5, 0), "ops", "sender misconfigured"};
  auto d = judgeInterface(f, now);
  EXPECT_EQ(d.state, State::IntakeStopped);
  EXPECT_EQ(stateName(d.state), "intake_stopped");
  EXPECT_EQ(d.reason,
            "intake stopped by ops 2h ago: sender misconfigured "
            "(POST /api/v1/interfaces/adt/start opens it)");
  // No reason given, no time known: said without them.
  f.intakeStopped = IntakeStop{std::nullopt, "ops", ""};
  EXPECT_EQ(judgeInterface(f, now).reason,
            "intake stopped by ops (POST /api/v1/interfaces/adt/start opens it)");
  // Never received anything, stopped since: not quiet either.
  f.lastReceived.reset();
  EXPECT_EQ(judgeInterface(f, now).state, State::IntakeStopped);

  // A destination's trouble outranks the stop (delivery goes on), and the
  // reason still says the stop.
  f.intakeStopped = IntakeStop{utc(2026, 6, 2, 6, 0), "ops", "sender misconfigured"};
  f.destinations = {State::Ok, State::Stalled};
  d = judgeInterface(f, now);
  EXPECT_EQ(d.state, State::Stalled);
  EXPECT_EQ(d.reason,
            "a destination is stalled; intake stopped by ops 60m ago: sender misconfigured "
            "(POST /api/v1/interfaces/adt/start opens it)");
  f.destinations = {State::Ok};
  // The runaway guard's stop is the worse news.
  f.stopped = true;
  EXPECT_EQ(judgeInterface(f, now).state, State::Stopped);
}

// After a start, quiet and late are measured from the start, not from the
// last message before the stop: the stop's hours were not quiet ones.
TEST(JudgeInterface, AfterAStartDeadlinesCountFromTheStart) {
  Zone z("UTC");
  Expectations quiet;
  quiet.activeWithin = ActiveWithin{Seconds(30 * 60), std::nullopt};
  InterfaceFacts f;
  f.name = "adt";
  f.watchedSince = utc(2026, 6, 1, 0, 0);
  f.lastReceived = utc(2026, 6, 2, 2, 0);  // the last before a stop at 02:00
  f.expectations = &quiet;
  f.intakeStarted = utc(2026, 6, 2, 6, 50);
  EXPECT_EQ(judgeInterface(f, utc(2026, 6, 2, 7, 0)).state, State::Ok)
      << "10 minutes since the start";
  auto d = judgeInterface(f, utc(2026, 6, 2, 7, 21));
  EXPECT_EQ(d.state, State::Quiet);
  EXPECT_EQ(d.reason, "nothing received since its intake was started, 31m ago");
  // Something received after the start: counted from it, as ever.
  f.lastReceived = utc(2026, 6, 2, 6, 55);
  d = judgeInterface(f, utc(2026, 6, 2, 7, 26));
  EXPECT_EQ(d.state, State::Quiet);
  EXPECT_EQ(d.reason, "nothing received for 31m");

  // active_by: a deadline that passed while stopped is not missed; the
  // next one is.
  Expectations daily;
  ActiveBy by;
  by.kind = ActiveBy::Kind::Daily;
  by.minuteOfDay = 6 * 60;
  daily.activeBy = by;
  InterfaceFacts g;
  g.name = "adt";
  g.watchedSince = utc(2026, 6, 1, 0, 0);
  g.lastReceived = utc(2026, 6, 1, 12, 0);
  g.expectations = &daily;
  ASSERT_EQ(judgeInterface(g, utc(2026, 6, 2, 7, 0)).state, State::Late);
  g.intakeStarted = utc(2026, 6, 2, 6, 30);
  EXPECT_EQ(judgeInterface(g, utc(2026, 6, 2, 7, 0)).state, State::Ok);
  EXPECT_EQ(judgeInterface(g, utc(2026, 6, 3, 6, 1)).state, State::Late)
      << "the next day's deadline counts";
  // A start older than the watch changes nothing.
  g.intakeStarted = utc(2026, 5, 1, 0, 0);
  EXPECT_EQ(judgeInterface(g, utc(2026, 6, 2, 7, 0)).state, State::Late);
}

TEST(JudgeInterface, LateBeatsQuietAndADestinationWorseBeatsLate) {
  Zone z("UTC");
  Expectations e;
  e.activeWithin = ActiveWithin{Seconds(1800), std::nullopt};
  ActiveBy by;
  by.kind = ActiveBy::Kind::Daily;
  by.minuteOfDay = 6 * 60;
  e.activeBy = by;
  InterfaceFacts f;
  f.watchedSince = utc(2026, 6, 1, 0, 0);
  f.lastReceived = utc(2026, 6, 1, 23, 0);
  f.expectations = &e;
  auto d = judgeInterface(f, utc(2026, 6, 2, 7, 0));
  EXPECT_EQ(stateName(d.state), "late");
  ASSERT_TRUE(d.deadline);
  EXPECT_EQ(*d.deadline, utc(2026, 6, 2, 6, 0));
  EXPECT_EQ(d.reason, "nothing received by its deadline, 60m ago");
  f.destinations = {State::Ok, State::Stalled};
  d = judgeInterface(f, utc(2026, 6, 2, 7, 0));
  EXPECT_EQ(stateName(d.state), "stalled");
  EXPECT_EQ(d.reason, "a destination is stalled");
  f.destinations = {State::Ok};
  // Late but here at 06:20: no longer late, but quiet for 40 minutes.
  f.lastReceived = utc(2026, 6, 2, 6, 20);
  EXPECT_EQ(stateName(judgeInterface(f, utc(2026, 6, 2, 7, 0)).state), "quiet");
  f.lastReceived = utc(2026, 6, 2, 6, 50);
  d = judgeInterface(f, utc(2026, 6, 2, 7, 0));
  EXPECT_EQ(stateName(d.state), "ok");
  EXPECT_EQ(d.reason, "");
  EXPECT_TRUE(d.deadline) << "the deadline in force is said even when met";
}

TEST(ActiveWithin, CountsFromTheLaterOfTheLastMessageAndTheWatchStart) {
  ActiveWithin a{Seconds(1800), std::nullopt};
  EXPECT_TRUE(activeWithinMissed(a, kNow - 31min, kNow - 24h, kNow));
  EXPECT_FALSE(activeWithinMissed(a, kNow - 29min, kNow - 24h, kNow));
  // A new engine watched for 10 minutes: not quiet yet, whatever came before.
  EXPECT_FALSE(activeWithinMissed(a, kNow - 5h, kNow - 10min, kNow));
  EXPECT_FALSE(activeWithinMissed(a, std::nullopt, kNow - 10min, kNow));
  EXPECT_TRUE(activeWithinMissed(a, std::nullopt, kNow - 31min, kNow));
}

TEST(ActiveWithin, BetweenCountsOnlyTheWindowsHoursEvenAcrossMidnightAndDst) {
  Zone z("Europe/Berlin");
  ActiveWithin day{Seconds(1800), DayWindow{7 * 60, 19 * 60}};
  // Last at 18:50, now 07:25 the next morning: 10 + 25 minutes counted.
  EXPECT_TRUE(activeWithinMissed(day, local(2026, 6, 1, 18, 50), local(2026, 5, 1, 0, 0),
                                 local(2026, 6, 2, 7, 25)));
  EXPECT_FALSE(activeWithinMissed(day, local(2026, 6, 1, 18, 50), local(2026, 5, 1, 0, 0),
                                  local(2026, 6, 2, 7, 15)));
  // At night nothing counts.
  EXPECT_FALSE(activeWithinMissed(day, local(2026, 6, 1, 18, 50), local(2026, 5, 1, 0, 0),
                                  local(2026, 6, 2, 3, 0)));
  // A window over midnight, 22:00-06:00, from 22:10 to 05:40: 7 h 30 of
  // wall clock, 6 h 30 on the night the clocks go forward (29 March 2026)
  // and 8 h 30 on the night they go back (25 October).
  ActiveWithin seven{Seconds(7 * 3600), DayWindow{22 * 60, 6 * 60}};
  EXPECT_FALSE(activeWithinMissed(seven, local(2026, 3, 28, 22, 10), local(2026, 3, 1, 0, 0),
                                  local(2026, 3, 29, 5, 40)))
      << "the night of the spring change is an hour shorter";
  EXPECT_TRUE(activeWithinMissed(seven, local(2026, 6, 1, 22, 10), local(2026, 5, 1, 0, 0),
                                 local(2026, 6, 2, 5, 40)));
  ActiveWithin eight{Seconds(8 * 3600), DayWindow{22 * 60, 6 * 60}};
  EXPECT_TRUE(activeWithinMissed(eight, local(2026, 10, 24, 22, 10), local(2026, 10, 1, 0, 0),
                                 local(2026, 10, 25, 5, 40)))
      << "the night of the autumn change is an hour longer";
  EXPECT_FALSE(activeWithinMissed(eight, local(2026, 6, 1, 22, 10), local(2026, 5, 1, 0, 0),
                                  local(2026, 6, 2, 5, 40)));
}

TEST(ActiveBy, DailyWeeklyAndCronDeadlinesWithTheirWindows) {
  Zone z("America/New_York");
  ActiveBy daily;
  daily.kind = ActiveBy::Kind::Daily;
  daily.minuteOfDay = 6 * 60;
  auto watched = local(2026, 1, 1, 0, 0);
  // 07:00: today's 06:00 passed; nothing since midnight: late.
  auto c = activeByCheck(daily, nullptr, local(2026, 6, 1, 23, 0), watched, local(2026, 6, 2, 7, 0));
  ASSERT_TRUE(c.deadline);
  EXPECT_EQ(*c.deadline, local(2026, 6, 2, 6, 0));
  EXPECT_EQ(c.windowStart, local(2026, 6, 2, 0, 0));
  EXPECT_TRUE(c.missed);
  // Received at 05:30: on time.
  EXPECT_FALSE(activeByCheck(daily, nullptr, local(2026, 6, 2, 5, 30), watched,
                             local(2026, 6, 2, 7, 0))
                   .missed);
  // Received at 06:20, late but here: not missed any more.
  EXPECT_FALSE(activeByCheck(daily, nullptr, local(2026, 6, 2, 6, 20), watched,
                             local(2026, 6, 2, 7, 0))
                   .missed);
  // 05:00: the deadline in force is yesterday's.
  c = activeByCheck(daily, nullptr, local(2026, 6, 1, 5, 0), watched, local(2026, 6, 2, 5, 0));
  EXPECT_EQ(*c.deadline, local(2026, 6, 1, 6, 0));
  EXPECT_FALSE(c.missed);
  // A deadline before the engine watched doesn't count.
  EXPECT_FALSE(activeByCheck(daily, nullptr, std::nullopt, local(2026, 6, 2, 6, 30),
                             local(2026, 6, 2, 7, 0))
                   .missed);
  // from: "22:00" (after 06:00): the window opens the evening before.
  daily.fromMinute = 22 * 60;
  c = activeByCheck(daily, nullptr, local(2026, 6, 1, 22, 30), watched, local(2026, 6, 2, 7, 0));
  EXPECT_EQ(c.windowStart, local(2026, 6, 1, 22, 0));
  EXPECT_FALSE(c.missed);

  ActiveBy weekly;
  weekly.kind = ActiveBy::Kind::Weekly;
  weekly.weekday = 1;  // Monday
  weekly.minuteOfDay = 9 * 60;
  // Wednesday 3 June 2026: the deadline in force is Monday 1 June 09:00.
  c = activeByCheck(weekly, nullptr, std::nullopt, watched, local(2026, 6, 3, 12, 0));
  EXPECT_EQ(*c.deadline, local(2026, 6, 1, 9, 0));
  EXPECT_TRUE(c.missed);

  ActiveBy byCron;
  byCron.kind = ActiveBy::Kind::Cron;
  byCron.cron = "30 6 * * 1-5";
  auto cron = parseCron(byCron.cron);
  ASSERT_TRUE(cron);
  // Sunday 7 June: the last weekday deadline was Friday 5 June 06:30.
  c = activeByCheck(byCron, &*cron, local(2026, 6, 5, 6, 0), watched, local(2026, 6, 7, 12, 0));
  EXPECT_EQ(*c.deadline, local(2026, 6, 5, 6, 30));
  EXPECT_FALSE(c.missed);
}

TEST(ActiveBy, ADeadlineOnTheDaysTheClocksChangeIsItsWallClockTime) {
  Zone z("Europe/Berlin");
  ActiveBy daily;
  daily.kind = ActiveBy::Kind::Daily;
  daily.minuteOfDay = 6 * 60;
  auto watched = local(2026, 1, 1, 0, 0);
  for (int day : {29}) {  // spring forward
    auto c = activeByCheck(daily, nullptr, std::nullopt, watched, local(2026, 3, day, 6, 1));
    EXPECT_EQ(*c.deadline, local(2026, 3, day, 6, 0));
    // The window from local midnight is 23 hours long that day.
    EXPECT_EQ(std::chrono::duration_cast<std::chrono::hours>(*c.deadline - c.windowStart).count(),
              5);
  }
  auto c = activeByCheck(daily, nullptr, std::nullopt, watched, local(2026, 10, 25, 6, 1));
  EXPECT_EQ(*c.deadline, local(2026, 10, 25, 6, 0));
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::hours>(*c.deadline - c.windowStart).count(), 7);
  // A deadline inside the skipped hour (02:30 on 29 March) is the first
  // minute the clock shows after it, 03:00, not mktime's 03:30.
  daily.minuteOfDay = 2 * 60 + 30;
  c = activeByCheck(daily, nullptr, std::nullopt, watched, local(2026, 3, 29, 4, 0));
  ASSERT_TRUE(c.deadline);
  EXPECT_EQ(*c.deadline, utc(2026, 3, 29, 1, 0)) << "03:00 CEST";
  EXPECT_TRUE(c.missed);
  // A message at 03:10 is before the 03:30 mktime would say, yet late.
  EXPECT_FALSE(
      activeByCheck(daily, nullptr, utc(2026, 3, 29, 1, 10), watched, utc(2026, 3, 29, 1, 20))
          .missed);
  // A deadline inside the repeated hour (02:30 on 25 October) is its first
  // occurrence, 02:30 CEST, whatever mktime guessed from its last call.
  c = activeByCheck(daily, nullptr, std::nullopt, watched, utc(2026, 10, 25, 3, 0));
  ASSERT_TRUE(c.deadline);
  EXPECT_EQ(*c.deadline, utc(2026, 10, 25, 0, 30)) << "02:30 CEST";
  c = activeByCheck(daily, nullptr, std::nullopt, watched, utc(2026, 10, 25, 1, 15));
  EXPECT_EQ(*c.deadline, utc(2026, 10, 25, 0, 30)) << "asked inside the second 02:xx";
}

TEST(ActiveBy, NewYorksDstDaysToo) {
  Zone z("America/New_York");
  ActiveBy daily;
  daily.kind = ActiveBy::Kind::Daily;
  daily.minuteOfDay = 2 * 60 + 30;
  auto watched = utc(2026, 1, 1, 0, 0);
  // 8 March 2026: 02:00 EST jumps to 03:00 EDT (07:00 UTC).
  auto c = activeByCheck(daily, nullptr, std::nullopt, watched, utc(2026, 3, 8, 12, 0));
  EXPECT_EQ(*c.deadline, utc(2026, 3, 8, 7, 0));
  EXPECT_EQ(c.windowStart, utc(2026, 3, 8, 5, 0)) << "midnight EST";
  // 1 November 2026: 01:00-02:00 comes twice; 01:30 is the EDT one.
  daily.minuteOfDay = 90;
  c = activeByCheck(daily, nullptr, std::nullopt, watched, utc(2026, 11, 1, 12, 0));
  EXPECT_EQ(*c.deadline, utc(2026, 11, 1, 5, 30));
  EXPECT_EQ(c.windowStart, utc(2026, 11, 1, 4, 0)) << "midnight EDT";
  // The day after, an ordinary day: 06:30 UTC.
  c = activeByCheck(daily, nullptr, std::nullopt, watched, utc(2026, 11, 2, 12, 0));
  EXPECT_EQ(*c.deadline, utc(2026, 11, 2, 6, 30));
}

TEST(ActiveBy, FromEarlierThatDayAndWeeklyBeforeTheWatch) {
  Zone z("Europe/Berlin");
  ActiveBy daily;
  daily.kind = ActiveBy::Kind::Daily;
  daily.minuteOfDay = 6 * 60;
  daily.fromMinute = 4 * 60;
  auto watched = local(2026, 1, 1, 0, 0);
  // from: 04:00 before 06:00: the window is that morning's 04:00-06:00.
  auto c = activeByCheck(daily, nullptr, local(2026, 6, 2, 3, 0), watched, local(2026, 6, 2, 7, 0));
  EXPECT_EQ(c.windowStart, local(2026, 6, 2, 4, 0));
  EXPECT_TRUE(c.missed) << "03:00 is before the window";
  EXPECT_FALSE(
      activeByCheck(daily, nullptr, local(2026, 6, 2, 4, 0), watched, local(2026, 6, 2, 7, 0))
          .missed);

  ActiveBy weekly;
  weekly.kind = ActiveBy::Kind::Weekly;
  weekly.weekday = 0;  // Sunday, 29 March 2026 is one: spring forward
  weekly.minuteOfDay = 9 * 60;
  c = activeByCheck(weekly, nullptr, std::nullopt, watched, local(2026, 3, 31, 12, 0));
  EXPECT_EQ(*c.deadline, local(2026, 3, 29, 9, 0));
  EXPECT_TRUE(c.missed);
  // Watching began after Sunday's deadline: not late until next Sunday's.
  EXPECT_FALSE(activeByCheck(weekly, nullptr, std::nullopt, local(2026, 3, 30, 8, 0),
                             local(2026, 3, 31, 12, 0))
                   .missed);
  // At the deadline minute itself it is in force.
  c = activeByCheck(weekly, nullptr, std::nullopt, watched, local(2026, 4, 5, 9, 0));
  EXPECT_EQ(*c.deadline, local(2026, 4, 5, 9, 0));
}

TEST(ActiveWithin, BetweenCountsFromTheWatchStartInsideTheWindow) {
  Zone z("Europe/Berlin");
  ActiveWithin day{Seconds(1800), DayWindow{7 * 60, 19 * 60}};
  // Nothing for days, but watched only since 18:45: 15 + 20 minutes.
  EXPECT_TRUE(activeWithinMissed(day, local(2026, 5, 1, 12, 0), local(2026, 6, 1, 18, 45),
                                 local(2026, 6, 2, 7, 20)));
  EXPECT_FALSE(activeWithinMissed(day, local(2026, 5, 1, 12, 0), local(2026, 6, 1, 18, 45),
                                  local(2026, 6, 2, 7, 10)));
  // A window in the hour that comes twice (02:00-03:00 on 25 October)
  // counts both: 2 hours of quiet there.
  ActiveWithin twice{Seconds(90 * 60), DayWindow{2 * 60, 3 * 60}};
  EXPECT_TRUE(
      activeWithinMissed(twice, std::nullopt, local(2026, 10, 24, 12, 0), utc(2026, 10, 25, 2, 0)));
}

TEST(Trends, AWindowOfFiveMinutesGivesRatesAndTheMeanSend) {
  Window w;
  Sample s;
  s.at = kNow - 10min;
  w.add(s);  // falls out of the window
  s.at = kNow - 4min;
  s.received = 100;
  s.finished = 100;
  s.sends = 100;
  s.sendSeconds = 1.0;
  w.add(s);
  s.at = kNow;
  s.received = 140;  // 10 a minute
  s.finished = 180;  // 20 a minute
  s.sends = 180;
  s.sendSeconds = 2.6;  // 1.6 s over 80 sends: 20 ms
  w.add(s);
  auto r = w.rates();
  EXPECT_DOUBLE_EQ(r.minutes, 4);
  EXPECT_DOUBLE_EQ(r.inPerMinute, 10);
  EXPECT_DOUBLE_EQ(r.outPerMinute, 20);
  ASSERT_TRUE(r.sendMs);
  EXPECT_NEAR(*r.sendMs, 20, 1e-9);
  // Counters that went back (a new count) start it over.
  s.received = 0;
  w.add(s);
  EXPECT_EQ(w.size(), 1u);
}

TEST(Trends, AnHourIsLearnedWhenItEndsIfAQuarterOfItWasWatched) {
  Zone z("UTC");
  HourLearner l;
  Baseline b;
  auto hour = local(2026, 6, 1, 10, 0);  // a Monday
  Sample s;
  s.at = hour + 40min;  // 20 minutes of the hour watched
  l.feed(s);
  s.at = hour + 60min - 1s;
  s.received = 200;  // 10 a minute over 20 minutes
  s.sends = 10;
  s.sendSeconds = 0.5;
  EXPECT_FALSE(l.feed(s));
  s.at = hour + 60min;
  auto learned = l.feed(s);
  ASSERT_TRUE(learned);
  EXPECT_EQ(learned->hour, hourOfWeek(hour));
  EXPECT_EQ(learned->hour, 24 + 10);
  EXPECT_NEAR(learned->inPerMinute, 10, 0.01);
  ASSERT_TRUE(learned->sendMs);
  EXPECT_NEAR(*learned->sendMs, 50, 0.01);
  b.learn(learned->hour, learned->inPerMinute);
  b.learn(learned->hour, 20);  // 30 % of the way
  EXPECT_NEAR(*b.at(34), 13, 0.05);
  // 10 minutes of an hour are not enough.
  HourLearner brief;
  s.at = hour + 50min;
  brief.feed(s);
  s.at = hour + 60min;
  EXPECT_FALSE(brief.feed(s));
  // The store's form round-trips; a short or hostile array learns nothing.
  auto back = Baseline::fromValues(b.values());
  EXPECT_EQ(back.at(34), b.at(34));
  EXPECT_FALSE(Baseline::fromValues({1.0, 2.0}).at(0));
  std::vector<std::optional<double>> bad(168);
  bad[3] = -5;
  bad[4] = std::nan("");
  EXPECT_FALSE(Baseline::fromValues(bad).at(3));
  EXPECT_FALSE(Baseline::fromValues(bad).at(4));
  // One that learned nothing (it holds no hours) is still 168 empty hours
  // to the store, and answers for none.
  Baseline empty;
  EXPECT_EQ(empty.values(), std::vector<std::optional<double>>(168));
  EXPECT_FALSE(empty.at(34));
  EXPECT_EQ(Baseline::fromValues(empty.values()).values(), empty.values());
}

}  // namespace
}  // namespace ductus::monitor
