#include "supervisor/monitor/activity_keeper.h"

#include "common/log.h"
#include "schema/activity_store.h"
#include "supervisor/delivery/activity.h"

namespace ductus::supervisor {

namespace {

using TimePoint = ActivityKeeper::TimePoint;

int64_t msOf(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
std::optional<TimePoint> momentOf(int64_t ms) {
  if (ms <= 0) return std::nullopt;
  return TimePoint(std::chrono::milliseconds(ms));
}

}  // namespace

ActivityKeeper::ActivityKeeper(uv_loop_t* loop, store::PgPool& pool,
                               std::vector<Watched> watched, std::chrono::milliseconds every)
    : loop_(loop), pool_(pool), every_(every) {
  auto now = std::chrono::system_clock::now();
  // Each destination holds a week of hourly baselines (kilobytes): grown
  // one by one, 1,001 of them were copied over and over at start-up.
  size_t destinations = 0;
  for (auto& w : watched) destinations += w.destinationIds.size();
  destinations_.reserve(destinations);
  interfaces_.reserve(watched.size());
  for (auto& w : watched) {
    Interface i;
    i.activity = w.activity;
    i.id = w.interfaceId;
    i.watchedSince = now;
    if (w.activity)
      for (size_t j = 0; j < w.activity->destinations.size() && j < w.destinationIds.size();
           ++j) {
        if (!w.destinationIds[j]) continue;
        Destination d;
        d.activity = &w.activity->destinations[j];
        d.id = w.destinationIds[j];
        byDestination_[d.id] = destinations_.size();
        i.destinations.push_back(destinations_.size());
        destinations_.push_back(std::move(d));
      }
    byInterface_[i.id] = interfaces_.size();
    interfaces_.push_back(std::move(i));
  }
}

ActivityKeeper::~ActivityKeeper() { *alive_ = false; }

void ActivityKeeper::start(std::function<void(Status)> done) {
  auto alive = alive_;
  store::loadActivity(pool_, [this, alive, done = std::move(done)](
                                 Result<store::ActivityRows> rows) {
    if (!*alive) return;
    if (rows) loaded(*rows);
    timer_ = makeTimer(loop_, this);
    auto ms = static_cast<uint64_t>(every_.count());
    uv_timer_start(
        timer_.get(),
        [](uv_timer_t* t) {
          if (auto* self = static_cast<ActivityKeeper*>(t->data)) self->tick();
        },
        0, ms);
    done(rows ? Status{} : Status{rows.error()});
  });
}

void ActivityKeeper::loaded(const store::ActivityRows& rows) {
    for (const auto& r : rows.interfaces) {
      auto it = byInterface_.find(r.interfaceId);
      if (it == byInterface_.end()) continue;
      Interface& i = interfaces_[it->second];
      if (r.lastReceived && i.activity) {
        i.activity->lastReceived.mark(msOf(*r.lastReceived));
        i.savedReceived = msOf(*r.lastReceived);
      }
      if (r.watchedSince && *r.watchedSince < i.watchedSince) {
        i.watchedSince = *r.watchedSince;
        i.watchedSaved = true;
      }
    }
    for (const auto& r : rows.destinations) {
      auto it = byDestination_.find(r.destinationId);
      if (it == byDestination_.end()) continue;
      Destination& d = destinations_[it->second];
      if (r.lastSent) {
        d.activity->lastSent.mark(msOf(*r.lastSent));
        // what finished last is at least what was sent last
        d.activity->lastFinished.mark(msOf(*r.lastSent));
        d.savedSent = msOf(*r.lastSent);
      }
      if (r.lastError) {
        d.activity->markError(msOf(*r.lastError), r.lastErrorText);
        d.savedError = msOf(*r.lastError);
      }
      d.inflow = monitor::Baseline::fromValues(r.baselineIn);
      d.sendMs = monitor::Baseline::fromValues(r.baselineSendMs);
    }
}

void ActivityKeeper::tick() {
  sample(std::chrono::system_clock::now());
  if (!saving_) save([](Status) {});
}

void ActivityKeeper::sample(TimePoint now) {
  for (auto& i : interfaces_) {
    int64_t received = i.activity ? i.activity->received.load(std::memory_order_relaxed) : 0;
    for (size_t k : i.destinations) {
      Destination& d = destinations_[k];
      const auto& a = *d.activity;
      auto sends = a.sendTime.snapshot();
      monitor::Sample s;
      s.at = now;
      s.received = received;
      s.finished = a.sent.load(std::memory_order_relaxed) +
                   a.filtered.load(std::memory_order_relaxed) +
                   a.quarantined.load(std::memory_order_relaxed) +
                   a.routed.load(std::memory_order_relaxed);
      s.sends = sends.count;
      s.sendSeconds = static_cast<double>(sends.sumUs) / 1e6;
      d.window.add(s);
      if (auto learned = d.learner.feed(s)) {
        d.inflow.learn(learned->hour, learned->inPerMinute);
        if (learned->sendMs) d.sendMs.learn(learned->hour, *learned->sendMs);
        d.baselineDirty = true;
      }
    }
  }
}

void ActivityKeeper::saveNow(std::function<void(Status)> done) {
  sample(std::chrono::system_clock::now());
  // A save in flight took what was there then: one more after it.
  if (saving_) {
    afterSave_ = std::move(done);
    return;
  }
  save(std::move(done));
}

void ActivityKeeper::save(std::function<void(Status)> done) {
  store::ActivityChanges changes;
  struct Took {
    size_t index;
    int64_t a, b;
  };
  std::vector<Took> interfacesTaken, destinationsTaken;
  for (size_t k = 0; k < interfaces_.size(); ++k) {
    Interface& i = interfaces_[k];
    int64_t received = i.activity ? i.activity->lastReceived.ms() : 0;
    if (received <= i.savedReceived && i.watchedSaved) continue;
    changes.interfaces.push_back({i.id, momentOf(received), i.watchedSince});
    interfacesTaken.push_back({k, received, 0});
  }
  for (size_t k = 0; k < destinations_.size(); ++k) {
    Destination& d = destinations_[k];
    int64_t sent = d.activity->lastSent.ms(), error = d.activity->lastError.ms();
    if (sent <= d.savedSent && error <= d.savedError && !d.baselineDirty) continue;
    store::DestinationActivityRow r;
    r.destinationId = d.id;
    r.lastSent = momentOf(sent);
    r.lastError = momentOf(error);
    if (error > d.savedError) r.lastErrorText = d.activity->lastErrorText();
    if (d.baselineDirty) {
      r.baselineIn = d.inflow.values();
      r.baselineSendMs = d.sendMs.values();
    }
    changes.destinations.push_back(std::move(r));
    destinationsTaken.push_back({k, sent, error});
  }
  if (changes.interfaces.empty() && changes.destinations.empty()) return done({});
  saving_ = true;
  for (auto& t : destinationsTaken) destinations_[t.index].baselineDirty = false;
  auto alive = alive_;
  store::saveActivity(pool_, std::move(changes),
                      [this, alive, interfacesTaken = std::move(interfacesTaken),
                       destinationsTaken = std::move(destinationsTaken),
                       done = std::move(done)](Status s) {
                        if (!*alive) return;
                        saving_ = false;
                        if (!s) {
                          // Tried again at the next tick, baselines too.
                          for (auto& t : destinationsTaken)
                            destinations_[t.index].baselineDirty = true;
                          spdlog::warn("monitor: saving last activity failed: {}",
                                       s.error().message);
                          done(s);
                        } else {
                        ++saves_;
                        for (auto& t : interfacesTaken) {
                          interfaces_[t.index].savedReceived = t.a;
                          interfaces_[t.index].watchedSaved = true;
                        }
                        for (auto& t : destinationsTaken) {
                          destinations_[t.index].savedSent = t.a;
                          destinations_[t.index].savedError = t.b;
                        }
                        done({});
                        }
                        if (auto next = std::exchange(afterSave_, nullptr)) save(std::move(next));
                      });
}

ActivityKeeper::DestinationTrend ActivityKeeper::trendOf(int64_t destinationId,
                                                         TimePoint now) const {
  DestinationTrend t;
  auto it = byDestination_.find(destinationId);
  if (it == byDestination_.end()) return t;
  const Destination& d = destinations_[it->second];
  t.recent = d.window.rates();
  int hour = monitor::hourOfWeek(now);
  t.normalInPerMinute = d.inflow.at(hour);
  t.normalSendMs = d.sendMs.at(hour);
  return t;
}

TimePoint ActivityKeeper::watchedSince(int64_t interfaceId) const {
  auto it = byInterface_.find(interfaceId);
  return it == byInterface_.end() ? std::chrono::system_clock::now()
                                  : interfaces_[it->second].watchedSince;
}

}  // namespace ductus::supervisor
