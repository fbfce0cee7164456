#include "supervisor/engine_view_adapter.h"

#include "api/metrics.h"
#include "common/config/model.h"
#include "intake/intake.h"
#include "intake/payload_check.h"
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

Result<api::PayloadCheckInfo> EngineViewAdapter::checkPayload(const std::string& interface,
                                                              std::string_view payload) {
  for (auto& v : interfaces_) {
    if (v.config->name != interface) continue;
    if (!v.intake) break;
    api::PayloadCheckInfo c;
    c.format = config::formatName(v.config->format);
    c.maxBytes = v.config->maxMessageBytes;
    if (auto p = intake::checkPayload(v.config->format, payload, c.maxBytes))
      c.problems.push_back({p->text, p->line, p->column, p->segment, p->field});
    return c;
  }
  return Error{"interface " + interface +
                   " is not run by this engine (not in its project, or it has no queue)",
               ErrorKind::NotRunHere};
}

namespace {

// A worker's outcome as the dry run's answer says it.
api::TryOutcomeInfo tryOutcomeOf(delivery::Outcome o) {
  api::TryOutcomeInfo t;
  using K = delivery::Outcome::Kind;
  switch (o.kind) {
    case K::Output:
      t.outcome = "sent";
      t.output = std::move(o.data);
      break;
    case K::Filtered:
      t.outcome = "filtered";
      t.reason = std::move(o.data);
      break;
    case K::Quarantine:
      t.outcome = "quarantined";
      t.error = std::move(o.data);
      break;
    case K::RunawayTimeout:
    case K::RunawayHeap:
      t.outcome = "quarantined";
      t.runaway = o.kind == K::RunawayTimeout ? "timeout" : "heap";
      t.error = std::move(o.data);
      break;
    case K::Transient:
    case K::Stopped:
      t.outcome = "error";
      t.error = std::move(o.data);
      break;
  }
  return t;
}

}  // namespace

void EngineViewAdapter::tryPayload(
    const std::string& interface, std::string payload,
    std::function<void(Result<std::vector<api::TryOutcomeInfo>>)> done) {
  const Viewed* found = nullptr;
  for (auto& v : interfaces_)
    if (v.config->name == interface) found = &v;
  if (!found)
    return done(
        Error{"interface " + interface + " is not run by this engine", ErrorKind::NotFound});
  if (!found->intake)
    return done(Error{"interface " + interface +
                          " answers in respond mode: it has no destinations to try (send it "
                          "a request)",
                      ErrorKind::Conflict});
  if (!dryRuns_) return done(Error{"this engine runs no dry runs", ErrorKind::Unavailable});
  if (workers_.isStopped(interface))
    return done(Error{"interface " + interface +
                          "'s code is stopped (runaways, or it does not load): fix it and "
                          "POST /api/v1/interfaces/" +
                          interface + "/restart",
                      ErrorKind::Conflict});
  const auto& dests = found->config->destinations;
  if (found->functions.size() != dests.size())
    return done(
        Error{"interface " + interface + "'s code is not loaded yet", ErrorKind::Unavailable});
  // Every destination's call at once, as a delivery loop sends its read;
  // answered when the last is back, in destination order.
  struct Run {
    std::vector<api::TryOutcomeInfo> outcomes;
    size_t left = 0;
    std::function<void(Result<std::vector<api::TryOutcomeInfo>>)> done;
  };
  auto run = std::make_shared<Run>();
  run->outcomes.resize(dests.size());
  run->left = dests.size();
  run->done = std::move(done);
  if (dests.empty()) return run->done(std::move(run->outcomes));
  auto now = std::chrono::system_clock::now();
  int64_t nowMs =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  for (size_t j = 0; j < dests.size(); ++j) {
    auto started = std::chrono::steady_clock::now();
    std::string name = dests[j].name;
    bool route = std::holds_alternative<config::RouteDestination>(dests[j].target);
    // Message id 0: no stored message (a route's copy has origin 0 too).
    CallMeta meta{0, nowMs, name, 0};
    dryRuns_->dryRun(found->functions[j], payload, std::move(meta),
                     [run, j, name, route, started](delivery::Outcome o) {
                       auto t = tryOutcomeOf(std::move(o));
                       t.destination = name;
                       t.route = route;
                       t.millis = std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now() - started)
                                      .count();
                       run->outcomes[j] = std::move(t);
                       if (--run->left == 0) run->done(std::move(run->outcomes));
                     });
  }
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
