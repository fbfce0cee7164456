#include "supervisor/engine_actions.h"

#include <signal.h>
#include <unistd.h>

#include <utility>

#include "common/config/model.h"
#include "common/log.h"
#include "intake/intake.h"
#include "schema/destination_pauses.h"
#include "supervisor/delivery/delivery_loop.h"
#include "supervisor/systemd.h"
#include "supervisor/workers/worker_pool.h"

namespace ductus::supervisor {
namespace {

using delivery::Hold;

constexpr uint64_t kPauseRetryMs = 5000;
// How often a drain that ends in a stop looks whether it is drained.
constexpr uint64_t kDrainCheckMs = 500;

api::PauseInfo pauseInfoOf(const store::DestinationPause& p) {
  api::PauseInfo i;
  i.since = p.pausedAt;
  i.by = p.pausedBy;
  for (auto& r : p.reasons) i.reasons.push_back({r.at, r.by, r.reason});
  return i;
}

}  // namespace

EngineActions::EngineActions(Deps deps, std::vector<Interface> interfaces)
    : deps_(std::move(deps)), interfaces_(std::move(interfaces)) {
  if (!deps_.stop) {
    deps_.stop = [] {
      spdlog::info("drained: stopping as on SIGTERM");
      ::kill(::getpid(), SIGTERM);
    };
  }
}

EngineActions::~EngineActions() { *alive_ = false; }

EngineActions::Interface* EngineActions::find(const std::string& name) {
  for (auto& f : interfaces_)
    if (f.config && f.config->name == name) return &f;
  return nullptr;
}

// ---- pauses -----------------------------------------------------------------

void EngineActions::loadPauses() {
  for (auto& f : interfaces_)
    for (auto& d : f.destinations)
      for (auto* l : d.loops) l->hold(Hold::Paused);
  readPauses();
}

void EngineActions::readPauses() {
  if (shutDown_ || !deps_.pool) return;
  auto alive = alive_;
  store::loadPauses(*deps_.pool, [this, alive](Result<std::vector<store::DestinationPause>> r) {
    if (!*alive || shutDown_) return;
    if (!r) {
      // Until they are read every destination waits: delivering to one an
      // operator paused is the mistake a pause is there to prevent.
      spdlog::warn("reading the paused destinations failed: {}; every delivery waits, trying "
                   "again in {} s",
                   r.error().message, kPauseRetryMs / 1000);
      if (!pauseRetry_) pauseRetry_ = makeTimer(deps_.loop, this);
      uv_timer_start(
          pauseRetry_.get(),
          [](uv_timer_t* t) {
            if (auto* self = static_cast<EngineActions*>(t->data)) self->readPauses();
          },
          kPauseRetryMs, 0);
      return;
    }
    std::map<int64_t, api::PauseInfo> read;
    for (auto& p : *r) read[p.destinationId] = pauseInfoOf(p);
    pausesRead_ = true;
    for (auto& f : interfaces_)
      for (auto& d : f.destinations) {
        auto it = read.find(d.id);
        // A pause set through the API while the read ran wins over the read.
        if (it != read.end() && !pauses_.count(d.id)) {
          pauses_[d.id] = it->second;
          spdlog::info("{}/{}: paused since {} by {}; resume it to deliver", f.config->name, d.name,
                       it->second.since, it->second.by);
        }
        if (!pauses_.count(d.id))
          for (auto* l : d.loops) l->release(Hold::Paused);
      }
  });
}

Status EngineActions::setPaused(const std::string& interface, const std::string& destination,
                                std::optional<api::PauseInfo> pause) {
  Interface* f = find(interface);
  Destination* d = nullptr;
  if (f)
    for (auto& x : f->destinations)
      if (x.name == destination) d = &x;
  if (!d)
    return Error{
        "this engine delivers to no destination " + destination + " of interface " + interface,
        ErrorKind::NotFound};
  if (pause) {
    bool was = pauses_.count(d->id) > 0;
    pauses_[d->id] = *pause;
    if (!was) {
      spdlog::info("{}/{}: paused by {}", interface, destination, pause->by);
      for (auto* l : d->loops) l->hold(Hold::Paused);
    }
    return {};
  }
  if (pauses_.erase(d->id) == 0 && pausesRead_) return {};
  spdlog::info("{}/{}: resumed", interface, destination);
  // Until the start's read of the pauses is done, the loops stay held by it.
  if (pausesRead_)
    for (auto* l : d->loops) l->release(Hold::Paused);
  return {};
}

std::optional<api::PauseInfo> EngineActions::pauseOf(int64_t destinationId) const {
  auto it = pauses_.find(destinationId);
  if (it == pauses_.end()) return std::nullopt;
  return it->second;
}

// ---- restart ----------------------------------------------------------------

void EngineActions::restartInterface(const std::string& name, std::function<void(Status)> done) {
  Interface* f = find(name);
  if (!f) return done(Error{"this engine runs no interface " + name, ErrorKind::NotFound});
  if (!deps_.workers->isStopped(name))
    return done(Error{"interface " + name + " is running; only a stopped interface is restarted",
                      ErrorKind::Conflict});
  InterfaceSpec spec = interfaceSpecOf(*deps_.project, *f->config);
  auto alive = alive_;
  readModulesOffLoop(deps_.loop, spec, [this, alive, name, done](Result<ModuleSet> modules) {
    if (!*alive || shutDown_) return done(Error{"the engine is stopping", ErrorKind::Unavailable});
    if (!modules) return done(Error{name + ": " + modules.error().message, ErrorKind::Code});
    auto started = deps_.workers->restartInterface(
        name, std::move(*modules), [this, alive, name, done](Status s) {
          if (!*alive) return done(Error{"the engine is stopping", ErrorKind::Unavailable});
          if (!s) {
            std::string why = placeLoadError(deps_.project->root, s.error().message);
            spdlog::error("interface {}: its code does not load; it stays stopped: {}", name, why);
            return done(Error{why, ErrorKind::Code});
          }
          spdlog::info("interface {}: restarted; delivering what waited", name);
          if (Interface* f = find(name); f && f->wake) f->wake();
          done({});
        });
    if (!started) {
      done(started.error());
    }
  });
}

// ---- intake stops ------------------------------------------------------------

void EngineActions::stopsRead(std::map<std::string, api::IntakeStopInfo> stops) {
  // A stop set through the API meanwhile wins over the read.
  for (auto& [name, stop] : stops) stops_.emplace(name, stop);
}

Status EngineActions::setIntakeStopped(const std::string& interface,
                                       std::optional<api::IntakeStopInfo> stop) {
  Interface* f = find(interface);
  if (!f) return Error{"this engine runs no interface " + interface, ErrorKind::NotFound};
  if (std::holds_alternative<config::InternalSource>(f->config->source))
    return Error{"interface " + interface + " has no intake of its own (source: internal)",
                 ErrorKind::Conflict};
  if (shutDown_) return Error{"the engine is stopping", ErrorKind::Unavailable};
  if (stop) {
    bool was = stops_.count(interface) > 0;
    stops_[interface] = *stop;
    if (was) return {};
    spdlog::info(
        "interface {}: intake stopped by {}{}; what it stored is still delivered "
        "(POST /api/v1/interfaces/{}/start opens it)",
        interface, stop->by, stop->reason ? " (" + *stop->reason + ")" : "", interface);
    if (deps_.closeIntake) deps_.closeIntake(interface);
    if (deps_.events)
      deps_.events->record({events::Kind::IntakeStopped, interface, "", 0,
                            "intake stopped by " + stop->by +
                                (stop->reason ? ": " + *stop->reason : std::string())});
    return {};
  }
  auto was = stops_.find(interface);
  if (was == stops_.end()) return {};
  std::string detail =
      "intake started again (stopped by " + was->second.by + " since " + was->second.since + ")";
  stops_.erase(was);
  spdlog::info("interface {}: intake started again", interface);
  if (deps_.openIntake) deps_.openIntake(interface);
  if (deps_.events) deps_.events->record({events::Kind::IntakeStarted, interface, "", 0, detail});
  return {};
}

std::optional<api::IntakeStopInfo> EngineActions::intakeStopOf(const std::string& interface) const {
  auto it = stops_.find(interface);
  if (it == stops_.end()) return std::nullopt;
  return it->second;
}

// ---- drain ------------------------------------------------------------------

Status EngineActions::startDrain(bool stopWhenDrained) {
  if (shutDown_) return Error{"the engine is stopping", ErrorKind::Conflict};
  stopWhenDrained_ = stopWhenDrained;
  if (!draining_) {
    draining_ = true;
    for (auto& f : interfaces_)
      if (f.intake) f.intake->gate().close();
    spdlog::info("draining: every gate closed and the MLLP listeners closed (MLLP senders are "
                 "refused, HTTP ones answered 503); the queues empty out{}",
                 stopWhenDrained ? ", then the engine stops" : "");
    if (deps_.systemd) {
      deps_.systemd->tell("STATUS=draining: gates closed, delivering what is queued");
      // A drained engine may be stopped for good: systemd should not queue
      // connections for it on the sockets it keeps. Removed before the MLLP
      // listeners close, so systemd's copy does not keep them listening.
      deps_.systemd->unstoreListeners();
    }
    if (deps_.closeListeners) deps_.closeListeners();
  }
  if (stopWhenDrained_) {
    if (!drainCheck_) drainCheck_ = makeTimer(deps_.loop, this);
    uv_timer_start(
        drainCheck_.get(),
        [](uv_timer_t* t) {
          if (auto* self = static_cast<EngineActions*>(t->data)) self->checkDrained();
        },
        0, kDrainCheckMs);
  } else if (drainCheck_) {
    uv_timer_stop(drainCheck_.get());
  }
  return {};
}

Status EngineActions::stopDrain() {
  if (shutDown_) return Error{"the engine is stopping", ErrorKind::Conflict};
  if (!draining_) return Error{"the engine is not draining", ErrorKind::Conflict};
  draining_ = false;
  stopWhenDrained_ = false;
  if (drainCheck_) uv_timer_stop(drainCheck_.get());
  for (auto& f : interfaces_)
    if (f.intake) f.intake->gate().reopen();
  // Stored again as each listens (a new socket): before restoreListeners(),
  // which stores the others.
  if (deps_.reopenListeners) deps_.reopenListeners();
  spdlog::info("drain ended: the gates and the MLLP listeners are open again");
  if (deps_.systemd) {
    deps_.systemd->restoreListeners();
    deps_.systemd->tell("STATUS=serving: the drain ended, the gates are open again");
  }
  return {};
}

void EngineActions::drainStatus(std::function<void(Result<api::DrainInfo>)> done) {
  api::DrainInfo info;
  info.draining = draining_;
  info.stopWhenDrained = stopWhenDrained_;
  for (auto& f : interfaces_)
    if (f.intake) info.storesInFlight += static_cast<int64_t>(f.intake->gate().inFlight());
  // This engine's unpaused destinations of running interfaces: what a pause
  // or the runaway guard holds moves only when an operator says so, and a
  // drain waiting for it would never end.
  std::vector<int64_t> counted;
  for (auto& f : interfaces_) {
    if (deps_.workers->isStopped(f.config->name)) continue;
    for (auto& d : f.destinations)
      if (!pauses_.count(d.id)) counted.push_back(d.id);
  }
  if (!deps_.waiting) return done(Error{"no queue counts here", ErrorKind::Unavailable});
  auto alive = alive_;
  deps_.waiting([alive, info, counted, done](std::optional<std::map<int64_t, int64_t>> counts) {
    if (!*alive) return done(Error{"the engine is stopping", ErrorKind::Unavailable});
    if (!counts)
      return done(
          Error{"the store could not count the pending deliveries", ErrorKind::Unavailable});
    auto out = info;
    for (int64_t id : counted)
      if (auto it = counts->find(id); it != counts->end()) out.pending += it->second;
    out.drained = out.draining && out.storesInFlight == 0 && out.pending == 0;
    done(out);
  });
}

void EngineActions::checkDrained() {
  if (!draining_ || !stopWhenDrained_ || stopRequested_ || shutDown_) return;
  auto alive = alive_;
  drainStatus([this, alive](Result<api::DrainInfo> r) {
    if (!*alive || !r || !r->drained || !stopWhenDrained_ || stopRequested_ || shutDown_) return;
    stopRequested_ = true;
    uv_timer_stop(drainCheck_.get());
    spdlog::info("drained: nothing in flight, nothing pending for this engine's unpaused "
                 "destinations of running interfaces");
    deps_.stop();
  });
}

void EngineActions::shutdown() {
  shutDown_ = true;
  pauseRetry_.reset();
  drainCheck_.reset();
}

}  // namespace ductus::supervisor
