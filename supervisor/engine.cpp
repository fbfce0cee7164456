#include "supervisor/engine.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "api/api_server.h"
#include "api/audit/audit_log.h"
#include "api/audit/engine_events.h"
#include "api/auth/auth_routes.h"
#include "api/auth/authenticator.h"
#include "api/auth/credentials.h"
#include "api/auth/directory.h"
#include "api/auth/directory_refresh.h"
#include "api/auth/local_caller.h"
#include "api/auth/oidc.h"
#include "api/auth/password_hasher.h"
#include "api/housekeeping.h"
#include "api/router.h"
#include "api/routes.h"
#include "common/countdown.h"
#include "common/duration_text.h"
#include "common/log.h"
#include "common/net/admission.h"
#include "common/net/curl_easy.h"
#include "common/net/curl_multi_uv.h"
#include "common/net/http_server.h"
#include "common/version.h"
#include "intake/file_source.h"
#include "intake/http_respond.h"
#include "intake/intake.h"
#include "intake/mllp_listener.h"
#include "intake/schedule_source.h"
#include "intake/sftp_folder.h"
#include "intake/source_handlers.h"
#include "schema/migrations.h"
#include "schema/migrator.h"
#include "schema/pg_connection.h"
#include "schema/store.h"
#include "supervisor/certificate_watch.h"
#include "supervisor/control_socket.h"
#include "supervisor/delivery/activity.h"
#include "supervisor/delivery/delivery_loop.h"
#include "supervisor/delivery/sender_factory.h"
#include "supervisor/engine_actions.h"
#include "supervisor/engine_view_adapter.h"
#include "supervisor/monitor/event_recorder.h"
#include "supervisor/monitor/monitor.h"
#include "supervisor/ownership.h"
#include "supervisor/retention_job.h"
#include "supervisor/services/http_fetch.h"
#include "supervisor/services/project_services.h"
#include "supervisor/systemd.h"
#include "supervisor/workers/worker_pool.h"

namespace ductus::supervisor {
namespace fs = std::filesystem;
using config::InterfaceConfig;

struct Engine::Iface {
  const InterfaceConfig* cfg = nullptr;
  int64_t id = 0;
  std::vector<int64_t> destinationIds;  // parallel to cfg->destinations
  std::vector<WorkerPool::FunctionId> functions;
  std::unique_ptr<intake::Intake> intake;
  std::vector<std::unique_ptr<senders::Sender>> senders;  // parallel; null for routes
  // Settles what every loop of the interface finished (before the loops:
  // they hold it, so it goes after them).
  std::unique_ptr<delivery::Settler> settler;
  // loops[destination][slot]
  std::vector<std::vector<std::unique_ptr<delivery::DeliveryLoop>>> loops;
  uint32_t slots = 1;
  bool waiting = false;  // had something pending at start
  store::Tier tier = store::Tier::Week7;  // where its messages go (the applied retention)
  delivery::InterfaceActivity* activity = nullptr;
  // An operator stopped its intake (POST .../stop): its MLLP listener is
  // closed, its HTTP path answers 503, its file or schedule source paused.
  bool intakeStopped = false;
  intake::FileSource* files = nullptr;  // a file or SFTP source, once open
  intake::ScheduleSource* schedule = nullptr;
};

namespace {

store::Tier tierOf(config::Retention r) {
  switch (r) {
    case config::Retention::OneWeek: return store::Tier::Week1;
    case config::Retention::ThreeWeeks: return store::Tier::Week3;
    case config::Retention::SevenWeeks: return store::Tier::Week7;
  }
  return store::Tier::Week7;
}

bool queued(const InterfaceConfig& c) { return !c.respondMode(); }

// ductus.yaml's limits: for every listener; the rest keep their defaults.
net::ConnectionLimits connectionLimits(const config::EngineConfig& e) {
  net::ConnectionLimits l;
  l.maxConnections = e.limits.connectionsPerListener;
  l.connectionsPerAddress = e.limits.connectionsPerAddress;
  l.idleTimeout = e.limits.idleTimeout;
  l.frameDeadline = e.limits.frameDeadline;
  l.unreadAnswers = static_cast<size_t>(e.limits.unreadAnswers);
  return l;
}

// Listens on the socket systemd kept under `name` when there is one (the
// connections that queued while no engine ran are served), else binds;
// then hands it to systemd to keep for the next start.
template <typename Listener>
Status listenOrAdopt(Listener& l, Systemd* systemd, std::string_view kind,
                     const config::HostPort& at, std::map<std::string, int>& sockets) {
  std::string name = Systemd::socketName(kind, at.host, at.port);
  int fd = systemd ? systemd->takeListener(name) : -1;
  if (auto s = fd >= 0 ? l.adopt(fd) : l.listen(at.host, at.port); !s) return s;
  if (systemd) systemd->storeListener(name, l.fd());
  sockets[name] = l.fd();
  return {};
}

}  // namespace

Engine::Engine(uv_loop_t* loop, config::Project project, EngineOptions options)
    : loop_(loop), project_(std::move(project)), options_(std::move(options)) {}

Engine::~Engine() { *alive_ = false; }

void Engine::stepDone(const char* what) {
  auto now = std::chrono::steady_clock::now();
  spdlog::debug("start-up: {} in {:.1f} ms", what,
                std::chrono::duration<double, std::milli>(now - stepStart_).count());
  stepStart_ = now;
}

void Engine::start(std::function<void(Status)> done) {
  startedAt_ = std::chrono::system_clock::now();
  stepStart_ = std::chrono::steady_clock::now();
  auto alive = alive_;
  auto fail = [done](const std::string& step, const Error& e) {
    done(Error{step + ": " + e.message, e.kind, e.sqlstate});
  };
  // Before the database: a start with a broken or expired certificate
  // changes nothing there.
  certificates_ = options_.certificates;
  if (!certificates_) {
    std::vector<tls::CertificateSource> sources;
    for (const auto& [name, s] : project_.resources.certificates) sources.push_back(s);
    auto loaded = tls::Certificates::load(std::move(sources));
    if (!loaded) return fail("loading certificates", loaded.error());
    certificates_ = *loaded;
  }
  // database: { url, ca }: every connection of the engine's verifies the
  // server (sslmode=verify-full) against that CA.
  auto verified = databaseTls_.apply("the database", options_.databaseUrl,
                                     project_.engine.databaseTls,
                                     project_.resources.certificates, certificates_.get());
  if (!verified) return fail("the database's TLS", verified.error());
  options_.databaseUrl = *verified;
  // Each listener's TLS and allow: made now, before the database too: a
  // name or kind that doesn't fit stops the start here. Host names in
  // allow: lists resolve while the database connects.
  if (auto g = buildGuards(); !g) return done(g.error());
  stepDone("certificates and listeners' guards");
  allowNames_->start([this, alive] {
    if (!*alive) return;
    namesResolved_ = true;
    if (afterNames_) std::exchange(afterNames_, nullptr)();
  });
  EventRecorder::Options eo;
  eo.keep = std::chrono::duration_cast<std::chrono::seconds>(project_.engine.eventsKeep);
  eo.maxRows = project_.engine.eventsMaxRows;
  events_ = std::make_unique<EventRecorder>(loop_, eo);
  for (auto& c : project_.interfaces) {
    auto f = std::make_unique<Iface>();
    f->cfg = &c;
    byName_[c.name] = f.get();
    ifaces_.push_back(std::move(f));
  }
  // The workers start and load every interface's code while the database
  // steps below run (neither needs the other); nothing listens before both
  // are done. One after the other they cost their sum: 1,001 interfaces
  // spent 274 ms loading code after 400 ms of database steps.
  auto workersFrom = std::chrono::steady_clock::now();
  startWorkers([this, alive, workersFrom](Status s) {
    if (!*alive) return;
    spdlog::debug(
        "start-up: workers started and every interface's code loaded in {:.1f} ms "
        "(beside the database's steps)",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - workersFrom)
            .count());
    workersLoaded_ = s;
    if (afterWorkers_) std::exchange(afterWorkers_, nullptr)(s);
  });
  ownership_ = std::make_unique<Ownership>(loop_, options_.databaseUrl);
  ownership_->lockAhead();
  migrate([this, alive, done, fail](Status s) {
    if (!*alive) return;
    if (!s) return fail("migrating the database", s.error());
    stepDone("migrations checked");
    store::StoreOptions so;
    so.conninfo = options_.databaseUrl;
    so.poolSize = options_.poolSize;
    store_ = std::make_unique<store::Store>(loop_, so);
    store_->start(std::move(migrationConn_), [this, alive, done, fail](Status s) {
      if (!*alive) return;
      if (!s) return fail("connecting to the database", s.error());
      stepDone("the store's connections");
      // What the workers' start recorded meanwhile is written now.
      events_->start(store_->sharedConnections());
      store_->ensurePartitions({}, [this, alive, done, fail](Result<store::PartitionReport> r) {
        if (!*alive) return;
        if (!r) return fail("creating partitions", r.error());
        for (auto& e : r->errors) spdlog::warn("partitions: {}", e);
        stepDone("partitions");
        registerAll([this, alive, done, fail](Status s) {
          if (!*alive) return;
          if (!s) return fail("registering interfaces", s.error());
          stepDone("interfaces and destinations registered");
          // The retention tiers are read on the retention job's own
          // connection while the claims and reconcile run on theirs: only
          // intake needs them, and one after the other they cost a second
          // connection's set-up on the way to listening.
          // Which intakes an operator stopped is read beside them, for the
          // same reason (only the sources' opening needs it); the wait below
          // waits for both.
          auto tiersAndStops = Countdown::make([this, alive] {
            if (!*alive) return;
            if (afterTiers_) std::exchange(afterTiers_, nullptr)(*tiersApplied_);
          });
          startRetention([this, alive, one = tiersAndStops->add()](Status s) {
            if (!*alive) return;
            tiersApplied_ = s;
            one();
          });
          readStops([this, alive, one = tiersAndStops->add()](Status s) {
            if (!*alive) return;
            stopsRead_ = s;
            one();
          });
          tiersAndStops->start();
          reconcile([this, alive, done, fail](Status s) {
            if (!*alive) return;
            // Owned elsewhere, or lanes that would vanish: said as they are.
            if (!s && (s.error().kind == ErrorKind::OwnedElsewhere ||
                       s.error().kind == ErrorKind::Stranded))
              return done(s);
            if (!s) return fail("reconciling", s.error());
            stepDone("claimed and reconciled");
            whenTiersApplied([this, alive, done, fail](Status s) {
              if (!*alive) return;
              if (!s) return fail("applying retention tiers", s.error());
              if (!*stopsRead_) return fail("reading the stopped intakes", stopsRead_->error());
              stepDone("retention tiers and stopped intakes");
              // Nothing listens until every interface's code has loaded: a
              // message accepted for code that doesn't load would wait for ever.
              whenWorkersLoaded([this, alive, done, fail](Status s) {
                if (!*alive) return;
                // A load error's lines say file:line: what, as validate's do.
                if (!s && s.error().kind == ErrorKind::Code) return done(s);
                if (!s) return fail("starting workers", s.error());
                stepDone("waited for the workers' code");
                // Nothing listens before allow:'s host names have answered.
                whenNamesResolved([this, alive, done, fail] {
                  if (!*alive) return;
                  stepDone("allow: names resolved");
                  if (auto d = buildDelivery(); !d) return fail("starting delivery", d.error());
                  stepDone("delivery built");
                  // A standby opens its sources once it has taken charge:
                  // nothing of its interfaces is accepted while another owns
                  // them (and their ports may be that engine's, here).
                  if (!options_.standby) {
                    applyStops();
                    if (auto o = openSources(); !o) return fail("opening sources", o.error());
                    stepDone("sources opened");
                  }
                  if (auto a = openApi(); !a) return fail("opening the API", a.error());
                  // Sockets kept for listeners the project no longer has (after
                  // the API's: it is stored too).
                  if (options_.systemd)
                    for (auto& name : options_.systemd->dropUntaken())
                      spdlog::info("systemd: the stored socket {} has no listener any more: closed",
                                   name);
                  if (auto c = openControl(); !c)
                    return fail("opening the control socket", c.error());
                  certificateWatch_ = std::make_unique<CertificateWatch>(loop_, certificates_);
                  sweepTimer_ = makeTimer(loop_, this);
                  uv_timer_start(
                      sweepTimer_.get(),
                      [](uv_timer_t* t) {
                        if (auto* self = static_cast<Engine*>(t->data)) self->sweepWaiting();
                      },
                      kSweepEvery.count(), kSweepEvery.count());
                  partitionTimer_ = makeTimer(loop_, this);
                  uv_timer_start(
                      partitionTimer_.get(),
                      [](uv_timer_t* t) {
                        if (auto* self = static_cast<Engine*>(t->data)) self->maintainPartitions();
                      },
                      3600 * 1000, 3600 * 1000);
                  // A standby waits in standBy() for the owner to go.
                  if (options_.standby) return done({});
                  // A takeover waits here, listening, for the old engine to release.
                  if (options_.takeover) {
                    holdForOwnership(true);
                    return done({});
                  }
                  startRunning();
                  stepDone("the API, the control socket, running");
                  done({});
                });
              });
            });
          });
        });
      });
    });
  });
}

void Engine::startRunning() {
  retention_->start();
  monitor_->start([](Status) {});
  watchOwnership();
  api::recordEngineStart(store_->sharedConnections(), *audit_, instance(), [](Status s) {
    if (!s) spdlog::warn("engine.start is not in the audit log: {}", s.error().message);
  });
}

void Engine::standBy(std::function<void(Status)> charged) {
  standbyCharged_ = std::move(charged);
  standbyTimer_ = makeTimer(loop_, this);
  uv_timer_start(
      standbyTimer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<Engine*>(t->data)) self->tryStandbyCharge();
      },
      0, static_cast<uint64_t>(options_.standbyPoll.count()));
}

void Engine::tryStandbyCharge() {
  if (std::exchange(standbyTrying_, true)) return;
  auto alive = alive_;
  ownership_->tryCharge([this, alive](Result<bool> r) {
    if (!*alive || stopping_) return;
    standbyTrying_ = false;
    // Lanes the project would strand: no try will change that (the claims
    // are released already); the standby stops and says why.
    if (!r && r.error().kind == ErrorKind::Stranded) {
      uv_timer_stop(standbyTimer_.get());
      return std::exchange(standbyCharged_, nullptr)(r.error());
    }
    if (!r) {
      // Said once per cause, not once a second; the next try may succeed.
      if (r.error().message != standbyLastError_)
        spdlog::warn("standby: trying to take charge: {}; trying again every {} ms",
                     r.error().message, options_.standbyPoll.count());
      standbyLastError_ = r.error().message;
      return;
    }
    standbyLastError_.clear();
    if (!*r) return;
    uv_timer_stop(standbyTimer_.get());
    spdlog::info("standby: every interface is this engine's now; reconciling, then listening");
    actions_->loadPauses();
    reconcile([this, alive](Status s) {
      if (!*alive || stopping_) return;
      auto charged = std::exchange(standbyCharged_, nullptr);
      if (!s)
        return charged(
            Error{"reconciling: " + s.error().message, s.error().kind, s.error().sqlstate});
      for (auto& f : ifaces_)
        if (f->waiting)
          for (auto& perDest : f->loops)
            for (auto& l : perDest) l->wake();
      holdForOwnership(false);
      // The stops as the engine that owned the interfaces left them, not as
      // they were when this standby started.
      readStops([this, alive, charged](Status s) {
        if (!*alive || stopping_) return;
        if (!s)
          return charged(Error{"reading the stopped intakes: " + s.error().message, s.error().kind,
                               s.error().sqlstate});
        applyStops();
        if (auto o = openSources(); !o)
          return charged(Error{"opening sources: " + o.error().message, o.error().kind});
        startRunning();
        charged({});
      });
    });
  });
}

void Engine::takeCharge(std::function<void(Status)> done) {
  auto alive = alive_;
  // The pauses are read while the claims are made: both before any read.
  actions_->loadPauses();
  ownership_->takeCharge([this, alive, done](Status s) {
    if (!*alive) return;
    if (!s) return done(s);
    reconcile([this, alive, done](Status s) {
      if (!*alive) return;
      if (!s)
        return done(Error{"reconciling: " + s.error().message, s.error().kind, s.error().sqlstate});
      for (auto& f : ifaces_)
        if (f->waiting)
          for (auto& perDest : f->loops)
            for (auto& l : perDest) l->wake();
      holdForOwnership(false);
      if (control_) control_->keepFile(false);
      startRunning();
      done({});
    });
  });
}

void Engine::migrate(std::function<void(Status)> next) {
  auto migrations = store::embeddedMigrations();
  if (!migrations) return next(migrations.error());
  // The connection goes on to be the store's first (Engine::start).
  migrationConn_ = std::make_unique<store::PgConnection>(loop_);
  auto migrator = std::make_shared<store::Migrator>(*migrationConn_, std::move(*migrations));
  migrationConn_->connect(options_.databaseUrl, [](Status) {});
  migrator->migrate([migrator, next](Result<store::MigrateReport> r) {
    if (!r) return next(r.error());
    for (auto& a : r->applied) spdlog::info("migration applied: {}", a);
    for (auto& u : r->unknown)
      spdlog::warn("the database has migration {} which this binary does not know (a newer "
                   "version ran); carrying on",
                   u);
    next({});
  });
}

// Every queued interface and its destinations: two statements, whatever
// their number.
void Engine::registerAll(std::function<void(Status)> next) {
  std::vector<std::string> names;
  for (auto& f : ifaces_)
    if (queued(*f->cfg)) names.push_back(f->cfg->name);
  if (names.empty()) return next({});
  auto alive = alive_;
  store_->registerInterfaces(std::move(names), [this, alive, next](auto r) {
    if (!*alive) return;
    if (!r) return next(r.error());
    std::vector<store::Store::DestinationKey> keys;
    for (auto& f : ifaces_) {
      if (!queued(*f->cfg)) continue;
      f->id = r->at(f->cfg->name);
      for (auto& d : f->cfg->destinations) keys.push_back({f->id, d.name});
    }
    store_->registerDestinations(std::move(keys), [this, alive, next](auto r) {
      if (!*alive) return;
      if (!r) return next(r.error());
      for (auto& f : ifaces_) {
        if (!queued(*f->cfg)) continue;
        for (auto& d : f->cfg->destinations) f->destinationIds.push_back(r->at({f->id, d.name}));
      }
      next({});
    });
  });
}

void Engine::startRetention(std::function<void(Status)> next) {
  std::vector<RetentionInterface> list;
  for (auto& f : ifaces_)
    if (queued(*f->cfg))
      list.push_back({f->id, f->cfg->name, tierOf(f->cfg->retention), f->cfg->dedupeWindow,
                      f->cfg->quarantined == config::QuarantinedRetention::Purge});
  retention_ = std::make_unique<RetentionJob>(loop_, options_.databaseUrl, std::move(list));
  retention_->setOnApplied([this](int64_t id, store::Tier tier) {
    for (auto& f : ifaces_)
      if (f->id == id && f->intake) switchTier(*f, tier, "as the database says");
  });
  auto alive = alive_;
  retention_->applyTiers([this, alive, next](Result<std::map<int64_t, store::Tier>> r) {
    if (!*alive) return;
    if (!r)
      return next(Error{"retention: " + r.error().message, r.error().kind, r.error().sqlstate});
    for (auto& f : ifaces_)
      if (auto it = r->find(f->id); it != r->end()) f->tier = it->second;
    next({});
  });
}

// Where the interface's new messages go from now on; retention's next run
// brings those stored before.
void Engine::switchTier(Iface& f, store::Tier tier, const char* why) {
  f.tier = tier;
  f.intake->setTier(tier);
  spdlog::info(
      "retention of {} is now {} ({}): its new messages are kept {} days; retention's "
      "next run brings those stored before to it",
      f.cfg->name, store::tierName(tier), why, static_cast<int>(tier));
}

Status Engine::retentionConfirmed(const std::string& interface, const std::string& tier) {
  auto t = store::tierNamed(tier);
  if (!t) return Error{"no retention tier " + tier, ErrorKind::Invalid};
  for (auto& f : ifaces_) {
    if (f->cfg->name != interface || !f->intake) continue;
    if (retention_) retention_->confirmed(f->id, *t);
    switchTier(*f, *t, "confirmed");
    return {};
  }
  return Error{"this engine runs no queued interface " + interface, ErrorKind::NotFound};
}

void Engine::reconcile(std::function<void(Status)> next) {
  // Nothing reads or changes an interface's queue before it is claimed.
  if (!std::exchange(claimsAsked_, true))
    return claimInterfaces([this, alive = alive_, next](Status s) {
      if (!*alive) return;
      if (!s) return next(s);
      // reconciled in takeCharge(), or once a standby has taken charge
      if (options_.takeover || options_.standby) return next({});
      reconcile(next);
    });
  auto alive = alive_;
  store_->withWaiting([this, alive, next](Result<std::vector<store::WaitingInterface>> r) {
    if (!*alive) return;
    if (!r) return next(r.error());
    std::set<int64_t> waiting;
    for (auto& w : *r) waiting.insert(w.id);
    auto failed = std::make_shared<std::optional<Error>>();
    auto all = Countdown::make([failed, next] { next(*failed ? Status(**failed) : Status()); });
    for (auto& fp : ifaces_) {
      Iface* f = fp.get();
      if (!f->id || !waiting.count(f->id)) continue;
      f->waiting = true;
      auto one = all->add();
      // Messages whose every delivery was done before the last stop, but
      // whose settle the stop left for this start, are settled first: a
      // destination added since must not get them (it would, as pending).
      store_->settleFinished(f->id, [this, alive, f, failed, one](Result<int64_t> s) {
        if (!*alive) return;
        if (!s) {
          *failed = s.error();
          return one();
        }
        store_->reconcile(
            f->id, f->destinationIds,
            [this, alive, f, failed, one](Result<store::ReconcileReport> r) {
              if (!*alive) return;
              if (!r)
                *failed = r.error();
              else if (r->deliveriesAdded || r->deliveriesFiltered || r->deliveriesFinished)
                spdlog::info(
                    "{}: reconciled: {} deliveries added, {} to removed "
                    "destinations filtered, {} finished",
                    f->cfg->name, r->deliveriesAdded, r->deliveriesFiltered, r->deliveriesFinished);
              // Those whose last pending deliveries went to removed destinations.
              store_->settleFinished(f->id, [failed, one](Result<int64_t> s) {
                if (!s && !*failed) *failed = s.error();
                one();
              });
            });
      });
    }
    all->start();
  });
}

void Engine::startWorkers(std::function<void(Status)> next) {
  ProjectServices::Options so;
  so.certificates = certificates_;
  services_ = std::make_unique<ProjectServices>(loop_, project_, so);
  WorkerPool::Options wo;
  wo.binary = options_.binary;
  wo.heapMb = project_.engine.heapMb;
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  wo.sharedWorkers = static_cast<int>(project_.engine.isolateWorkers ? project_.engine.isolateWorkers
                                                                     : cores);
  wo.events = events_.get();
  workers_ = std::make_unique<WorkerPool>(loop_, wo, *services_);
  workers_->onInterfaceStopped([sink = events_.get()](const std::string& name,
                                                      const std::string& why) {
    spdlog::error("interface {} stopped: {}; its messages stay pending until the code is fixed "
                  "and the interface restarted (POST /api/v1/interfaces/{}/restart)",
                  name, why, name);
    sink->record({events::Kind::InterfaceStopped, name, "", 0,
                  "its code is stopped: " + why + " (POST /api/v1/interfaces/" + name +
                      "/restart runs it again)"});
  });
  // Every interface's verdict, then one answer: all the load errors, one a
  // line (code "code"), or ok; a module that could not be read comes first.
  auto errors = std::make_shared<std::vector<std::string>>();
  auto unread = std::make_shared<std::optional<Error>>();
  auto alive = alive_;
  auto all = Countdown::make([alive, errors, unread, next] {
    if (!*alive) return;
    if (*unread) return next(**unread);
    if (errors->empty()) return next({});
    std::string text;
    for (auto& e : *errors) text += (text.empty() ? "" : "\n") + e;
    next(Error{text, ErrorKind::Code});
  });
  // The files are read on libuv's pool (1,001 interfaces' folders and lib/
  // read on the loop held the database's steps back ~100 ms); each is
  // handed to the workers as it arrives.
  for (auto& f : ifaces_) {
    Iface* fp = f.get();
    InterfaceSpec spec = interfaceSpecOf(project_, *fp->cfg);
    readModulesOffLoop(
        loop_, spec,
        [this, alive, fp, spec, errors, unread, one = all->add()](Result<ModuleSet> modules) {
          if (!*alive) return;
          const std::string& name = fp->cfg->name;
          if (!modules) {
            if (!*unread) *unread = Error{name + ": " + modules.error().message};
            return one();
          }
          auto ids = workers_->addInterface(
              spec, std::move(*modules), [root = project_.root, errors, one](Status s) {
                if (!s) errors->push_back(placeLoadError(root, s.error().message));
                one();
              });
          if (!ids) {
            if (!*unread) *unread = Error{name + ": " + ids.error().message};
            return one();
          }
          fp->functions = std::move(*ids);
        });
  }
  all->start();
}

Status Engine::buildDelivery() {
  curl_ = std::make_unique<net::CurlMulti>(loop_);
  activity_ = std::make_unique<delivery::ActivityCounters>();
  // Intakes first: a route's loop holds its target's intake.
  for (auto& f : ifaces_) {
    const InterfaceConfig& c = *f->cfg;
    if (!queued(c)) continue;
    intake::IntakeSpec is;
    is.name = c.name;
    is.interfaceId = f->id;
    is.tier = f->tier;
    is.destinationIds = f->destinationIds;
    is.relaxed = c.durability == config::Durability::Relaxed;
    is.keys.format = c.format;
    is.keys.charset = c.charset;
    if (c.ordering) {
      is.keys.orderingKey = c.ordering->key;
      is.keys.partitions = c.ordering->partitions;
    }
    is.keys.dedupeKey = c.dedupeKey;
    f->activity = &activity_->addInterface(c.name);
    is.onStored = [a = f->activity](int64_t stored, int64_t duplicates) {
      delivery::count(a->received, stored);
      delivery::count(a->duplicates, duplicates);
      if (stored > 0) a->lastReceived.markNow();
    };
    Iface* fp = f.get();
    f->intake = std::make_unique<intake::Intake>(*store_, std::move(is),
                                                 [this, fp](int32_t lane) { wake(*fp, lane); });
  }
  delivery::SenderContext ctx{loop_, curl_.get(), &project_.resources, project_.root, certificates_};
  for (auto& f : ifaces_) {
    const InterfaceConfig& c = *f->cfg;
    if (!queued(c)) continue;
    uint32_t lanes = c.partitionCount();
    f->slots = c.isolation == config::Isolation::Dedicated ? std::max(1u, c.workers) : 1;
    f->slots = std::min(f->slots, lanes);
    f->settler = std::make_unique<delivery::Settler>(loop_, *store_, c.name);
    for (size_t j = 0; j < c.destinations.size(); ++j) {
      const config::Destination& d = c.destinations[j];
      delivery::DeliveryTarget t;
      t.interfaceName = c.name;
      t.destinationName = d.name;
      t.destinationId = f->destinationIds[j];
      t.function = f->functions[j];
      t.maxAttempts = d.maxAttempts;
      t.saveOutput = d.saveOutput;
      t.rateLimit = delivery::rateLimitOf(d);
      t.events = events_.get();
      std::unique_ptr<senders::Sender> sender;
      if (auto* r = std::get_if<config::RouteDestination>(&d.target)) {
        auto tgt = byName_.find(r->interface);
        if (tgt == byName_.end() || !tgt->second->intake)
          return Error{c.name + "/" + d.name + ": route target " + r->interface + " is not queued"};
        t.route = tgt->second->intake.get();
      } else {
        auto made = delivery::makeSender(ctx, c.name, d);
        if (!made) return made.error();
        sender = std::move(*made);
      }
      t.sender = sender.get();
      t.onlyDestination = c.destinations.size() == 1 && !t.route;
      t.settler = f->settler.get();
      t.activity = &f->activity->addDestination(d.name, t.route != nullptr, t.destinationId);
      f->senders.push_back(std::move(sender));
      std::vector<std::unique_ptr<delivery::DeliveryLoop>> loops;
      for (uint32_t s = 0; s < f->slots; ++s) {
        std::vector<int32_t> mine;  // empty: every lane
        if (f->slots > 1)
          for (uint32_t l = s; l < lanes; l += f->slots) mine.push_back(static_cast<int32_t>(l));
        // No safety-net read of each loop's own: sweepWaiting() does it for
        // every loop in one statement.
        delivery::DeliveryTiming timing;
        timing.safetyNet = std::chrono::milliseconds(0);
        loops.push_back(
            std::make_unique<delivery::DeliveryLoop>(loop_, *store_, *workers_, t, mine, timing));
        if (!f->waiting) loops.back()->startEmpty();
      }
      f->loops.push_back(std::move(loops));
    }
  }
  // Every loop is held until the paused destinations are read; their wakes
  // below are kept for the release.
  std::vector<EngineActions::Interface> acted;
  for (auto& f : ifaces_) {
    EngineActions::Interface a{f->cfg, f->intake.get(), {}, {}};
    for (size_t j = 0; j < f->loops.size(); ++j) {
      EngineActions::Destination d{f->cfg->destinations[j].name, f->destinationIds[j], {}};
      for (auto& l : f->loops[j]) d.loops.push_back(l.get());
      a.destinations.push_back(std::move(d));
    }
    Iface* fp = f.get();
    a.wake = [this, fp] {  // lanes 0..slots-1 reach every loop
      for (uint32_t lane = 0; lane < fp->slots; ++lane) wake(*fp, static_cast<int32_t>(lane));
    };
    acted.push_back(std::move(a));
  }
  actions_ = std::make_unique<EngineActions>(
      EngineActions::Deps{loop_,
                          &project_,
                          workers_.get(),
                          &store_->sharedConnections(),
                          options_.systemd,
                          [this](auto answer) {
                            store_->waitingCounts(
                                [answer](Result<std::map<int64_t, int64_t>> r) {
                                  answer(r ? std::optional(std::move(*r)) : std::nullopt);
                                });
                          },
                          {},
                          [this] { closeMllpForDrain(); },
                          [this] { reopenMllp(); },
                          [this](const std::string& name) {
                            if (auto it = byName_.find(name); it != byName_.end())
                              closeIntake(*it->second);
                          },
                          [this](const std::string& name) {
                            if (auto it = byName_.find(name); it != byName_.end())
                              openIntake(*it->second);
                          },
                          events_.get()},
      std::move(acted));
  // A takeover's loops wait for takeCharge(), a standby's until it has
  // taken charge; the pauses are read then.
  if (options_.takeover || options_.standby)
    holdForOwnership(true);
  else
    actions_->loadPauses();
  // Only interfaces with something waiting read their queue at start; the
  // others wait for intake to wake them.
  for (auto& f : ifaces_)
    if (f->waiting)
      for (auto& perDest : f->loops)
        for (auto& l : perDest) l->wake();
  activityReporter_ = std::make_unique<delivery::ActivityReporter>(
      loop_, *activity_, std::chrono::minutes(1), [this](auto answer) {
        store_->waitingCounts([answer](Result<std::map<int64_t, int64_t>> r) {
          if (!r) spdlog::warn("counting the waiting deliveries failed: {}", r.error().message);
          answer(r ? std::optional(std::move(*r)) : std::nullopt);
        });
      });
  std::vector<HealthJudge::Interface> watched;
  for (auto& f : ifaces_)
    watched.push_back({f->cfg, f->id, f->activity, f->destinationIds, f->slots,
                       f->cfg->partitionCount()});
  Monitor::Deps md;
  md.loop = loop_;
  md.pool = &store_->sharedConnections();
  md.project = &project_;
  md.curl = curl_.get();
  md.tls = certificates_;
  md.counts = [this](auto done) {
    if (!view_) return done(Error{"the engine's view is not open yet", ErrorKind::Unavailable});
    view_->interfacesWithCounts(std::move(done));
  };
  md.certificates = [this] {
    std::vector<api::CertificateInfo> out;
    if (certificates_)
      for (const auto& c : certificates_->entries()) out.push_back({c->name, c->subject, c->notAfter});
    return out;
  };
  md.startedAt = startedAt_;
  md.host = instance().host;
  md.events = events_.get();
  monitor_ = std::make_unique<Monitor>(std::move(md), std::move(watched));
  return {};
}

// The safety net under intake's wakes: every interface with something
// waiting has all its loops woken (a busy or held loop only notes it; a
// backing-off one keeps its wait). One loose index scan for the engine
// (kWithWaiting), where each loop reading its own queue every 30 s cost
// 1,001 reads a round.
void Engine::sweepWaiting() {
  if (stopping() || !store_) return;
  auto alive = alive_;
  store_->withWaiting([this, alive](Result<std::vector<store::WaitingInterface>> r) {
    if (!*alive || stopping()) return;
    if (!r) return spdlog::warn("looking for waiting deliveries failed: {}", r.error().message);
    std::map<int64_t, bool> waiting;  // interface id: a delivery of its is pending
    for (auto& w : *r) waiting[w.id] = w.deliveriesPending;
    for (auto& f : ifaces_) {
      auto it = f->id ? waiting.find(f->id) : waiting.end();
      if (it == waiting.end()) continue;
      if (it->second) {
        for (auto& perDest : f->loops)
          for (auto& l : perDest) l->wake();
      } else if (!sourcesHeld_) {  // never another engine's messages (standby, takeover)
        settleLeftPending(*f);
      }
    }
  });
}

// Pending messages with no pending delivery, seen by the sweep: every loop
// settles what its flushes finish, and the start settles what a stop left,
// but a statement that commits after the start and is no loop's of this
// engine (a killed engine's, its backend still waiting on a lock when this
// one started: the server ends it within client_connection_check_interval
// of the death it notices, and a lock released within that second lets it
// commit) finishes deliveries nobody settles. Harmless beside a loop's own
// settle: a settle writes only what changes, locking in id order.
void Engine::settleLeftPending(Iface& f) {
  auto alive = alive_;
  std::string name = f.cfg->name;
  store_->settleFinished(f.id, [alive, name](Result<int64_t> n) {
    if (!*alive) return;
    if (!n)
      return logWith(spdlog::level::warn, LogFields{.interface = name},
                     "{}: settling messages whose deliveries are all done failed: {}; the next "
                     "sweep tries again",
                     name, n.error().message);
    if (*n > 0)
      logWith(spdlog::level::info, LogFields{.interface = name},
              "{}: {} message(s) left pending with every delivery done are settled (a "
              "statement that committed after this engine's start, such as a killed "
              "engine's)",
              name, *n);
  });
}

void Engine::wake(Iface& f, int32_t lane) {
  uint32_t slot = f.slots > 1 ? static_cast<uint32_t>(lane) % f.slots : 0;
  for (auto& perDest : f.loops)
    if (slot < perDest.size()) perDest[slot]->wake();
}

Status Engine::buildGuards() {
  allowNames_ = net::AllowNames::make(loop_);
  auto add = [this](const std::string& name, const std::optional<tls::ListenerTls>& tls,
                    const tls::AllowList& allow) -> Status {
    if (guards_.count(name)) return {};  // an HTTP port's second interface: the checks compare
    net::ListenerGuard g;
    if (tls) {
      auto server = certificates_->server(*tls);
      if (!server) return Error{name + ": " + server.error().message, server.error().kind};
      g.tls = *server;
    }
    if (!allow.empty()) {
      auto admission = net::Admission::make(allow, allowNames_);
      if (!admission) return Error{name + ": " + admission.error().message, ErrorKind::Config};
      g.admits = [a = *admission](const sockaddr_storage& peer) { return a->admits(peer); };
      spdlog::info("{}: {}", name, (*admission)->describe());
    }
    guards_[name] = std::move(g);
    return {};
  };
  for (const auto& c : project_.interfaces) {
    if (auto* m = std::get_if<config::MllpSource>(&c.source)) {
      if (auto s = add(c.name, m->tls, m->allow); !s) return s;
    } else if (auto* h = std::get_if<config::HttpSource>(&c.source)) {
      if (auto s = add(h->listen.toString(), h->tls, h->allow); !s) return s;
    }
  }
  if (project_.engine.apiEnabled)
    if (auto s = add("api", project_.engine.apiTls, project_.engine.apiAllow); !s) return s;
  return {};
}

void Engine::whenWorkersLoaded(std::function<void(Status)> next) {
  if (workersLoaded_) return next(*workersLoaded_);
  afterWorkers_ = std::move(next);
}

void Engine::whenTiersApplied(std::function<void(Status)> next) {
  if (tiersApplied_ && stopsRead_) return next(*tiersApplied_);
  afterTiers_ = std::move(next);
}

void Engine::whenNamesResolved(std::function<void()> next) {
  if (namesResolved_) return next();
  afterNames_ = std::move(next);
}

Status Engine::openSources() {
  for (auto& f : ifaces_)
    if (auto s = openSource(*f); !s) return s;
  return {};
}

Status Engine::openSource(Iface& f) {
  const InterfaceConfig& c = *f.cfg;
  if (auto* m = std::get_if<config::MllpSource>(&c.source)) {
    if (f.intakeStopped) {
      // Its place is kept, empty: a start listens on the same address. A
      // socket systemd kept for it is closed with the untaken ones, so a
      // sender is refused, as it was before the restart.
      mllp_.push_back(nullptr);
      mllpAt_.emplace_back(&f, m->listen);
      return {};
    }
    auto l = makeMllp(f);
    if (auto s = listenOrAdopt(*l, options_.systemd, "mllp", m->listen, socketFds_); !s)
      return Error{c.name + ": mllp " + m->listen.toString() + ": " + s.error().message};
    listenerLines_.push_back("mllp " + c.name + " " + l->address());
    mllp_.push_back(std::move(l));
    mllpAt_.emplace_back(&f, m->listen);
    return {};
  }
  if (auto* h = std::get_if<config::HttpSource>(&c.source)) {
    std::string key = h->listen.toString();
    auto& server = http_[key];
    if (!server) {
      net::HttpSettings hs;
      hs.name = key;
      hs.limits = connectionLimits(project_.engine);
      // Interfaces on one port share its tls: and allow: (validate checks
      // they say the same).
      hs.guard = guards_.at(key);
      server = std::make_unique<net::HttpServer>(loop_, hs);
      if (auto s = listenOrAdopt(*server, options_.systemd, "http", h->listen, socketFds_); !s)
        return Error{c.name + ": http " + key + ": " + s.error().message};
    }
    net::HttpServer::Handler handler;
    Iface* fp = &f;
    if (h->mode == config::HttpMode::Queue) {
      handler = intake::httpQueueIntoIntake(*f.intake, c.format);
    } else {
      WorkerPool* pool = workers_.get();
      WorkerPool::FunctionId fn = fp->functions.at(0);
      handler = [pool, fn](const net::HttpRequest& req, net::HttpRespond respond) {
        pool->invoke(fn, intake::respondRequestJson(req), CallMeta{}, [respond](Outcome o) {
          if (o.kind != Outcome::Kind::Output)
            return respond(intake::respondWithoutOutput(outcomeKindName(o.kind)));
          respond(intake::respondResponseOf(o.data));
        });
      };
    }
    // A stopped intake answers 503 from its next request on; a request
    // already past this check is stored and answered 202 as ever, so a stop
    // loses nothing: every sender has its answer, and a 503 is sent again.
    // The port stays open: other interfaces may serve on it.
    handler = [fp, inner = std::move(handler)](const net::HttpRequest& req,
                                               net::HttpRespond respond) {
      if (fp->intakeStopped)
        return respond({503,
                        {{"Retry-After", "60"}, {"Content-Type", "text/plain"}},
                        "interface " + fp->cfg->name +
                            ": intake stopped by an operator; send it again later\n"});
      inner(req, std::move(respond));
    };
    if (auto s = server->addRoute(h->path, std::move(handler), c.maxMessageBytes); !s)
      return Error{c.name + ": " + s.error().message};
    listenerLines_.push_back("http " + c.name + " " + server->address() + h->path +
                             (f.intakeStopped ? " (intake stopped)" : ""));
    return {};
  }
  if (auto* sc = std::get_if<config::ScheduleSource>(&c.source)) {
    auto src = intake::ScheduleSource::make(loop_, *f.intake, *sc);
    if (!src) return Error{c.name + ": " + src.error().message};
    f.schedule = src->get();
    // Paused before its first run: the first tick comes from the loop, after this.
    if (f.intakeStopped || sourcesHeld_) f.schedule->pause();
    listenerLines_.push_back("schedule " + c.name + " " + c.sourceDescribe +
                             (f.intakeStopped ? " (intake stopped)" : ""));
    schedules_.push_back(std::move(*src));
    return {};
  }
  if (auto* fsrc = std::get_if<config::FileSource>(&c.source)) {
    files_.push_back(std::make_unique<intake::FileSource>(loop_, *f.intake, fsrc->files, c.format,
                                                          project_.root, c.maxMessageBytes));
    f.files = files_.back().get();
    if (f.intakeStopped || sourcesHeld_) f.files->pause();  // its first poll comes from the loop
    listenerLines_.push_back("file " + c.name + " " + c.sourceDescribe +
                             (f.intakeStopped ? " (intake stopped)" : ""));
    return {};
  }
  if (auto* ss = std::get_if<config::SftpSource>(&c.source)) {
    // The file source's one code path over a folder on the server: pause
    // and resume with ownership and the gate as a local folder's.
    auto folder = std::make_unique<intake::SftpFolder>(loop_, ss->server, ss->files.path,
                                                       ss->files.moveTo, c.name + " source");
    files_.push_back(std::make_unique<intake::FileSource>(loop_, *f.intake, std::move(folder),
                                                          ss->files, c.format, c.maxMessageBytes));
    f.files = files_.back().get();
    if (f.intakeStopped || sourcesHeld_) f.files->pause();
    listenerLines_.push_back("sftp " + c.name + " " + c.sourceDescribe +
                             (f.intakeStopped ? " (intake stopped)" : ""));
    return {};
  }
  if (std::holds_alternative<config::InternalSource>(c.source)) return {};  // filled by routes
  return Error{c.name + ": " + config::sourceKind(c.source) +
               " sources are not supported by this engine yet"};
}

std::unique_ptr<intake::MllpListener> Engine::makeMllp(Iface& f) const {
  intake::MllpSettings ms;
  ms.maxMessageBytes = f.cfg->maxMessageBytes;
  ms.name = f.cfg->name;
  ms.limits = connectionLimits(project_.engine);
  if (auto g = guards_.find(f.cfg->name); g != guards_.end()) ms.guard = g->second;
  ms.onRefused = [sink = events_.get(), name = f.cfg->name](
                     const std::string& peer, const std::string& why, uint64_t unsaid) {
    sink->record({events::Kind::ArRefused, name, "", 0,
                  "from " + peer + ": " + why + "; answered AR" +
                      (unsaid ? " (" + std::to_string(unsaid) +
                                    " more refused on that connection since the last)"
                              : "")});
  };
  return std::make_unique<intake::MllpListener>(loop_, ms, intake::mllpIntoIntake(*f.intake));
}

void Engine::closeMllpForDrain() {
  if (mllpRetry_) uv_timer_stop(mllpRetry_.get());
  for (size_t i = 0; i < mllp_.size(); ++i)
    if (mllp_[i]) closeMllp(i, "for the drain");
}

void Engine::closeMllp(size_t i, const char* why) {
  const auto& at = mllpAt_[i].second;
  std::string name = Systemd::socketName("mllp", at.host, at.port);
  // The descriptor is closed below: no handover passes it, nothing stores it.
  socketFds_.erase(name);
  if (options_.systemd) options_.systemd->forgetListener(name);
  intake::MllpListener* closing = mllp_[i].get();
  mllpClosing_.push_back(std::move(mllp_[i]));
  spdlog::info("{}: MLLP listener on {} closed {}; what is in flight is answered",
               mllpAt_[i].first->cfg->name, at.toString(), why);
  // Its listening socket closes now (the kernel refuses new connections:
  // systemd's copy was removed from the store); the rest once answered.
  // Its onClosed may destroy it (nothing of it runs after the call).
  closing->close([this, alive = alive_, closing] {
    if (!*alive) return;
    std::erase_if(mllpClosing_, [closing](auto& l) { return l.get() == closing; });
  });
}

// ---- an operator's stop of an interface's intake ------------------------------

void Engine::readStops(std::function<void(Status)> next) {
  auto alive = alive_;
  store::loadInterfaceStops(store_->sharedConnections(),
                            [this, alive, next](Result<std::vector<store::InterfaceStop>> r) {
                              if (!*alive) return;
                              if (!r) return next(r.error());
                              stops_ = std::move(*r);
                              next({});
                            });
}

void Engine::applyStops() {
  std::map<std::string, api::IntakeStopInfo> shown;
  for (auto& s : std::exchange(stops_, {})) {
    auto it = byName_.find(s.interfaceName);
    // Another engine's interface, or one the project no longer has: its
    // row waits for the engine that runs it.
    if (it == byName_.end()) continue;
    Iface& f = *it->second;
    if (std::holds_alternative<config::InternalSource>(f.cfg->source)) continue;
    f.intakeStopped = true;
    shown[s.interfaceName] = {s.stoppedAt, s.stoppedBy, s.reason};
    spdlog::info(
        "interface {}: intake stopped by {} since {}{}; its source stays closed, what "
        "it stored is delivered (POST /api/v1/interfaces/{}/start opens it)",
        s.interfaceName, s.stoppedBy, s.stoppedAt, s.reason ? " (" + *s.reason + ")" : "",
        s.interfaceName);
  }
  if (actions_) actions_->stopsRead(std::move(shown));
}

// Why a stop never loses an acknowledged message: nothing here drops a
// message that has been received. The MLLP listener's close() answers
// every message already handed to intake (stored and ACKed, or AE when its
// store fails) and only then closes that connection; a frame not yet
// complete is dropped with its connection unanswered, so its sender sends
// it again. The HTTP check (openSource) answers 503 before anything is
// stored, and a request past it is answered 202 as ever. A file or schedule
// source that pauses finishes the file or run in hand (committed with its
// progress) and takes no next one. The gate stays open: the stores in
// flight finish as they would, and a drain or the engine's stop closes it
// as ever.
void Engine::closeIntake(Iface& f) {
  f.intakeStopped = true;
  for (size_t i = 0; i < mllpAt_.size(); ++i)
    if (mllpAt_[i].first == &f && mllp_[i]) closeMllp(i, "(intake stopped by an operator)");
  if (f.files) f.files->pause();
  if (f.schedule) f.schedule->pause();
}

void Engine::openIntake(Iface& f) {
  f.intakeStopped = false;
  // The monitor counts active_within and active_by from here, not from the
  // last message before the stop.
  if (f.activity) f.activity->intakeStarted.markNow();
  // A drain keeps every MLLP listener closed until it ends (reopenMllp then).
  if (!(actions_ && actions_->draining())) reopenMllp();
  if (sourcesHeld_) return;  // ownership lost: resumed when it is had again
  if (f.files) f.files->resume();
  if (f.schedule) f.schedule->resume();
}

void Engine::reopenMllp() {
  if (stopping_) return;
  bool failed = false;
  for (size_t i = 0; i < mllp_.size(); ++i) {
    if (mllp_[i]) continue;
    auto& [f, at] = mllpAt_[i];
    if (f->intakeStopped) continue;  // an operator's stop: POST .../start opens it
    auto l = makeMllp(*f);
    if (auto s = l->listen(at.host, at.port); !s) {
      spdlog::error("{}: listening on {} again after the drain failed (tried again in 5 s): {}",
                    f->cfg->name, at.toString(), s.error().message);
      failed = true;
      continue;
    }
    std::string name = Systemd::socketName("mllp", at.host, at.port);
    if (options_.systemd) options_.systemd->storeListener(name, l->fd());
    socketFds_[name] = l->fd();
    mllp_[i] = std::move(l);
  }
  if (!failed) {
    if (mllpRetry_) uv_timer_stop(mllpRetry_.get());
    return;
  }
  if (!mllpRetry_) mllpRetry_ = makeTimer(loop_, this);
  uv_timer_start(
      mllpRetry_.get(),
      [](uv_timer_t* t) {
        auto* self = static_cast<Engine*>(t->data);
        if (self->actions_ && self->actions_->draining()) return;
        self->reopenMllp();
      },
      5000, 0);
}

Status Engine::openApi() {
  std::vector<EngineViewAdapter::Viewed> viewed;
  for (auto& f : ifaces_) viewed.push_back({f->cfg, f->intake.get(), f->activity, f->functions});
  view_ = std::make_unique<EngineViewAdapter>(
      startedAt_,
      [this] {
        if (stopping_) return api::EngineState::Stopping;
        return actions_ && actions_->draining() ? api::EngineState::Draining
                                                : api::EngineState::Serving;
      },
      *workers_, std::move(viewed), [this](auto answer) {
        store_->waitingCounts([answer](Result<std::map<int64_t, int64_t>> r) {
          if (!r) spdlog::warn("counting the waiting deliveries failed: {}", r.error().message);
          answer(r ? std::optional(std::move(*r)) : std::nullopt);
        });
      },
      [this](const std::string& name) {  // lanes 0..slots-1 reach every loop
        if (auto it = byName_.find(name); it != byName_.end())
          for (uint32_t lane = 0; lane < it->second->slots; ++lane)
            wake(*it->second, static_cast<int32_t>(lane));
      });
  view_->setActions(actions_.get());
  view_->setDryRuns(workers_.get());
  view_->setHealth(
      [this](std::vector<api::InterfaceInfo> list, auto done) {
        monitor_->annotate(std::move(list), std::move(done));
      },
      [this](std::vector<api::InterfaceInfo> list, auto done) {
        monitor_->hotspots(std::move(list), std::move(done));
      });
  view_->setUnsavedTraffic([this](int64_t interfaceId) {
    return monitor_ ? monitor_->unsavedTraffic(interfaceId) : std::vector<store::TrafficRow>{};
  });
  view_->setQuarantinedCounts([this](auto answer) {
    store_->quarantinedCounts([answer](Result<std::map<int64_t, int64_t>> r) {
      if (!r) spdlog::warn("counting the quarantined deliveries failed: {}", r.error().message);
      answer(r ? std::optional(std::move(*r)) : std::nullopt);
    });
  });
  view_->setRetention(
      [this](std::function<void(Result<api::RetentionInfo>)> done) {
        if (!retention_) return done(Error{"retention is not running", ErrorKind::Unavailable});
        retention_->describe(std::move(done));
      },
      [this](const std::string& interface, const std::string& tier) -> Status {
        return retentionConfirmed(interface, tier);
      });
  view_->setEngineExtra([this, o = ownership_.get()](api::EngineInfo& e) {
    if (o) o->describe(e);
    for (const auto& [name, g] : guards_) {
      api::ListenerInfo l;
      l.name = name;
      l.tls = g.tls != nullptr;
      l.handshakes = g.counts->handshakes.load();
      l.handshakeFailures = g.counts->handshakeFailures.load();
      l.refused = g.counts->refused.load();
      e.listeners.push_back(std::move(l));
    }
    if (certificates_)
      for (const auto& c : certificates_->entries())
        e.certificates.push_back({c->name, c->subject, c->notAfter});
    if (retention_) e.held = retention_->heldInfo();
  });
  // The engine's own rows and the housekeeping go on with the API off.
  audit_ = std::make_unique<api::AuditLog>(store_->sharedConnections());
  api::HousekeepingOptions ho;
  ho.auditKeep = std::chrono::duration_cast<std::chrono::seconds>(project_.engine.auditKeep);
  housekeeping_ =
      std::make_unique<api::ApiHousekeeping>(loop_, store_->sharedConnections(), *audit_, ho);
  housekeeping_->start();
  // Who calls: tokens and sessions looked up in the store on every call,
  // passwords hashed off the loop; every change audited.
  hasher_ = std::make_unique<api::PasswordHasher>(loop_);
  storeAuthenticator_ = std::make_unique<api::StoreAuthenticator>(store_->sharedConnections());
  authDeps_ = std::make_unique<api::AuthDeps>(api::AuthDeps{
      store_->sharedConnections(), *hasher_, *audit_, api::systemClock(), {},
      !api::isLoopbackHost(project_.engine.apiListen.host)});
  if (const auto& ldap = project_.engine.ldap; ldap.enabled()) {
    auto ca = databaseTls_.caFile("the directory (auth.ldap)", ldap.tls,
                                  project_.resources.certificates, certificates_.get());
    if (!ca) return ca.error();
    directory_ = std::make_unique<api::Directory>(loop_, ldap, *ca);
    directoryRefresh_ = std::make_unique<api::DirectoryRefresh>(loop_, store_->sharedConnections(),
                                                                *directory_, *audit_);
    directoryRefresh_->start();
    authDeps_->directory = directory_.get();
    spdlog::info("directory sign-in: {} (users under {}; groups read again every {})", ldap.url,
                 ldap.usersBase, formatDuration(ldap.refresh));
  }
  if (const auto& sso = project_.engine.oidc; sso.enabled()) {
    // The provider's discovery, keys and token endpoint through libcurl on
    // this loop, verified against auth.oidc.ca (else the system's roots).
    std::shared_ptr<const net::CurlTls> tls;
    if (!sso.tls.ca.empty()) {
      auto client = certificates_->client(sso.tls);
      if (!client) return Error{"auth.oidc.ca: " + client.error().message};
      tls = std::make_shared<net::CurlTls>(*client);
    }
    oidcFetch_ = std::make_unique<services::HttpFetch>(loop_, 1u << 20, 8, 64);
    auto transport = [this, tls, timeout = sso.timeout](
                         api::OidcHttpRequest req,
                         std::function<void(Result<api::OidcHttpAnswer>)> done) {
      auto url = services::parseHttpUrl(req.url);
      if (!url) return done(url.error());
      services::HttpCall call;
      call.method = req.method;
      call.url = std::move(*url);
      call.headers = std::move(req.headers);
      call.body = std::move(req.body);
      call.timeout = timeout;
      call.label = "single sign-on " + req.method + " " + call.url.shown;
      call.tls = tls;
      oidcFetch_->start(std::move(call), [done](Result<services::HttpAnswer> r) {
        if (!r) return done(r.error());
        done(api::OidcHttpAnswer{r->status, std::move(r->body)});
      });
    };
    oidc_ = std::make_unique<api::OidcClient>(sso, std::move(transport));
    authDeps_->oidc = oidc_.get();
    spdlog::info("single sign-on: {} as client {}", sso.issuer, sso.clientId);
  }
  // ductusctl's actions: the same operations through the control socket,
  // whatever api.listen says.
  localAuthenticator_ = std::make_unique<api::LocalAuthenticator>();
  auto local = api::Router::make(api::allRoutes({.engine = view_.get(), .auth = authDeps_.get()}),
                                 localAuthenticator_.get());
  if (!local) return local.error();
  controlRouter_ = std::move(*local);
  if (!project_.engine.apiEnabled) return {};
  api::Authenticator* auth =
      options_.authenticator ? options_.authenticator : storeAuthenticator_.get();
  api::ApiServerOptions ao;
  ao.host = project_.engine.apiListen.host;
  ao.port = project_.engine.apiListen.port;
  ao.limits = connectionLimits(project_.engine);
  ao.requestTimes = &apiRequestTimes_;
  ao.guard = guards_.at("api");
  if (!ao.guard.tls && !api::isLoopbackHost(ao.host))
    spdlog::warn(
        "api: listening on {} without tls: passwords and the console's session cross "
        "the network in clear, and browsers drop its Secure cookie; give api: a tls: "
        "{{ certificate: ... }} (resources.yaml certificates:)",
        project_.engine.apiListen.toString());
  std::string apiName = Systemd::socketName("api", ao.host, ao.port);
  if (options_.inheritedSocket) ao.adoptFd = options_.inheritedSocket(apiName);
  // As the sources' listeners: systemd keeps it across a restart, so a
  // monitor's call that comes meanwhile waits instead of being refused.
  if (ao.adoptFd < 0 && options_.systemd) ao.adoptFd = options_.systemd->takeListener(apiName);
  auto server = api::ApiServer::start(
      loop_, ao,
      api::allRoutes({.engine = view_.get(),
                      .auth = authDeps_.get(),
                      .requestTimes = &apiRequestTimes_}),
      auth);
  if (!server)
    return Error{server.error().message + " (ductus.yaml api.listen, or --api-listen; off "
                 "turns the API off)"};
  api_ = std::move(*server);
  if (options_.systemd) options_.systemd->storeListener(apiName, api_->fd());
  socketFds_[apiName] = api_->fd();
  listenerLines_.push_back("api " + api_->address());
  return {};
}

Status Engine::openControl() {
  if (options_.controlPath.empty()) return {};
  auto control = std::make_unique<ControlSocket>(loop_, *view_);
  control->setApi(controlRouter_.get());
  if (options_.handover)
    control->setHandover([h = options_.handover](std::function<void(nlohmann::json)> answer) {
      h([answer](Result<int64_t> pid) {
        if (pid) return answer({{"ok", true}, {"pid", *pid}});
        answer({{"ok", false}, {"error", pid.error().message}, {"code", "handover_failed"}});
      });
    });
  int inherited = options_.inheritedSocket ? options_.inheritedSocket("control") : -1;
  if (auto s = inherited >= 0 ? control->adopt(options_.controlPath, inherited)
                              : control->listen(options_.controlPath);
      !s) {
    if (options_.controlRequired) return s;
    spdlog::warn("control socket: {}; running without one", s.error().message);
    return {};
  }
  // Until it takes charge, a takeover's socket is still the old engine's.
  if (inherited >= 0 && options_.takeover) control->keepFile(true);
  control_ = std::move(control);
  socketFds_["control"] = control_->fd();
  listenerLines_.push_back("control " + options_.controlPath);
  return {};
}

api::EngineInstance Engine::instance() const {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return {host, project_.root.string(), kVersion, getpid()};
}

void Engine::recordStop(std::function<void()> then) {
  if (!audit_) return then();
  // A database that doesn't answer must not hold the stop: 3 s at most.
  afterStopRecord_ = std::move(then);
  stopRecordTimer_ = makeTimer(loop_, this);
  uv_timer_start(
      stopRecordTimer_.get(),
      [](uv_timer_t* t) {
        auto* self = static_cast<Engine*>(t->data);
        if (auto f = std::exchange(self->afterStopRecord_, nullptr)) f();
      },
      3000, 0);
  api::recordEngineStop(*audit_, instance(), "stop", [this, alive = alive_](Status s) {
    if (!*alive) return;
    if (!s) spdlog::warn("engine.stop is not in the audit log: {}", s.error().message);
    stopRecordTimer_.reset();
    if (auto f = std::exchange(afterStopRecord_, nullptr)) f();
  });
}

void Engine::claimInterfaces(std::function<void(Status)> next) {
  std::vector<OwnedInterface> owned;
  for (auto& f : ifaces_)
    if (f->id) owned.push_back({f->id, f->cfg->name, f->cfg->partitionCount()});
  if (options_.standby)
    ownership_->standBy(std::move(owned), std::move(next));
  else if (options_.takeover)
    ownership_->prepare(std::move(owned), options_.predecessor, std::move(next));
  else
    ownership_->start(std::move(owned), std::move(next));
}

void Engine::watchOwnership() {
  ownership_->monitor({.lost = [this] { holdForOwnership(true); },
                       .regained = [this] { holdForOwnership(false); },
                       .taken =
                           [this](const Error& e) {
                             if (options_.onOwnershipTaken) options_.onOwnershipTaken(e);
                           }});
}

void Engine::holdForOwnership(bool hold) {
  using delivery::Hold;
  for (auto& f : ifaces_)
    for (auto& perDest : f->loops)
      for (auto& l : perDest) hold ? l->hold(Hold::Ownership) : l->release(Hold::Ownership);
  sourcesHeld_ = hold;
  // A source whose intake an operator stopped stays paused.
  for (auto& f : ifaces_) {
    bool paused = hold || f->intakeStopped;
    if (f->files) paused ? f->files->pause() : f->files->resume();
    if (f->schedule) paused ? f->schedule->pause() : f->schedule->resume();
  }
}

std::vector<std::pair<std::string, int>> Engine::listeningSockets() const {
  return {socketFds_.begin(), socketFds_.end()};
}

std::string Engine::engineId() const { return ownership_ ? ownership_->engineId() : std::string(); }

std::string Engine::apiAddress() const { return api_ ? api_->address() : std::string(); }

void Engine::maintainPartitions() {
  if (!store_ || stopping_) return;
  store_->ensurePartitions({}, [](Result<store::PartitionReport> r) {
    if (!r) return spdlog::warn("partition maintenance failed: {}; retrying in an hour",
                                r.error().message);
    for (auto& e : r->errors) spdlog::warn("partitions: {}", e);
  });
}

void Engine::stop(std::function<void()> done) { beginStop(false, nullptr, std::move(done)); }

void Engine::handOver(std::function<void()> released, std::function<void()> done) {
  if (control_) control_->keepFile(true);  // the new engine serves on it now
  beginStop(true, released ? std::move(released) : [] {}, std::move(done));
}

void Engine::beginStop(bool handover, std::function<void()> released,
                       std::function<void()> done) {
  if (stopping_) return;
  stopping_ = true;
  stop_ = {StopPhase::CloseListeners, handover, std::move(released), std::move(done)};
  if (actions_) actions_->shutdown();  // a drain's check ends; the gates close below
  if (options_.systemd && !handover)
    options_.systemd->tell("STOPPING=1\nSTATUS=draining: listeners closed, answering the "
                           "messages in flight");
  if (options_.systemd && handover)
    options_.systemd->tell("STATUS=handing over: listeners closed, answering the messages in "
                           "flight");
  partitionTimer_.reset();
  sweepTimer_.reset();
  mllpRetry_.reset();
  standbyTimer_.reset();  // a standby stopping takes nothing over
  if (retention_) retention_->stop();
  if (housekeeping_) housekeeping_->stop();
  activityReporter_.reset();
  schedules_.clear();
  files_.clear();
  runStopPhase();
}

// Each phase starts its work and hands the next phase to what answers
// last (a Countdown); a phase with nothing to wait for goes on at once.
void Engine::runStopPhase() {
  auto nextPhase = [this, alive = alive_](StopPhase p) {
    return [this, alive, p] {
      if (!*alive) return;
      stop_.phase = p;
      runStopPhase();
    };
  };
  switch (stop_.phase) {
    case StopPhase::CloseListeners: {
      if (!stop_.handover) {
        stop_.phase = StopPhase::CloseGates;
        return runStopPhase();
      }
      auto listeners = Countdown::make(nextPhase(StopPhase::CloseGates));
      for (auto& l : mllp_)
        if (l) l->close(listeners->add());
      for (auto& [k, s] : http_) s->close(listeners->add());
      return listeners->start();
    }
    case StopPhase::CloseGates: {
      auto intake = Countdown::make(nextPhase(StopPhase::StopLoops));
      for (auto& f : ifaces_)
        if (f->intake) {
          f->intake->gate().close();
          f->intake->gate().onDrained(intake->add());
        }
      if (!stop_.handover) {
        for (auto& l : mllp_)
          if (l) l->close(intake->add());
        // Still answering what was in flight when a drain closed them; the
        // stop waits for them too (close() again: they stay until the
        // engine goes).
        std::vector<intake::MllpListener*> closing;
        for (auto& l : mllpClosing_) closing.push_back(l.get());
        for (auto* l : closing) l->close(intake->add());
        for (auto& [k, s] : http_) s->close(intake->add());
      }
      return intake->start();
    }
    case StopPhase::StopLoops: {
      if (options_.systemd)
        options_.systemd->tell(
            "STATUS=stopping: delivery loops flushing and settling, then the workers");
      // Then each interface settles, once, what its stopped loops finished
      // (a handover's successor would otherwise find those messages pending
      // with nothing left to deliver, and settle them at its start).
      auto settled =
          [this, alive = alive_,
           next = nextPhase(stop_.handover ? StopPhase::ReleaseClaims : StopPhase::StopWorkers)] {
            if (!*alive) return;
            auto settlers = Countdown::make(next);
            for (auto& f : ifaces_)
              if (f->settler) f->settler->finish(settlers->add());
            settlers->start();
          };
      auto loops = Countdown::make(settled);
      for (auto& f : ifaces_)
        for (auto& perDest : f->loops)
          for (auto& l : perDest) l->stop(loops->add());
      return loops->start();
    }
    case StopPhase::ReleaseClaims: {
      auto released = [this, alive = alive_, next = nextPhase(StopPhase::StopWorkers)] {
        if (!*alive) return;
        if (auto r = std::exchange(stop_.released, nullptr)) r();
        next();
      };
      if (!ownership_) return released();
      return ownership_->release(released);
    }
    case StopPhase::StopWorkers:
      return workers_->shutdown(nextPhase(StopPhase::CloseSenders));
    case StopPhase::CloseSenders: {
      auto senders = Countdown::make(nextPhase(StopPhase::RecordStop));
      for (auto& f : ifaces_)
        for (auto& s : f->senders)
          if (s) s->close(senders->add());
      return senders->start();
    }
    case StopPhase::RecordStop: {
      // Last activity is saved once more and the events waiting are
      // written, then the stop is recorded.
      auto record = [this, alive = alive_, next = nextPhase(StopPhase::CloseApi)] {
        if (!*alive) return;
        if (!events_) return recordStop(next);
        events_->flushNow([this, alive, next] {
          if (*alive) recordStop(next);
        });
      };
      if (monitor_) return monitor_->stop(record);
      return record();
    }
    case StopPhase::CloseApi: {
      auto next = nextPhase(stop_.handover ? StopPhase::Done : StopPhase::ReleaseOwnership);
      if (!api_) return next();
      return api_->close(next);
    }
    case StopPhase::ReleaseOwnership:
      if (!ownership_) {
        stop_.phase = StopPhase::Done;
        return runStopPhase();
      }
      return ownership_->release(nextPhase(StopPhase::Done));
    case StopPhase::Done:
      if (auto d = std::exchange(stop_.done, nullptr)) d();
      return;
  }
}

}  // namespace ductus::supervisor
