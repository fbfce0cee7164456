// supervisor/engine_process.h: the exit code of each start failure, from
// one place; the stop requests recorded from every side and acted on once
// (a second signal alone exits at once); and a real failed start's exit.
#include "supervisor/engine_process.h"

#include <gtest/gtest.h>

#include "supervisor/ownership.h"
#include "tests/support/log_capture.h"

namespace ductus::supervisor {
namespace {

using Action = StopRequests::Action;

TEST(StartFailureExit, EachFailureHasTheExitCodeTheDocsName) {
  EXPECT_EQ(exitCodeOf(StartFailure::OwnedElsewhere), kExitOwnedElsewhere);
  EXPECT_EQ(exitCodeOf(StartFailure::OwnedElsewhere), 3);
  EXPECT_EQ(exitCodeOf(StartFailure::NoDatabase), 2);
  for (auto f : {StartFailure::InvalidProject, StartFailure::Handover, StartFailure::Code,
                 StartFailure::Stranded, StartFailure::Other})
    EXPECT_EQ(exitCodeOf(f), 1) << static_cast<int>(f);
}

TEST(StartFailureExit, TheEnginesErrorIsSortedByItsKind) {
  EXPECT_EQ(startFailureOf(Error{"x", ErrorKind::OwnedElsewhere}), StartFailure::OwnedElsewhere);
  EXPECT_EQ(startFailureOf(Error{"x", ErrorKind::Stranded}), StartFailure::Stranded);
  EXPECT_EQ(startFailureOf(Error{"x", ErrorKind::Code}), StartFailure::Code);
  EXPECT_EQ(startFailureOf(Error{"x", ErrorKind::Database}), StartFailure::Other);
  EXPECT_EQ(startFailureOf(Error{"x"}), StartFailure::Other);
}

TEST(StopRequests, ASignalBeginsTheStopOnceAndASecondExitsAtOnceWithOne) {
  StopRequests s;
  EXPECT_FALSE(s.asked());
  EXPECT_EQ(s.take(), Action::Nothing);
  s.record(StopCause::Signal);
  EXPECT_TRUE(s.asked());
  EXPECT_EQ(s.take(), Action::BeginStop);
  EXPECT_EQ(s.take(), Action::Nothing);  // acted on once
  EXPECT_EQ(s.exitCode(), 0);
  EXPECT_EQ(s.cutShortExitCode(), 1);
  s.record(StopCause::Signal);
  EXPECT_EQ(s.take(), Action::ExitNow);
  EXPECT_EQ(s.cutShortExitCode(), 1);
}

TEST(StopRequests, ASignalDuringTheStopOfATakenEngineIsItsFirstAndKeepsExit3) {
  StopRequests s;
  s.record(StopCause::OwnershipTaken);
  EXPECT_EQ(s.take(), Action::BeginStop);
  EXPECT_EQ(s.exitCode(), 3);
  EXPECT_EQ(s.cutShortExitCode(), 3);
  // An operator's SIGTERM now: the stop under way covers it.
  s.record(StopCause::Signal);
  EXPECT_EQ(s.take(), Action::Nothing);
  EXPECT_EQ(s.exitCode(), 3);
  // Only a second signal cuts it short.
  s.record(StopCause::Signal);
  EXPECT_EQ(s.take(), Action::ExitNow);
  EXPECT_EQ(s.cutShortExitCode(), 3);
}

TEST(StopRequests, AnInterfaceTakenDuringASignalsStopActsOnceAndExits3) {
  StopRequests s;
  s.record(StopCause::Signal);
  EXPECT_EQ(s.take(), Action::BeginStop);
  s.record(StopCause::OwnershipTaken);
  s.record(StopCause::OwnershipTaken);
  EXPECT_EQ(s.take(), Action::Nothing);
  EXPECT_EQ(s.exitCode(), 3);
}

TEST(StopRequests, TwoFailuresOfATakeoverStopOnceWithTheFirstsCode) {
  StopRequests s;
  s.record(StopCause::Failed, StartFailure::OwnedElsewhere);
  s.record(StopCause::Failed, StartFailure::Handover);
  EXPECT_EQ(s.take(), Action::BeginStop);
  EXPECT_EQ(s.take(), Action::Nothing);
  EXPECT_EQ(s.exitCode(), 3);
}

TEST(EngineProcess, AStartWithoutItsDatabaseSaysWhyAndExitsOneWithoutStarting) {
  test::LogCapture log(spdlog::level::info);
  config::Project project;
  EngineProcessOptions o;
  o.databaseUrl = "host=/nonexistent-ductus-dir port=1 dbname=none connect_timeout=2";
  o.dev = true;
  bool started = false;
  o.onStarted = [&](const Engine&) { started = true; };
  EXPECT_EQ(runEngineProcess(std::move(project), std::move(o)), 1) << log.all();
  EXPECT_FALSE(started);
  EXPECT_EQ(log.count("start failed: migrating the database"), 1u) << log.all();
  EXPECT_EQ(log.count("started:"), 0u) << log.all();
}

}  // namespace
}  // namespace ductus::supervisor
