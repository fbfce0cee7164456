#include "supervisor/monitor/health.h"

#include <cstdio>
#include <ctime>

#include "common/config/model.h"
#include "common/log.h"
#include "common/monitor/diagnosis.h"
#include "common/time_text.h"
#include "schema/queue_probes.h"
#include "supervisor/delivery/activity.h"
#include "supervisor/monitor/activity_keeper.h"

namespace ductus::supervisor {

namespace {

using TimePoint = HealthJudge::TimePoint;

std::optional<TimePoint> momentOf(int64_t ms) {
  if (ms <= 0) return std::nullopt;
  return TimePoint(std::chrono::milliseconds(ms));
}

std::string textOf(std::optional<TimePoint> t) { return t ? rfc3339(*t) : std::string(); }

// A stop's `since` as the store writes it ("2026-05-01T12:00:00.123Z",
// schema/interface_stops.cpp); anything else: unknown (the reason then
// says no age).
std::optional<TimePoint> utcMoment(const std::string& text) {
  std::tm tm{};
  int ms = 0;
  char z = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &tm.tm_year, &tm.tm_mon,
                  &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &z) != 8 ||
      z != 'Z')
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  std::time_t s = timegm(&tm);
  if (s == static_cast<std::time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(s) + std::chrono::milliseconds(ms);
}

}  // namespace

HealthJudge::HealthJudge(store::PgPool& pool, const ActivityKeeper& keeper,
                         std::vector<Interface> watched, TimePoint startedAt)
    : pool_(pool), keeper_(keeper), startedAt_(startedAt) {
  for (auto& w : watched) {
    Watched v{std::move(w), std::nullopt};
    const auto& by = v.in.config->monitor.activeBy;
    if (by && by->kind == monitor::ActiveBy::Kind::Cron) {
      // validate checked it; a cron that doesn't parse here judges no deadline
      if (auto c = parseCron(by->cron)) v.activeBy = std::move(*c);
    }
    byName_[v.in.config->name] = watched_.size();
    watched_.push_back(std::move(v));
  }
}

void HealthJudge::annotate(std::vector<api::InterfaceInfo> list,
                           std::function<void(Judged)> done) {
  std::vector<int64_t> backlog;
  for (const auto& i : list) {
    auto it = byName_.find(i.name);
    if (it == byName_.end()) continue;
    const auto& ids = watched_[it->second].in.destinationIds;
    for (size_t j = 0; j < i.destinations.size() && j < ids.size(); ++j)
      if (ids[j] && i.destinations[j].pending.value_or(0) > 0) backlog.push_back(ids[j]);
  }
  if (backlog.empty())
    return done(judge(std::move(list), {}, std::chrono::system_clock::now()));
  store::oldestWaiting(
      pool_, std::move(backlog),
      [this, alive = alive_, list = std::move(list), done = std::move(done)](
          Result<std::map<int64_t, TimePoint>> r) mutable {
        if (!*alive) return;
        if (!r) spdlog::warn("monitor: reading the oldest waiting messages failed: {}",
                             r.error().message);
        done(judge(std::move(list), r ? *r : std::map<int64_t, TimePoint>{},
                   std::chrono::system_clock::now()));
      });
}

HealthJudge::Judged HealthJudge::judge(std::vector<api::InterfaceInfo> list,
                                       const std::map<int64_t, TimePoint>& oldest,
                                       TimePoint now) const {
  Judged out;
  for (auto& i : list) {
    auto it = byName_.find(i.name);
    if (it == byName_.end()) continue;
    const Watched& w = watched_[it->second];
    const config::InterfaceConfig& cfg = *w.in.config;
    monitor::InterfaceFacts facts;
    facts.name = i.name;
    facts.stopped = i.state == "stopped";
    if (i.intakeStopped)
      facts.intakeStopped =
          monitor::IntakeStop{utcMoment(i.intakeStopped->since), i.intakeStopped->by,
                              i.intakeStopped->reason.value_or("")};
    facts.watchedSince = keeper_.watchedSince(w.in.interfaceId);
    facts.expectations = &cfg.monitor;
    facts.activeByCron = w.activeBy ? &*w.activeBy : nullptr;
    if (w.in.activity) {
      facts.lastReceived = momentOf(w.in.activity->lastReceived.ms());
      facts.intakeStarted = momentOf(w.in.activity->intakeStarted.ms());
    }

    for (size_t j = 0; j < i.destinations.size(); ++j) {
      api::DestinationInfo& d = i.destinations[j];
      const config::Destination* dc = nullptr;
      for (const auto& c : cfg.destinations)
        if (c.name == d.name) dc = &c;
      const delivery::DestinationActivity* a = nullptr;
      if (w.in.activity && j < w.in.activity->destinations.size())
        a = &w.in.activity->destinations[j];
      int64_t id = j < w.in.destinationIds.size() ? w.in.destinationIds[j] : 0;

      monitor::DestinationFacts f;
      f.waiting = d.pending.value_or(0);
      f.quarantined = d.quarantinedNow.value_or(0);
      if (auto o = oldest.find(id); f.waiting > 0 && o != oldest.end())
        f.oldest = std::chrono::duration_cast<monitor::Seconds>(now - o->second);
      if (a) {
        f.lastFinished = momentOf(a->lastFinished.ms());
        f.lastError = momentOf(a->lastError.ms());
        f.lastErrorText = a->lastErrorText();
      }
      f.paused = d.paused.has_value();
      auto trend = keeper_.trendOf(id, now);
      f.recent = trend.recent;
      f.normalInPerMinute = trend.normalInPerMinute;
      f.normalSendMs = trend.normalSendMs;
      f.behind = dc && dc->behind ? dc->behind : cfg.monitor.behind;
      f.watchedFrom = startedAt_;
      auto dx = monitor::diagnose(f, now);

      api::DestinationHealthInfo h;
      h.state = std::string(monitor::stateName(dx.state));
      h.reason = dx.reason;
      h.waiting = f.waiting;
      if (f.oldest) h.oldestSeconds = static_cast<double>(f.oldest->count());
      h.quarantined = f.quarantined;
      if (a) {
        h.lastSent = textOf(momentOf(a->lastSent.ms()));
        h.lastError = textOf(f.lastError);
        h.lastErrorText = f.lastErrorText;
      }
      h.catchingUp = dx.catchingUp;
      if (dx.eta) h.etaSeconds = static_cast<double>(dx.eta->count());
      h.causes = dx.causes;
      d.health = std::move(h);
      facts.destinations.push_back(dx.state);
    }

    auto ix = monitor::judgeInterface(facts, now);
    api::InterfaceHealthInfo ih;
    ih.state = std::string(monitor::stateName(ix.state));
    ih.reason = ix.reason;
    ih.lastReceived = textOf(facts.lastReceived);
    ih.watchedSince = rfc3339(facts.watchedSince);
    i.health = std::move(ih);
    // The interface's own state, its destinations left out: they alert
    // as themselves.
    facts.destinations.clear();
    auto own = monitor::judgeInterface(facts, now);
    out.own[i.name] = {own.state, own.reason};
  }
  out.interfaces = std::move(list);
  return out;
}

}  // namespace ductus::supervisor
