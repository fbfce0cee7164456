#include "common/monitor/diagnosis.h"

#include <cmath>

#include "common/monitor/alert_text.h"
#include "common/monitor/deadlines.h"

namespace ductus::monitor {

std::string spanText(Clock::duration d) {
  int64_t s = std::chrono::duration_cast<Seconds>(d).count();
  if (s < 0) s = 0;
  if (s < 90) return std::to_string(s) + "s";
  int64_t m = s / 60;
  if (m < 90) return std::to_string(m) + "m";
  int64_t h = m / 60;
  if (h < 48) return std::to_string(h) + "h" + (m % 60 ? " " + std::to_string(m % 60) + "m" : "");
  return std::to_string(h / 24) + "d" + (h % 24 ? " " + std::to_string(h % 24) + "h" : "");
}

namespace {

bool pastBehind(const DestinationFacts& f) {
  if (!f.behind) return false;
  if (f.behind->waiting && f.waiting > *f.behind->waiting) return true;
  if (f.behind->oldest && f.oldest && *f.oldest > *f.behind->oldest) return true;
  return false;
}

// "intake stopped by ops 2h ago: sender misconfigured (POST
// /api/v1/interfaces/adt/start opens it)": who, how long, why, and the way
// out, so a stop nobody remembers is seen for what it is.
std::string intakeStoppedReason(const IntakeStop& s, const std::string& name, TimePoint now) {
  std::string r = "intake stopped";
  if (!s.by.empty()) r += " by " + s.by;
  if (s.since) r += " " + spanText(now - *s.since) + " ago";
  if (!s.reason.empty()) r += ": " + oneLine(s.reason, 300);
  r += " (POST /api/v1/interfaces/" + name + "/start opens it)";
  return r;
}

}  // namespace

DestinationDiagnosis diagnose(const DestinationFacts& f, TimePoint now) {
  DestinationDiagnosis d;
  // When nothing has finished here: since the last finish, or since this
  // engine began watching (what happened before is not known to be recent).
  TimePoint finishedAt = f.lastFinished ? std::max(*f.lastFinished, f.watchedFrom) : f.watchedFrom;
  auto idle = now - finishedAt;
  const bool backlogOld = f.waiting > 0 && f.oldest && *f.oldest > kStallAfter;
  const bool stalled = backlogOld && idle > kStallAfter;

  if (f.paused)
    d.state = State::Paused;
  else if (stalled)
    d.state = State::Stalled;
  else if (f.quarantined > 0)
    d.state = State::Error;
  else if (pastBehind(f))
    d.state = State::Behind;

  if (backlogOld) {
    double net = f.recent.outPerMinute - f.recent.inPerMinute;
    d.catchingUp = net > 0 && f.recent.minutes > 0;
    if (*d.catchingUp)
      d.eta = Seconds(static_cast<int64_t>(std::ceil(static_cast<double>(f.waiting) / net * 60.0)));
    if (f.normalInPerMinute &&
        f.recent.inPerMinute > kCauseFactor * *f.normalInPerMinute &&
        f.recent.inPerMinute >= *f.normalInPerMinute + kBurstAtLeastPerMinute)
      d.causes.push_back("burst");
    if (f.normalSendMs && f.recent.sendMs && *f.recent.sendMs > kCauseFactor * *f.normalSendMs &&
        *f.recent.sendMs >= *f.normalSendMs + kSlowAtLeastMs)
      d.causes.push_back("slow receiver");
  }

  if (d.state == State::Ok) return d;
  std::string r;
  auto add = [&r](const std::string& part) { r += (r.empty() ? "" : "; ") + part; };
  if (d.state == State::Paused) add("paused");
  if (f.waiting > 0)
    add(std::to_string(f.waiting) + " waiting" +
        (f.oldest ? ", the oldest " + spanText(*f.oldest) : std::string()));
  if (d.state == State::Stalled)
    add("nothing finished for " + spanText(idle));
  if (f.quarantined > 0) add(std::to_string(f.quarantined) + " quarantined");
  if (d.catchingUp)
    add(*d.catchingUp ? "catching up, done in about " + spanText(*d.eta) : "not catching up");
  for (const auto& c : d.causes)
    add(c == "burst" ? "a burst: more than twice the usual inflow"
                     : "a slow receiver: sends take more than twice as long as usual");
  // The last error when it is newer than the stall began, or with an error.
  if (f.lastError && !f.lastErrorText.empty() &&
      (d.state == State::Error || *f.lastError >= finishedAt))
    add("last error " + spanText(now - *f.lastError) + " ago: " + oneLine(f.lastErrorText, 300));
  d.reason = r;
  return d;
}

InterfaceDiagnosis judgeInterface(const InterfaceFacts& f, TimePoint now) {
  InterfaceDiagnosis out;
  State own = State::Ok;
  std::string ownReason;
  // Expected from: the later of when an engine first ran it and the last
  // start of its intake (a stop's hours are not quiet ones).
  const TimePoint expectedFrom =
      f.intakeStarted ? std::max(f.watchedSince, *f.intakeStarted) : f.watchedSince;
  if (f.stopped) {
    own = State::Stopped;
    ownReason = "its code was stopped as a runaway: fix it, then restart the interface";
  } else if (f.intakeStopped) {
    own = State::IntakeStopped;
    ownReason = intakeStoppedReason(*f.intakeStopped, f.name, now);
  } else if (const Expectations* e = f.expectations) {
    if (e->activeBy) {
      auto c = activeByCheck(*e->activeBy, f.activeByCron, f.lastReceived, expectedFrom, now);
      out.deadline = c.deadline;
      if (c.missed) {
        own = State::Late;
        ownReason = "nothing received by its deadline, " + spanText(now - *c.deadline) + " ago";
      }
    }
    if (own == State::Ok && e->activeWithin &&
        activeWithinMissed(*e->activeWithin, f.lastReceived, expectedFrom, now)) {
      own = State::Quiet;
      const bool sinceStart = f.intakeStarted && *f.intakeStarted >= f.watchedSince &&
                              (!f.lastReceived || *f.lastReceived < *f.intakeStarted);
      if (sinceStart)
        ownReason = "nothing received since its intake was started, " +
                    spanText(now - *f.intakeStarted) + " ago";
      else if (f.lastReceived)
        ownReason = "nothing received for " + spanText(now - *f.lastReceived);
      else
        ownReason = "nothing received since it was first watched, " +
                    spanText(now - f.watchedSince) + " ago";
    }
  }
  State worstDestination = State::Ok;
  for (State s : f.destinations) worstDestination = worst(worstDestination, s);
  out.state = worst(own, worstDestination);
  if (out.state == own && own != State::Ok)
    out.reason = ownReason;
  else if (out.state != State::Ok)
    out.reason = "a destination is " + std::string(stateName(out.state));
  // A worse destination outranks the stop, which is still said: it is why
  // nothing new arrives.
  if (own == State::IntakeStopped && out.state != own) out.reason += "; " + ownReason;
  return out;
}

}  // namespace ductus::monitor
