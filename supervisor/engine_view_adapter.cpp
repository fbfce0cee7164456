#include "supervisor/engine_view_adapter.h"

#include "api/metrics.h"
#include "common/config/model.h"
#include "intake/intake.h"
#include "supervisor/delivery/activity.h"
#include "supervisor/engine_actions.h"
#include "supervisor/workers/worker_pool.h"

namespace ductus::supervisor {

EngineViewAdapter::EngineViewAdapter(std::chrono::system_clock::time_point startedAt,
                                     std::function<api::EngineState()> state,
                                     const WorkerPool& workers, std::vector<Viewed> interfaces,
                                     delivery::WaitingCounts waiting,
                                     std::function<void(const std::string&)> wake)
    : startedAt_(startedAt),
      state_(std::move(state)),
      workers_(workers),
      interfaces_(std::move(interfaces)),
      waiting_(std::move(waiting)),
      wake_(std::move(wake)) {}

api::EngineInfo EngineViewAdapter::engine() const {
  api::EngineInfo e;
  e.startedAt = startedAt_;
  e.state = state_();
  for (auto& w : workers_.workers()) {
    api::WorkerInfo i;
    i.group = w.group;
    i.slot = w.slot;
    i.pid = w.pid;
    i.state = w.state;
    i.restarts = static_cast<int64_t>(w.restarts);
    i.callsInFlight = static_cast<int64_t>(w.callsInFlight);
    e.workers.push_back(std::move(i));
  }
  if (engineExtra_) engineExtra_(e);
  return e;
}

void EngineViewAdapter::interfaces(
    std::function<void(Result<std::vector<api::InterfaceInfo>>)> done) {
  std::vector<api::InterfaceInfo> out;
  out.reserve(interfaces_.size());
  for (auto& v : interfaces_) {
    api::InterfaceInfo f;
    f.name = v.config->name;
    f.source = config::sourceKind(v.config->source);
    f.state = workers_.isStopped(f.name) ? "stopped" : "running";
    if (v.intake) f.gateOpen = v.intake->gate().open();
    if (actions_) f.intakeStopped = actions_->intakeStopOf(f.name);
    if (auto* a = v.activity) {
      f.received = a->received.load(std::memory_order_relaxed);
      f.duplicates = a->duplicates.load(std::memory_order_relaxed);
      for (auto& d : a->destinations) {
        api::DestinationInfo di;
        di.name = d.name;
        di.route = d.route;
        di.sent = d.sent.load(std::memory_order_relaxed);
        di.filtered = d.filtered.load(std::memory_order_relaxed);
        di.quarantined = d.quarantined.load(std::memory_order_relaxed);
        di.routed = d.routed.load(std::memory_order_relaxed);
        di.retries = d.retries.load(std::memory_order_relaxed);
        di.latency = api::histogramInfo(d.latency);
        di.send = api::histogramInfo(d.sendTime);
        di.transform = api::histogramInfo(d.transform);
        if (actions_) di.paused = actions_->pauseOf(d.destinationId);
        f.destinations.push_back(std::move(di));
      }
    }
    out.push_back(std::move(f));
  }
  done(std::move(out));
}

void EngineViewAdapter::interfacesWithPending(
    std::function<void(Result<std::vector<api::InterfaceInfo>>)> done) {
  if (!health_) return interfacesWithCounts(std::move(done));
  auto alive = alive_;
  interfacesWithCounts([this, alive, done = std::move(done)](
                           Result<std::vector<api::InterfaceInfo>> r) mutable {
    if (!*alive) return done(Error{"the engine is stopping"});
    if (!r) return done(std::move(r));
    health_(std::move(*r), [done = std::move(done)](std::vector<api::InterfaceInfo> judged) {
      done(std::move(judged));
    });
  });
}

void EngineViewAdapter::hotspots(
    std::function<void(Result<std::vector<api::HotspotInfo>>)> done) {
  if (!hotspots_) return done(std::vector<api::HotspotInfo>{});
  auto alive = alive_;
  interfacesWithCounts([this, alive, done = std::move(done)](
                           Result<std::vector<api::InterfaceInfo>> r) mutable {
    if (!*alive) return done(Error{"the engine is stopping"});
    if (!r) return done(r.error());
    hotspots_(std::move(*r), std::move(done));
  });
}

void EngineViewAdapter::interfacesWithCounts(
    std::function<void(Result<std::vector<api::InterfaceInfo>>)> done) {
  if (!waiting_) return interfaces(std::move(done));
  // The destinations' ids, in the order interfaces() lists them.
  std::vector<std::vector<int64_t>> ids;
  for (auto& v : interfaces_) {
    ids.emplace_back();
    if (v.activity)
      for (auto& d : v.activity->destinations) ids.back().push_back(d.destinationId);
  }
  using Counts = std::optional<std::map<int64_t, int64_t>>;
  auto alive = alive_;
  auto answer = [this, alive, ids = std::move(ids), done = std::move(done)](
                    Counts pending, Counts quarantined) mutable {
    if (!*alive) return done(Error{"the engine is stopping"});
    interfaces([&](Result<std::vector<api::InterfaceInfo>> r) {
      // The store could not count: the rest is still worth answering, so
      // a scrape keeps its counters (the queue gauges go missing instead).
      if (r)
        for (size_t i = 0; i < r->size() && i < ids.size(); ++i) {
          auto& dests = (*r)[i].destinations;
          for (size_t j = 0; j < dests.size() && j < ids[i].size(); ++j) {
            if (!ids[i][j]) continue;
            auto of = [id = ids[i][j]](const Counts& c) -> std::optional<int64_t> {
              if (!c) return std::nullopt;
              auto it = c->find(id);
              return it == c->end() ? 0 : it->second;
            };
            dests[j].pending = of(pending);
            dests[j].quarantinedNow = of(quarantined);
          }
        }
      done(std::move(r));
    });
  };
  waiting_([this, alive, answer = std::move(answer)](Counts pending) mutable {
    if (!*alive || !quarantined_) return answer(std::move(pending), std::nullopt);
    quarantined_([answer = std::move(answer), pending = std::move(pending)](
                     Counts quarantined) mutable {
      answer(std::move(pending), std::move(quarantined));
    });
  });
}

Result<api::MessageKeysView> EngineViewAdapter::readKeys(const std::string& interface,
                                                         std::string_view payload) {
  for (auto& v : interfaces_) {
    if (v.config->name != interface) continue;
    if (!v.intake) break;
    const auto& spec = v.intake->spec();
    auto keys = v.intake->keysOf(payload);
    api::MessageKeysView k;
    k.interfaceId = spec.interfaceId;
    k.tier = static_cast<int16_t>(spec.tier);
    k.destinationIds = spec.destinationIds;
    k.lane = keys.lane;
    k.dedupeKey = std::move(keys.dedupe);
    k.columns = std::move(keys.columns);
    return k;
  }
  return Error{"interface " + interface +
                   " is not run by this engine (not in its project, or it has no queue)",
               ErrorKind::NotRunHere};
}

// ---- actions: the engine's (supervisor/engine_actions.h) --------------------

namespace {
Error noActions() { return Error{"this engine takes no actions", ErrorKind::Unavailable}; }
}  // namespace

Status EngineViewAdapter::setPaused(const std::string& interface, const std::string& destination,
                                    std::optional<api::PauseInfo> pause) {
  if (!actions_) return noActions();
  return actions_->setPaused(interface, destination, std::move(pause));
}

void EngineViewAdapter::restartInterface(const std::string& interface,
                                         std::function<void(Status)> done) {
  if (!actions_) return done(noActions());
  actions_->restartInterface(interface, std::move(done));
}

Status EngineViewAdapter::setIntakeStopped(const std::string& interface,
                                           std::optional<api::IntakeStopInfo> stop) {
  if (!actions_) return noActions();
  if (state_() == api::EngineState::Stopping)
    return Error{"the engine is stopping", ErrorKind::Unavailable};
  return actions_->setIntakeStopped(interface, std::move(stop));
}

const config::InterfaceConfig* EngineViewAdapter::interfaceConfig(
    const std::string& interface) const {
  for (auto& v : interfaces_)
    if (v.config->name == interface) return v.config;
  return nullptr;
}

Status EngineViewAdapter::startDrain(bool stopWhenDrained) {
  if (!actions_) return noActions();
  if (state_() == api::EngineState::Stopping)
    return Error{"the engine is stopping", ErrorKind::Conflict};
  return actions_->startDrain(stopWhenDrained);
}

Status EngineViewAdapter::stopDrain() {
  if (!actions_) return noActions();
  if (state_() == api::EngineState::Stopping)
    return Error{"the engine is stopping", ErrorKind::Conflict};
  return actions_->stopDrain();
}

void EngineViewAdapter::drainStatus(std::function<void(Result<api::DrainInfo>)> done) {
  if (!actions_) return done(noActions());
  actions_->drainStatus(std::move(done));
}

}  // namespace ductus::supervisor
