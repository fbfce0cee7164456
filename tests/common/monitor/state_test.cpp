#include <gtest/gtest.h>

#include "common/monitor/settings.h"

namespace ductus::monitor {

TEST(MonitorState, EveryStateAndSeverityReadsBackFromItsName) {
  for (auto s : {State::Stopped, State::Paused, State::Stalled, State::Error, State::Behind,
                 State::IntakeStopped, State::Late, State::Quiet, State::Expiring, State::Ok})
    EXPECT_EQ(parseState(stateName(s)), s) << stateName(s);
  for (auto s : {Severity::Info, Severity::Warning, Severity::Critical})
    EXPECT_EQ(parseSeverity(severityName(s)), s);
  EXPECT_FALSE(parseState("Stalled"));
  EXPECT_FALSE(parseState(""));
  EXPECT_FALSE(parseSeverity("fatal"));
}

TEST(MonitorState, TheWorstStateWinsInTheOrderTheIssueGives) {
  // paused > stalled > error > behind > ok
  EXPECT_EQ(worst(State::Ok, State::Behind), State::Behind);
  EXPECT_EQ(worst(State::Error, State::Behind), State::Error);
  EXPECT_EQ(worst(State::Error, State::Stalled), State::Stalled);
  EXPECT_EQ(worst(State::Paused, State::Stalled), State::Paused);
  EXPECT_EQ(worst(State::Paused, State::Stopped), State::Stopped);
  // An operator's intake stop: below a destination's trouble (delivery
  // goes on and is judged as ever), above the late and quiet it explains.
  EXPECT_EQ(stateName(State::IntakeStopped), "intake_stopped");
  EXPECT_EQ(worst(State::IntakeStopped, State::Behind), State::Behind);
  EXPECT_EQ(worst(State::IntakeStopped, State::Quiet), State::IntakeStopped);
  EXPECT_EQ(worst(State::IntakeStopped, State::Late), State::IntakeStopped);
  EXPECT_EQ(worst(State::IntakeStopped, State::Ok), State::IntakeStopped);
}

}  // namespace ductus::monitor
