#include "supervisor/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/hl7/ack.h"
#include "common/text.h"

#include "intake/http_body_check.h"
#include "intake/http_server.h"
#include "intake/intake.h"
#include "intake/mllp_listener.h"
#include "schema/migrations.h"
#include "schema/migrator.h"
#include "schema/pg_connection.h"
#include "schema/store.h"
#include "supervisor/delivery_loop.h"
#include "supervisor/file_source.h"
#include "supervisor/project_services.h"
#include "supervisor/schedule_source.h"
#include "supervisor/senders/curl_multi_uv.h"
#include "supervisor/senders/file_sender.h"
#include "supervisor/senders/http_sender.h"
#include "supervisor/senders/mllp_sender.h"
#include "supervisor/worker_pool.h"

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
  // loops[destination][slot]
  std::vector<std::vector<std::unique_ptr<DeliveryLoop>>> loops;
  uint32_t slots = 1;
  bool waiting = false;  // had something pending at start
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

}  // namespace

Engine::Engine(uv_loop_t* loop, config::Project project, EngineOptions options)
    : loop_(loop), project_(std::move(project)), options_(std::move(options)) {}

Engine::~Engine() { *alive_ = false; }

void Engine::start(std::function<void(Status)> done) {
  auto alive = alive_;
  auto fail = [done](const std::string& step, const Error& e) {
    done(Error{step + ": " + e.message, e.code});
  };
  migrate([this, alive, done, fail](Status s) {
    if (!*alive) return;
    if (!s) return fail("migrating the database", s.error());
    store::StoreOptions so;
    so.conninfo = options_.databaseUrl;
    so.poolSize = options_.poolSize;
    store_ = std::make_unique<store::Store>(loop_, so);
    store_->start([this, alive, done, fail](Status s) {
      if (!*alive) return;
      if (!s) return fail("connecting to the database", s.error());
      store_->ensurePartitions({}, [this, alive, done, fail](Result<store::PartitionReport> r) {
        if (!*alive) return;
        if (!r) return fail("creating partitions", r.error());
        for (auto& e : r->errors) spdlog::warn("partitions: {}", e);
        for (auto& c : project_.interfaces) {
          auto f = std::make_unique<Iface>();
          f->cfg = &c;
          byName_[c.name] = f.get();
          ifaces_.push_back(std::move(f));
        }
        registerAll(0, [this, alive, done, fail](Status s) {
          if (!*alive) return;
          if (!s) return fail("registering interfaces", s.error());
          reconcile([this, alive, done, fail](Status s) {
            if (!*alive) return;
            if (!s) return fail("reconciling", s.error());
            if (auto w = startWorkers(); !w) return fail("starting workers", w.error());
            if (auto d = buildDelivery(); !d) return fail("starting delivery", d.error());
            if (auto o = openSources(); !o) return fail("opening sources", o.error());
            partitionTimer_ = makeTimer(loop_, this);
            uv_timer_start(
                partitionTimer_.get(),
                [](uv_timer_t* t) {
                  if (auto* self = static_cast<Engine*>(t->data)) self->maintainPartitions();
                },
                3600 * 1000, 3600 * 1000);
            done({});
          });
        });
      });
    });
  });
}

void Engine::migrate(std::function<void(Status)> next) {
  auto migrations = store::embeddedMigrations();
  if (!migrations) return next(migrations.error());
  auto conn = std::make_shared<store::PgConnection>(loop_);
  auto migrator = std::make_shared<store::Migrator>(*conn, std::move(*migrations));
  conn->connect(options_.databaseUrl, [](Status) {});
  migrator->migrate([conn, migrator, next](Result<store::MigrateReport> r) {
    if (!r) return next(r.error());
    for (auto& a : r->applied) spdlog::info("migration applied: {}", a);
    for (auto& u : r->unknown)
      spdlog::warn("the database has migration {} which this binary does not know (a newer "
                   "version ran); carrying on",
                   u);
    next({});
  });
}

void Engine::registerAll(size_t i, std::function<void(Status)> next) {
  while (i < ifaces_.size() && !queued(*ifaces_[i]->cfg)) ++i;
  if (i == ifaces_.size()) return next({});
  auto alive = alive_;
  Iface& f = *ifaces_[i];
  store_->ensureInterface(f.cfg->name, [this, alive, &f, i, next](Result<int64_t> r) {
    if (!*alive) return;
    if (!r) return next(r.error());
    f.id = *r;
    registerDestinations(f, 0, [this, i, next](Status s) {
      if (!s) return next(s);
      registerAll(i + 1, next);
    });
  });
}

void Engine::registerDestinations(Iface& f, size_t j, std::function<void(Status)> next) {
  if (j == f.cfg->destinations.size()) return next({});
  auto alive = alive_;
  store_->ensureDestination(f.id, f.cfg->destinations[j].name,
                            [this, alive, &f, j, next](Result<int64_t> r) {
                              if (!*alive) return;
                              if (!r) return next(r.error());
                              f.destinationIds.push_back(*r);
                              registerDestinations(f, j + 1, next);
                            });
}

void Engine::reconcile(std::function<void(Status)> next) {
  auto alive = alive_;
  store_->withWaiting([this, alive, next](Result<std::vector<int64_t>> r) {
    if (!*alive) return;
    if (!r) return next(r.error());
    std::set<int64_t> waiting(r->begin(), r->end());
    auto left = std::make_shared<size_t>(0);
    auto failed = std::make_shared<std::optional<Error>>();
    std::vector<Iface*> todo;
    for (auto& f : ifaces_)
      if (f->id && waiting.count(f->id)) {
        f->waiting = true;
        todo.push_back(f.get());
      }
    if (todo.empty()) return next({});
    *left = todo.size();
    for (Iface* f : todo) {
      store_->reconcile(f->id, f->destinationIds,
                        [this, alive, f, left, failed, next](Result<store::ReconcileReport> r) {
                          if (!*alive) return;
                          if (!r) *failed = r.error();
                          else if (r->deliveriesAdded || r->deliveriesFiltered ||
                                   r->deliveriesFinished)
                            spdlog::info("{}: reconciled: {} deliveries added, {} to removed "
                                         "destinations filtered, {} finished",
                                         f->cfg->name, r->deliveriesAdded, r->deliveriesFiltered,
                                         r->deliveriesFinished);
                          store_->settleFinished(f->id, [left, failed, next](Result<int64_t> s) {
                            if (!s && !*failed) *failed = s.error();
                            if (--*left == 0) next(*failed ? Status(**failed) : Status());
                          });
                        });
    }
  });
}

Status Engine::startWorkers() {
  services_ = std::make_unique<ProjectServices>(loop_, project_);
  WorkerPool::Options wo;
  wo.binary = options_.binary;
  wo.heapMb = project_.engine.heapMb;
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  wo.sharedWorkers = static_cast<int>(project_.engine.isolateWorkers ? project_.engine.isolateWorkers
                                                                     : cores);
  workers_ = std::make_unique<WorkerPool>(loop_, wo, *services_);
  workers_->onInterfaceStopped([](const std::string& name, const std::string& why) {
    spdlog::error("interface {} stopped: {}; its messages stay pending until the code is fixed "
                  "and the engine restarted",
                  name, why);
  });
  for (auto& f : ifaces_) {
    const InterfaceConfig& c = *f->cfg;
    InterfaceSpec spec;
    spec.name = c.name;
    spec.dir = c.folder;
    spec.projectLib = project_.root / "lib";
    spec.entryFile = c.code;
    spec.timeout = c.timeout;
    spec.dedicated = c.isolation == config::Isolation::Dedicated;
    spec.workers = static_cast<int>(c.workers);
    if (c.respondMode()) {
      spec.functions.push_back({c.respond, "http", "http", ""});
    }
    for (auto& d : c.destinations)
      spec.functions.push_back(
          {d.transform, config::formatName(c.format), config::formatName(d.output), d.name});
    auto modules = readInterfaceModules(spec);
    if (!modules) return Error{c.name + ": " + modules.error().message};
    std::string name = c.name;
    auto ids = workers_->addInterface(spec, std::move(*modules), [name](Status s) {
      if (!s) spdlog::error("{}: loading its code failed: {}", name, s.error().message);
    });
    if (!ids) return Error{c.name + ": " + ids.error().message};
    f->functions = std::move(*ids);
  }
  return {};
}

Status Engine::buildDelivery() {
  curl_ = std::make_unique<senders::CurlMulti>(loop_);
  // Intakes first: a route's loop holds its target's intake.
  for (auto& f : ifaces_) {
    const InterfaceConfig& c = *f->cfg;
    if (!queued(c)) continue;
    intake::IntakeSpec is;
    is.name = c.name;
    is.interfaceId = f->id;
    is.tier = tierOf(c.retention);
    is.destinationIds = f->destinationIds;
    is.relaxed = c.durability == config::Durability::Relaxed;
    is.keys.format = c.format;
    if (c.ordering) {
      is.keys.orderingKey = c.ordering->key;
      is.keys.partitions = c.ordering->partitions;
    }
    is.keys.dedupeKey = c.dedupeKey;
    Iface* fp = f.get();
    f->intake = std::make_unique<intake::Intake>(*store_, std::move(is),
                                                 [this, fp](int32_t lane) { wake(*fp, lane); });
  }
  for (auto& f : ifaces_) {
    const InterfaceConfig& c = *f->cfg;
    if (!queued(c)) continue;
    uint32_t lanes = c.partitionCount();
    f->slots = c.isolation == config::Isolation::Dedicated ? std::max(1u, c.workers) : 1;
    f->slots = std::min(f->slots, lanes);
    size_t fnBase = 0;
    for (size_t j = 0; j < c.destinations.size(); ++j) {
      const config::Destination& d = c.destinations[j];
      DeliveryTarget t;
      t.interfaceName = c.name;
      t.destinationName = d.name;
      t.destinationId = f->destinationIds[j];
      t.function = f->functions[fnBase + j];
      t.maxAttempts = d.maxAttempts;
      t.saveOutput = d.saveOutput;
      if (d.rateLimit && d.rateLimit->messages > 0) {
        senders::RateLimitSettings rl;
        rl.count = d.rateLimit->messages;
        rl.per = d.rateLimit->per;
        rl.burst = 1;
        rl.mode = d.rateLimit->dropOver ? senders::RateLimitMode::Drop
                                        : senders::RateLimitMode::Wait;
        t.rateLimit = rl;
      }
      std::unique_ptr<senders::Sender> sender;
      if (auto* m = std::get_if<config::MllpDestination>(&d.target)) {
        senders::MllpSenderSettings s;
        s.host = m->address.host;
        s.port = m->address.port;
        s.ackTimeout = m->ackTimeout;
        sender = std::make_unique<senders::MllpSender>(loop_, s);
      } else if (auto* h = std::get_if<config::HttpDestination>(&d.target)) {
        senders::HttpSenderSettings s;
        if (!h->api.empty()) {
          auto api = project_.resources.apis.find(h->api);
          if (api == project_.resources.apis.end())
            return Error{c.name + "/" + d.name + ": no api " + h->api + " in resources.yaml"};
          s.url = api->second.url + h->path;
          for (auto& [k, v] : api->second.headers) s.headers.emplace_back(k, v);
        } else {
          s.url = h->url;
        }
        s.method = h->method;
        for (auto& [k, v] : h->headers) s.headers.emplace_back(k, v);
        s.timeout = h->timeout;
        sender = std::make_unique<senders::HttpSender>(*curl_, s);
      } else if (auto* fd = std::get_if<config::FileDestination>(&d.target)) {
        senders::FileSenderSettings s;
        fs::path dir = fd->path;
        s.dir = (dir.is_absolute() ? dir : project_.root / dir).string();
        s.nameTemplate = fd->name;
        if (auto v = senders::validateNameTemplate(s.nameTemplate); !v)
          return Error{c.name + "/" + d.name + ": file name \"" + s.nameTemplate +
                       "\": " + v.error().message};
        sender = std::make_unique<senders::FileSender>(loop_, s);
      } else if (auto* r = std::get_if<config::RouteDestination>(&d.target)) {
        auto tgt = byName_.find(r->interface);
        if (tgt == byName_.end() || !tgt->second->intake)
          return Error{c.name + "/" + d.name + ": route target " + r->interface + " is not queued"};
        t.route = tgt->second->intake.get();
        t.routeTier = tierOf(tgt->second->cfg->retention);
      } else {
        return Error{c.name + "/" + d.name + ": " + config::targetKind(d.target) +
                     " destinations are not supported by this engine yet"};
      }
      t.sender = sender.get();
      t.onlyDestination = c.destinations.size() == 1 && !t.route;
      f->senders.push_back(std::move(sender));
      std::vector<std::unique_ptr<DeliveryLoop>> loops;
      for (uint32_t s = 0; s < f->slots; ++s) {
        std::vector<int32_t> mine;  // empty: every lane
        if (f->slots > 1)
          for (uint32_t l = s; l < lanes; l += f->slots) mine.push_back(static_cast<int32_t>(l));
        loops.push_back(std::make_unique<DeliveryLoop>(loop_, *store_, *workers_, t, mine));
      }
      f->loops.push_back(std::move(loops));
    }
  }
  // Only interfaces with something waiting read their queue at start; the
  // others wait for intake to wake them.
  for (auto& f : ifaces_)
    if (f->waiting)
      for (auto& perDest : f->loops)
        for (auto& l : perDest) l->wake();
  return {};
}

void Engine::wake(Iface& f, int32_t lane) {
  uint32_t slot = f.slots > 1 ? static_cast<uint32_t>(lane) % f.slots : 0;
  for (auto& perDest : f.loops)
    if (slot < perDest.size()) perDest[slot]->wake();
}

Status Engine::openSources() {
  for (auto& f : ifaces_) {
    const InterfaceConfig& c = *f->cfg;
    if (auto* m = std::get_if<config::MllpSource>(&c.source)) {
      intake::MllpSettings ms;
      ms.maxMessageBytes = c.maxMessageBytes;
      ms.name = c.name;
      intake::Intake* in = f->intake.get();
      auto l = std::make_unique<intake::MllpListener>(
          loop_, ms, [in](const intake::MllpPeer&, std::string bytes, intake::MllpAnswer answer) {
            in->accept(std::move(bytes), [in, answer](Result<store::StoredMessage> r) {
              if (r) return answer(hl7::AckCode::Accept);
              spdlog::error("{}: storing a message failed: {}", in->spec().name,
                            r.error().message);
              answer(hl7::AckCode::Error, "message not stored, send it again");
            });
          });
      if (auto s = l->listen(m->listen.host, m->listen.port); !s)
        return Error{c.name + ": mllp " + m->listen.toString() + ": " + s.error().message};
      listenerLines_.push_back("mllp " + c.name + " " + l->address());
      mllp_.push_back(std::move(l));
    } else if (auto* h = std::get_if<config::HttpSource>(&c.source)) {
      std::string key = h->listen.toString();
      auto& server = http_[key];
      if (!server) {
        intake::HttpSettings hs;
        hs.name = key;
        server = std::make_unique<intake::HttpServer>(loop_, hs);
        if (auto s = server->listen(h->listen.host, h->listen.port); !s)
          return Error{c.name + ": http " + key + ": " + s.error().message};
      }
      if (h->mode == config::HttpMode::Queue) {
        intake::Intake* in = f->intake.get();
        config::Format format = c.format;
        auto s = server->addRoute(
            h->path,
            [in, format](const intake::HttpRequest& req, intake::HttpRespond respond) {
              if (req.method != "POST" && req.method != "PUT")
                return respond({405, {{"Allow", "POST, PUT"}}, "use POST\n"});
              if (auto refused = intake::refuseBody(format, req)) return respond(*refused);
              in->accept(req.body, [respond](Result<store::StoredMessage> r) {
                if (!r)
                  return respond({503, {{"Retry-After", "5"}, {"Content-Type", "text/plain"}},
                                  "message not stored, send it again\n"});
                bool dup = r->status == store::MessageStatus::Duplicate;
                respond({202,
                         {{"Content-Type", "application/json"}},
                         "{\"id\":" + std::to_string(r->ref.id) +
                             (dup ? ",\"duplicate\":true}" : "}") + "\n"});
              });
            },
            c.maxMessageBytes);
        if (!s) return Error{c.name + ": " + s.error().message};
      } else {
        WorkerPool* pool = workers_.get();
        WorkerPool::FunctionId fn = f->functions.at(0);
        auto s = server->addRoute(
            h->path,
            [pool, fn](const intake::HttpRequest& req, intake::HttpRespond respond) {
              nlohmann::json env;
              env["method"] = req.method;
              env["path"] = req.path;
              nlohmann::json headers = nlohmann::json::object();
              // Bytes as the SDK reads them everywhere: ISO-8859-1 unless UTF-8.
              for (auto& [k, v] : req.headers) headers[k] = asText(v);
              env["headers"] = headers;
              env["query"] = asText(req.query);
              env["body"] = asText(req.body);
              CallMeta meta;
              pool->invoke(
                  fn, env.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), meta,
                  [respond](Outcome o) {
                    if (o.kind != Outcome::Kind::Output) {
                      int status = o.kind == Outcome::Kind::Filtered ? 204 : 503;
                      if (o.kind == Outcome::Kind::Quarantine) status = 500;
                      return respond({status, {{"Content-Type", "text/plain"}},
                                      std::string(outcomeKindName(o.kind)) + "\n"});
                    }
                    auto j = nlohmann::json::parse(o.data, nullptr, false);
                    if (j.is_discarded() || !j.is_object())
                      return respond({200, {}, o.data});
                    intake::HttpResponse resp;
                    resp.status = j.value("status", 200);
                    if (j.contains("headers") && j["headers"].is_object())
                      for (auto& [k, v] : j["headers"].items())
                        resp.headers.emplace_back(k, v.is_string() ? v.get<std::string>()
                                                                   : v.dump());
                    if (j.contains("body"))
                      resp.body = j["body"].is_string() ? j["body"].get<std::string>()
                                                        : j["body"].dump();
                    respond(std::move(resp));
                  });
            },
            c.maxMessageBytes);
        if (!s) return Error{c.name + ": " + s.error().message};
      }
      listenerLines_.push_back("http " + c.name + " " + server->address() + h->path);
    } else if (auto* sc = std::get_if<config::ScheduleSource>(&c.source)) {
      auto src = ScheduleSource::make(loop_, *store_, *f->intake, *sc);
      if (!src) return Error{c.name + ": " + src.error().message};
      listenerLines_.push_back("schedule " + c.name + " " + c.sourceDescribe);
      schedules_.push_back(std::move(*src));
    } else if (auto* fsrc = std::get_if<config::FileSource>(&c.source)) {
      files_.push_back(std::make_unique<FileSource>(loop_, *store_, *f->intake, fsrc->files,
                                                    c.format, project_.root));
      listenerLines_.push_back("file " + c.name + " " + c.sourceDescribe);
    } else if (std::holds_alternative<config::InternalSource>(c.source)) {
      // Filled only by routes.
    } else {
      return Error{c.name + ": " + config::sourceKind(c.source) +
                   " sources are not supported by this engine yet"};
    }
  }
  return {};
}

void Engine::maintainPartitions() {
  if (!store_ || stopping_) return;
  store_->ensurePartitions({}, [](Result<store::PartitionReport> r) {
    if (!r) return spdlog::warn("partition maintenance failed: {}; retrying in an hour",
                                r.error().message);
    for (auto& e : r->errors) spdlog::warn("partitions: {}", e);
  });
}

void Engine::stop(std::function<void()> done) {
  if (stopping_) return;
  stopping_ = true;
  partitionTimer_.reset();
  schedules_.clear();
  files_.clear();
  auto alive = alive_;
  // 1. No new messages: gates and listeners close; in-flight stores are
  //    answered first (the listeners close connections after their answer).
  auto pending = std::make_shared<int>(1);
  auto afterIntake = std::make_shared<std::function<void()>>();
  auto one = [pending, afterIntake] {
    if (--*pending == 0) (*afterIntake)();
  };
  for (auto& f : ifaces_)
    if (f->intake) {
      f->intake->gate().close();
      ++*pending;
      f->intake->gate().onDrained(one);
    }
  for (auto& l : mllp_) {
    ++*pending;
    l->close(one);
  }
  for (auto& [k, s] : http_) {
    ++*pending;
    s->close(one);
  }
  *afterIntake = [this, alive, done] {
    if (!*alive) return;
    // 2. Delivery loops finish the message in hand and flush.
    auto loopsLeft = std::make_shared<int>(1);
    auto afterLoops = std::make_shared<std::function<void()>>();
    auto oneLoop = [loopsLeft, afterLoops] {
      if (--*loopsLeft == 0) (*afterLoops)();
    };
    for (auto& f : ifaces_)
      for (auto& perDest : f->loops)
        for (auto& l : perDest) {
          ++*loopsLeft;
          l->stop(oneLoop);
        }
    *afterLoops = [this, alive, done] {
      if (!*alive) return;
      // 3. Workers, then senders' connections.
      workers_->shutdown([this, alive, done] {
        if (!*alive) return;
        auto sendersLeft = std::make_shared<int>(1);
        auto finish = [sendersLeft, done] {
          if (--*sendersLeft == 0) done();
        };
        for (auto& f : ifaces_)
          for (auto& s : f->senders)
            if (s) {
              ++*sendersLeft;
              s->close(finish);
            }
        finish();
      });
    };
    oneLoop();
  };
  one();
}

}  // namespace ductus::supervisor
