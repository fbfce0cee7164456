#include "common/monitor/alerts.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>

namespace ductus::monitor {
namespace {

using namespace std::chrono_literals;

// 2026-06-01T12:00:00Z
const TimePoint kT0 = Clock::from_time_t(1780315200);
const TimePoint kStarted = kT0 - 1h;  // the engine has run an hour

AlertSettings settings() {
  AlertSettings s;
  s.enabled = true;
  s.channels = {{"oncall", {"oncall@example.org"}, "", WebhookFormat::Json},
                {"team", {}, "https://hooks.example.org/x", WebhookFormat::Slack}};
  s.rules = {{{State::Stalled, State::Stopped}, Severity::Critical, {"oncall", "team"}},
             {{State::Behind, State::Error}, Severity::Warning, {"team"}}};
  s.remind = 1h;
  s.settle = 2min;
  return s;
}

AlertState fresh() {
  AlertState a;
  a.id = 42;
  a.subject = {"adt-in", "lab", ""};
  return a;
}

AlertState firing(State st, Severity sev, bool told = true) {
  AlertState a = fresh();
  a.phase = Phase::Firing;
  a.state = st;
  a.severity = sev;
  a.openedAt = kT0 - 10min;
  a.changedAt = kT0 - 10min;
  a.remindAt = kT0 + 50min;
  a.told = told;
  return a;
}

// Sets TZ for one test and restores it.
struct LocalZone {
  std::string was;
  bool had;
  explicit LocalZone(const char* tz) {
    const char* w = std::getenv("TZ");
    had = w != nullptr;
    if (had) was = w;
    setenv("TZ", tz, 1);
    tzset();
  }
  ~LocalZone() {
    if (had)
      setenv("TZ", was.c_str(), 1);
    else
      unsetenv("TZ");
    tzset();
  }
};

TEST(AlertRules, TheFirstRuleNamingTheStateWins) {
  AlertSettings s = settings();
  s.rules.push_back({{State::Stalled}, Severity::Info, {"team"}});
  ASSERT_NE(ruleFor(State::Stalled, s), nullptr);
  EXPECT_EQ(ruleFor(State::Stalled, s)->severity, Severity::Critical);
  EXPECT_EQ(ruleFor(State::Behind, s)->severity, Severity::Warning);
  EXPECT_EQ(ruleFor(State::Quiet, s), nullptr);
}

TEST(AlertRules, OnlyTimeJudgedStatesNeedWatching) {
  for (auto st : {State::Stalled, State::Behind, State::Late, State::Quiet})
    EXPECT_TRUE(needsWatching(st)) << stateName(st);
  for (auto st : {State::Error, State::Stopped, State::Paused, State::IntakeStopped, State::Ok,
                  State::Expiring})
    EXPECT_FALSE(needsWatching(st)) << stateName(st);
}

TEST(AlertStep, OkAndBadFiresToEveryChannelOfTheRule) {
  Step s = step(fresh(), State::Stalled, kT0, kStarted, settings(), "nothing sent for 5m", "eng1");
  EXPECT_EQ(s.change, Change::Fire);
  EXPECT_EQ(s.next.phase, Phase::Firing);
  EXPECT_EQ(s.next.state, State::Stalled);
  EXPECT_EQ(s.next.severity, Severity::Critical);
  EXPECT_EQ(s.next.openedAt, kT0);
  EXPECT_EQ(s.next.changedAt, kT0);
  EXPECT_EQ(s.next.remindAt, kT0 + 1h);
  EXPECT_TRUE(s.next.told);
  ASSERT_EQ(s.notify.size(), 2u);
  EXPECT_EQ(s.notify[0].channel, "oncall");
  EXPECT_EQ(s.notify[1].channel, "team");
  for (const auto& n : s.notify) {
    EXPECT_EQ(n.kind, NotificationKind::Fired);
    EXPECT_EQ(n.due, kT0);
    EXPECT_EQ(n.subject, "[CRITICAL] adt-in/lab is stalled");
    EXPECT_FALSE(n.text.empty());
    EXPECT_FALSE(n.webhookBody.empty());
  }
}

TEST(AlertStep, AStateNoRuleNamesIsGood) {
  Step s = step(fresh(), State::Quiet, kT0, kStarted, settings());
  EXPECT_EQ(s.change, Change::None);
  EXPECT_TRUE(s.notify.empty());
  // Firing and now in an unnamed state: it is recovering.
  s = step(firing(State::Behind, Severity::Warning), State::Quiet, kT0, kStarted, settings());
  EXPECT_EQ(s.change, Change::Recovering);
}

TEST(AlertStep, PausedHoldsWhateverThePhase) {
  for (auto a : {fresh(), firing(State::Stalled, Severity::Critical)}) {
    a.remindAt = kT0 - 1min;  // a reminder would be due
    Step s = step(a, State::Paused, kT0, kStarted, settings());
    EXPECT_EQ(s.change, Change::Hold);
    EXPECT_TRUE(s.notify.empty());
    EXPECT_EQ(s.next.phase, a.phase);
    EXPECT_EQ(s.next.remindAt, a.remindAt);
  }
}

// An operator's intake stop pages no one unless a rule names it: the
// alert stays as it was (no fire; a quiet it was firing for neither
// reminds nor turns "recovered").
TEST(AlertStep, AnIntakeStoppedNoRuleNamesHoldsWhateverThePhase) {
  AlertSettings s = settings();
  s.rules.push_back({{State::Late, State::Quiet}, Severity::Critical, {"oncall"}});
  for (auto a : {fresh(), firing(State::Quiet, Severity::Critical)}) {
    a.remindAt = kT0 - 1min;  // a reminder would be due
    Step st = step(a, State::IntakeStopped, kT0, kStarted, s, "intake stopped by ops 2h ago");
    EXPECT_EQ(st.change, Change::Hold) << changeName(st.change);
    EXPECT_TRUE(st.notify.empty());
    EXPECT_EQ(st.next.phase, a.phase);
    EXPECT_EQ(st.next.state, a.state);
    EXPECT_EQ(st.next.remindAt, a.remindAt);
  }
}

// Named by a rule it is a state like the others: it fires (at once, a
// fact), reminds until acknowledged (a stop forgotten for hours is said
// again), and after the start recovers.
TEST(AlertStep, AnIntakeStoppedARuleNamesFiresRemindsAndRecovers) {
  AlertSettings s = settings();
  s.rules.push_back({{State::IntakeStopped}, Severity::Info, {"team"}});
  s.rules.push_back({{State::Quiet}, Severity::Critical, {"oncall"}});
  const TimePoint justStarted = kT0 - 5s;
  Step st = step(fresh(), State::IntakeStopped, kT0, justStarted, s,
                 "intake stopped by ops 1m ago: sender misconfigured", "eng1");
  EXPECT_EQ(st.change, Change::Fire);
  EXPECT_EQ(st.next.state, State::IntakeStopped);
  EXPECT_EQ(st.next.severity, Severity::Info);
  ASSERT_EQ(st.notify.size(), 1u);
  EXPECT_EQ(st.notify[0].channel, "team");
  EXPECT_EQ(st.notify[0].subject, "[INFO] adt-in/lab is intake_stopped");

  Step later = step(st.next, State::IntakeStopped, kT0 + 1h, justStarted, s);
  EXPECT_EQ(later.change, Change::Remind);
  ASSERT_EQ(later.notify.size(), 1u);
  EXPECT_EQ(later.notify[0].kind, NotificationKind::Reminder);

  // A quiet alert that was firing when the intake stopped changes quietly
  // to the milder state: no page.
  Step calmer =
      step(firing(State::Quiet, Severity::Critical), State::IntakeStopped, kT0, kStarted, s);
  EXPECT_EQ(calmer.change, Change::ChangeQuietly);
  EXPECT_TRUE(calmer.notify.empty());

  Step started = step(later.next, State::Ok, kT0 + 2h, justStarted, s);
  EXPECT_EQ(started.change, Change::Recovering);
  Step done = step(started.next, State::Ok, kT0 + 2h + 2min, justStarted, s);
  EXPECT_EQ(done.change, Change::Recover);
}

TEST(AlertStep, StatesThatNeedWatchingWaitForTheEnginesFirstMinute) {
  const TimePoint started = kT0 - 59s;
  EXPECT_EQ(step(fresh(), State::Stalled, kT0, started, settings()).change, Change::None);
  EXPECT_EQ(step(fresh(), State::Behind, kT0, started, settings()).change, Change::None);
  // Facts count at once.
  EXPECT_EQ(step(fresh(), State::Error, kT0, started, settings()).change, Change::Fire);
  EXPECT_EQ(step(fresh(), State::Stopped, kT0, started, settings()).change, Change::Fire);
  // A minute on, stalled fires.
  EXPECT_EQ(step(fresh(), State::Stalled, kT0, kT0 - 60s, settings()).change, Change::Fire);
}

TEST(AlertStep, AHigherSeverityEscalatesAndClearsTheAcknowledgement) {
  AlertState a = firing(State::Behind, Severity::Warning);
  a.acknowledgedAt = kT0 - 5min;
  a.acknowledgedBy = "ann";
  Step s = step(a, State::Stalled, kT0, kStarted, settings());
  EXPECT_EQ(s.change, Change::Escalate);
  EXPECT_EQ(s.next.state, State::Stalled);
  EXPECT_EQ(s.next.severity, Severity::Critical);
  EXPECT_FALSE(s.next.acknowledgedAt);
  EXPECT_TRUE(s.next.acknowledgedBy.empty());
  EXPECT_EQ(s.next.openedAt, a.openedAt);
  EXPECT_EQ(s.next.changedAt, kT0);
  ASSERT_EQ(s.notify.size(), 2u);  // the new rule's channels
  EXPECT_EQ(s.notify[0].kind, NotificationKind::Escalated);
}

TEST(AlertStep, AnotherStateOfTheSameOrLowerSeverityChangesQuietly) {
  Step s = step(firing(State::Behind, Severity::Warning), State::Error, kT0, kStarted, settings());
  EXPECT_EQ(s.change, Change::ChangeQuietly);
  EXPECT_EQ(s.next.state, State::Error);
  EXPECT_TRUE(s.notify.empty());
  // Lower: the severity stays the highest reached, so swinging back is no news.
  s = step(firing(State::Stalled, Severity::Critical), State::Behind, kT0, kStarted, settings());
  EXPECT_EQ(s.change, Change::ChangeQuietly);
  EXPECT_EQ(s.next.severity, Severity::Critical);
  Step back = step(s.next, State::Stalled, kT0 + 15s, kStarted, settings());
  EXPECT_EQ(back.change, Change::ChangeQuietly);
  EXPECT_TRUE(back.notify.empty());
}

TEST(AlertStep, GoodRecoversAfterSettleAndTellsThoseTold) {
  Step r = step(firing(State::Stalled, Severity::Critical), State::Ok, kT0, kStarted, settings());
  EXPECT_EQ(r.change, Change::Recovering);
  EXPECT_EQ(r.next.phase, Phase::Recovering);
  EXPECT_EQ(r.next.goodSince, kT0);
  EXPECT_TRUE(r.notify.empty());

  Step early = step(r.next, State::Ok, kT0 + 119s, kStarted, settings());
  EXPECT_EQ(early.change, Change::None);

  AlertState rec = r.next;
  rec.acknowledgedAt = kT0;
  rec.silencedUntil = kT0 + 1min;  // over by the time it recovers
  Step done = step(rec, State::Ok, kT0 + 2min, kStarted, settings(), "", "eng1");
  EXPECT_EQ(done.change, Change::Recover);
  EXPECT_EQ(done.next.phase, Phase::Ok);
  EXPECT_FALSE(done.next.told);
  EXPECT_FALSE(done.next.acknowledgedAt);
  EXPECT_FALSE(done.next.silencedUntil);
  EXPECT_FALSE(done.next.remindAt);
  ASSERT_EQ(done.notify.size(), 2u);
  EXPECT_EQ(done.notify[0].kind, NotificationKind::Recovered);
  EXPECT_EQ(done.notify[0].subject, "[RECOVERED] adt-in/lab is ok again (was stalled)");
}

TEST(AlertStep, ARecoveryOfAnAlertNoOneWasToldOfIsSilent) {
  AlertState a = firing(State::Stalled, Severity::Critical, /*told=*/false);
  a.phase = Phase::Recovering;
  a.goodSince = kT0 - 3min;
  Step s = step(a, State::Ok, kT0, kStarted, settings());
  EXPECT_EQ(s.change, Change::Recover);
  EXPECT_TRUE(s.notify.empty());
}

TEST(AlertStep, BadAgainWithinSettleReopensWithoutNotifying) {
  AlertState a = firing(State::Stalled, Severity::Critical);
  a.phase = Phase::Recovering;
  a.goodSince = kT0 - 1min;
  Step s = step(a, State::Stalled, kT0, kStarted, settings());
  EXPECT_EQ(s.change, Change::Reopen);
  EXPECT_EQ(s.next.phase, Phase::Firing);
  EXPECT_FALSE(s.next.goodSince);
  EXPECT_EQ(s.next.openedAt, a.openedAt);
  EXPECT_TRUE(s.notify.empty());
  // Worse than before while recovering: that is an escalation.
  a.state = State::Behind;
  a.severity = Severity::Warning;
  EXPECT_EQ(step(a, State::Stalled, kT0, kStarted, settings()).change, Change::Escalate);
}

TEST(AlertStep, RemindsUntilAcknowledged) {
  AlertState a = firing(State::Stalled, Severity::Critical);
  a.remindAt = kT0;
  Step s = step(a, State::Stalled, kT0, kStarted, settings());
  EXPECT_EQ(s.change, Change::Remind);
  EXPECT_EQ(s.next.remindAt, kT0 + 1h);
  EXPECT_EQ(s.next.changedAt, kT0);
  ASSERT_EQ(s.notify.size(), 2u);
  EXPECT_EQ(s.notify[0].kind, NotificationKind::Reminder);
  EXPECT_EQ(s.notify[0].subject, "[CRITICAL] adt-in/lab is still stalled");

  a.remindAt = kT0 + 1s;
  EXPECT_EQ(step(a, State::Stalled, kT0, kStarted, settings()).change, Change::None);

  a.remindAt = kT0 - 1min;
  a.acknowledgedAt = kT0 - 30min;
  EXPECT_EQ(step(a, State::Stalled, kT0, kStarted, settings()).change, Change::None);
}

TEST(AlertStep, AReminderLongOverdueIsOneReminderNotABurst) {
  AlertState a = firing(State::Stalled, Severity::Critical);
  a.remindAt = kT0 - 5h;  // the engine was away
  Step s = step(a, State::Stalled, kT0, kStarted, settings());
  EXPECT_EQ(s.change, Change::Remind);
  EXPECT_EQ(s.next.remindAt, kT0 + 1h);
}

TEST(AlertStep, SilencedRecordsTheChangeButTellsNoOne) {
  AlertState a = fresh();
  a.silencedUntil = kT0 + 1h;
  Step s = step(a, State::Stalled, kT0, kStarted, settings());
  EXPECT_EQ(s.change, Change::Fire);
  EXPECT_EQ(s.next.phase, Phase::Firing);
  EXPECT_TRUE(s.notify.empty());
  EXPECT_FALSE(s.next.told);

  AlertState f = firing(State::Behind, Severity::Warning, /*told=*/true);
  f.silencedUntil = kT0 + 1h;
  s = step(f, State::Stalled, kT0, kStarted, settings());
  EXPECT_EQ(s.change, Change::Escalate);
  EXPECT_TRUE(s.notify.empty());
  EXPECT_TRUE(s.next.told);  // stays as it was

  f.remindAt = kT0 - 1s;
  f.state = State::Stalled;
  f.severity = Severity::Critical;
  s = step(f, State::Stalled, kT0, kStarted, settings());
  EXPECT_EQ(s.change, Change::Remind);
  EXPECT_TRUE(s.notify.empty());

  // A silence that ended is no silence.
  a.silencedUntil = kT0;
  EXPECT_EQ(step(a, State::Stalled, kT0, kStarted, settings()).notify.size(), 2u);
}

TEST(QuietHours, AHeldSeverityInsideTheWindowIsDueAtItsEnd) {
  LocalZone zone("UTC");
  QuietHours q{{22 * 60, 7 * 60}, {Severity::Info, Severity::Warning}};
  const TimePoint night = Clock::from_time_t(1780351200);    // 2026-06-01T22:00:00Z
  const TimePoint morning = Clock::from_time_t(1780383600);  // 2026-06-02T07:00:00Z
  struct Row {
    TimePoint at;
    Severity sev;
    TimePoint due;
  } rows[] = {
      {night, Severity::Warning, morning},           // the window's first minute
      {night - 1s, Severity::Warning, night - 1s},   // before it
      {night + 3h, Severity::Info, morning},         // after midnight
      {morning - 1s, Severity::Warning, morning},    // its last second
      {morning, Severity::Warning, morning},         // its end: due now
      {night + 1h, Severity::Critical, night + 1h},  // not held
  };
  for (const auto& r : rows)
    EXPECT_EQ(dueAfterQuietHours(r.at, r.sev, q), r.due) << Clock::to_time_t(r.at);
  EXPECT_EQ(dueAfterQuietHours(night, Severity::Info, std::nullopt), night);
  // A window inside one day; one whose start equals its end is empty.
  QuietHours day{{12 * 60, 13 * 60}, {Severity::Warning}};
  EXPECT_EQ(dueAfterQuietHours(kT0 + 30min, Severity::Warning, day), kT0 + 1h);
  QuietHours none{{12 * 60, 12 * 60}, {Severity::Warning}};
  EXPECT_EQ(dueAfterQuietHours(kT0, Severity::Warning, none), kT0);
}

TEST(QuietHours, TheWindowEndsAtItsWallClockTimeAcrossADstChange) {
  LocalZone zone("Europe/Berlin");
  QuietHours q{{22 * 60, 7 * 60}, {Severity::Warning}};
  // 2026-03-28 23:00 CET (22:00Z); the clocks go forward that night, so
  // 07:00 CEST is 05:00Z, seven hours later, not eight.
  const TimePoint at = Clock::from_time_t(1774735200);
  EXPECT_EQ(dueAfterQuietHours(at, Severity::Warning, q), Clock::from_time_t(1774760400));
  // And back in autumn: 2026-10-24 23:00 CEST (21:00Z) -> 07:00 CET (06:00Z).
  const TimePoint autumn = Clock::from_time_t(1792875600);
  EXPECT_EQ(dueAfterQuietHours(autumn, Severity::Warning, q), Clock::from_time_t(1792908000));
}

TEST(QuietHours, StepSetsEachNotificationsDue) {
  LocalZone zone("UTC");
  AlertSettings s = settings();
  s.quietHours = QuietHours{{11 * 60, 13 * 60}, {Severity::Warning}};
  Step w = step(fresh(), State::Behind, kT0, kStarted, s);  // 12:00Z, warning
  ASSERT_EQ(w.notify.size(), 1u);
  EXPECT_EQ(w.notify[0].due, kT0 + 1h);
  EXPECT_TRUE(w.next.told);
  Step c = step(fresh(), State::Stalled, kT0, kStarted, s);  // critical: now
  ASSERT_EQ(c.notify.size(), 2u);
  EXPECT_EQ(c.notify[0].due, kT0);
}

// ---- certificates ----------------------------------------------------------

AlertSettings certSettings() {
  AlertSettings s = settings();
  s.rules.push_back({{State::Expiring}, Severity::Info, {"oncall"}});
  return s;
}

AlertState cert() {
  AlertState a;
  a.id = 7;
  a.subject.certificate = "server";
  return a;
}

TEST(CertificateStep, WholeUtcDaysLeft) {
  EXPECT_EQ(daysLeft(kT0 + 24h, kT0), 1);
  EXPECT_EQ(daysLeft(kT0 + 11h, kT0), 0);  // 23:00 the same day
  EXPECT_EQ(daysLeft(kT0 + 13h, kT0), 1);  // 01:00 the next day
  EXPECT_EQ(daysLeft(kT0 - 13h, kT0), -1);
}

TEST(CertificateStep, FiresAtTheFirstStepAndEscalatesAtEachCloserOne) {
  const AlertSettings s = certSettings();
  struct Row {
    int days;
    int stage;
    Severity sev;
  };
  EXPECT_EQ(certificateStep(cert(), kT0 + 31 * 24h, kT0, s).change, Change::None);
  Step f = certificateStep(cert(), kT0 + 30 * 24h, kT0, s);
  EXPECT_EQ(f.change, Change::Fire);
  EXPECT_EQ(f.next.stage, 1);
  EXPECT_EQ(f.next.severity, Severity::Warning);
  EXPECT_EQ(f.next.state, State::Expiring);
  EXPECT_FALSE(f.next.remindAt);  // no reminders before expiry
  ASSERT_EQ(f.notify.size(), 1u);
  EXPECT_EQ(f.notify[0].subject, "[WARNING] certificate:server is expiring");
  EXPECT_NE(f.notify[0].text.find("expires in 30 days"), std::string::npos) << f.notify[0].text;

  // Days pass: nothing new until the next step.
  AlertState a = f.next;
  EXPECT_EQ(certificateStep(a, kT0 + 30 * 24h, kT0 + 10 * 24h, s).change, Change::None);
  for (Row r : {Row{14, 2, Severity::Warning}, Row{7, 3, Severity::Critical}}) {
    const TimePoint now = kT0 + (30 - r.days) * 24h;
    Step e = certificateStep(a, kT0 + 30 * 24h, now, s);
    EXPECT_EQ(e.change, Change::Escalate) << r.days;
    EXPECT_EQ(e.next.stage, r.stage);
    EXPECT_EQ(e.next.severity, r.sev);
    EXPECT_EQ(e.notify.size(), 1u);
    a = e.next;
  }
  // Expired: once more, critical, and now reminders.
  Step x = certificateStep(a, kT0 + 30 * 24h, kT0 + 30 * 24h, s);
  EXPECT_EQ(x.change, Change::Escalate);
  EXPECT_EQ(x.next.stage, 4);
  EXPECT_EQ(x.next.severity, Severity::Critical);
  EXPECT_EQ(x.next.remindAt, kT0 + 30 * 24h + 1h);
  Step rem = certificateStep(x.next, kT0 + 30 * 24h, kT0 + 30 * 24h + 1h, s);
  EXPECT_EQ(rem.change, Change::Remind);
  EXPECT_EQ(rem.notify.size(), 1u);
}

TEST(CertificateStep, FirstSeenCloseFiresAtItsStage) {
  Step f = certificateStep(cert(), kT0 + 5 * 24h, kT0, certSettings());
  EXPECT_EQ(f.change, Change::Fire);
  EXPECT_EQ(f.next.stage, 3);
  EXPECT_EQ(f.next.severity, Severity::Critical);
  Step x = certificateStep(cert(), kT0 - 1s, kT0, certSettings());
  EXPECT_EQ(x.next.stage, 4);
  EXPECT_EQ(x.next.severity, Severity::Critical);
}

TEST(CertificateStep, ARenewalRecoversAfterSettleAndTellsThoseTold) {
  const AlertSettings s = certSettings();
  AlertState a = certificateStep(cert(), kT0 + 10 * 24h, kT0, s).next;  // stage 2
  Step r = certificateStep(a, kT0 + 400 * 24h, kT0 + 1h, s);
  EXPECT_EQ(r.change, Change::Recovering);
  EXPECT_TRUE(r.notify.empty());
  EXPECT_EQ(certificateStep(r.next, kT0 + 400 * 24h, kT0 + 1h + 1min, s).change, Change::None);
  Step done = certificateStep(r.next, kT0 + 400 * 24h, kT0 + 1h + 2min, s);
  EXPECT_EQ(done.change, Change::Recover);
  EXPECT_EQ(done.next.phase, Phase::Ok);
  EXPECT_EQ(done.next.stage, 0);
  ASSERT_EQ(done.notify.size(), 1u);
  EXPECT_EQ(done.notify[0].kind, NotificationKind::Recovered);
}

TEST(CertificateStep, ARenewalStillWithinAStepChangesQuietly) {
  const AlertSettings s = certSettings();
  AlertState a = certificateStep(cert(), kT0 + 5 * 24h, kT0, s).next;  // stage 3
  Step q = certificateStep(a, kT0 + 20 * 24h, kT0 + 1h, s);
  EXPECT_EQ(q.change, Change::ChangeQuietly);
  EXPECT_EQ(q.next.stage, 1);
  EXPECT_EQ(q.next.severity, Severity::Warning);
  EXPECT_TRUE(q.notify.empty());
}

TEST(CertificateStep, NoRuleNamingExpiringRaisesNoAlert) {
  EXPECT_EQ(certificateStep(cert(), kT0 + 24h, kT0, settings()).change, Change::None);
}

}  // namespace
}  // namespace ductus::monitor
