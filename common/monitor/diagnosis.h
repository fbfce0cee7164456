// The judgement of one destination and one interface from the facts the
// engine gathers (supervisor/monitor/health.h). Pure: the times are given,
// so every state, cause and deadline has a table test with local times.
//
// A destination, worst first: paused (an operator holds it) > stalled
// (messages have waited over kStallAfter and nothing finished for as long)
// > error (quarantined messages wait for a person) > behind (past its
// behind: expectation) > ok. For a backlog older than a minute, the trend
// (catching up, with an ETA, or not) and what looks like the cause: a
// burst (inflow over twice its normal for this hour of the week and at
// least 5 a minute more) or a slow receiver (a send over twice its normal
// and at least 5 ms more).
//
// An interface: stopped (the runaway guard stopped its code), the worst
// of its destinations, intake_stopped (an operator stopped its intake),
// late (active_by's deadline passed with nothing received) or quiet
// (active_within passed with nothing received). A stopped intake receives
// nothing on purpose: its deadlines don't count while it is stopped, nor
// for the time it was (after a start they are counted from the start, as
// from watchedSince), and its destinations are judged as ever.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/cron.h"
#include "common/monitor/settings.h"
#include "common/monitor/trends.h"

namespace ductus::monitor {

inline constexpr Seconds kStallAfter{60};
inline constexpr double kCauseFactor = 2.0;
inline constexpr double kBurstAtLeastPerMinute = 5.0;
inline constexpr double kSlowAtLeastMs = 5.0;

struct DestinationFacts {
  int64_t waiting = 0;
  std::optional<Seconds> oldest;  // the oldest waiting message's age
  int64_t quarantined = 0;
  std::optional<TimePoint> lastFinished;  // sent, filtered, routed or quarantined
  std::optional<TimePoint> lastError;
  std::string lastErrorText;
  bool paused = false;
  Rates recent;
  std::optional<double> normalInPerMinute, normalSendMs;
  std::optional<Behind> behind;
  TimePoint watchedFrom{};  // this engine began watching: "nothing finished" counts from here
};

struct DestinationDiagnosis {
  State state = State::Ok;
  std::string reason;  // one line an operator can act on; "" when ok
  std::optional<bool> catchingUp;
  std::optional<Seconds> eta;
  std::vector<std::string> causes;  // "burst", "slow receiver"
};

DestinationDiagnosis diagnose(const DestinationFacts& f, TimePoint now);

// An operator's stop of an interface's intake (POST .../stop).
struct IntakeStop {
  std::optional<TimePoint> since;  // unknown: the reason says no age
  std::string by;
  std::string reason;  // "" when none was given
};

struct InterfaceFacts {
  std::string name;  // for the reason's way out (POST .../{name}/start)
  bool stopped = false;
  std::optional<IntakeStop> intakeStopped;
  std::optional<TimePoint> lastReceived;
  TimePoint watchedSince{};
  // The last start of a stopped intake (POST .../start): nothing was
  // expected before it.
  std::optional<TimePoint> intakeStarted;
  const Expectations* expectations = nullptr;
  const Cron* activeByCron = nullptr;
  std::vector<State> destinations;
};

struct InterfaceDiagnosis {
  State state = State::Ok;
  std::string reason;
  std::optional<TimePoint> deadline;  // active_by's latest, when it has one
};

InterfaceDiagnosis judgeInterface(const InterfaceFacts& f, TimePoint now);

// "45s", "12m", "3h 5m", "2d 4h": a span as a reason says it.
std::string spanText(Clock::duration d);

}  // namespace ductus::monitor
