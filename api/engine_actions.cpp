#include "api/engine_actions.h"

#include <map>
#include <memory>

#include "api/auth/handler_support.h"
#include "schema/destination_pauses.h"
#include "schema/interface_stops.h"

namespace ductus::api {
namespace {

using json = nlohmann::json;
using store::PgResult;
using LeasePtr = store::PgPool::LeasePtr;
using Results = std::vector<PgResult>;

struct Deps {
  EngineView* engine;
  store::PgPool& pool;
  AuditLog& audit;
};

constexpr size_t kMaxReasonBytes = 1000;

net::HttpResponse actionError(const Error& e) { return errorResponse(e); }

json pauseJson(const std::optional<PauseInfo>& p) {
  if (!p) return nullptr;
  json reasons = json::array();
  for (auto& r : p->reasons) reasons.push_back({{"at", r.at}, {"by", r.by}, {"reason", r.reason}});
  return {{"since", p->since}, {"by", p->by}, {"reasons", std::move(reasons)}};
}

json intakeStopJson(const std::optional<IntakeStopInfo>& s) {
  if (!s) return nullptr;
  return {
      {"since", s->since}, {"by", s->by}, {"reason", s->reason ? json(*s->reason) : json(nullptr)}};
}

json drainJson(const DrainInfo& d) {
  return {{"draining", d.draining},
          {"stopWhenDrained", d.stopWhenDrained},
          {"storesInFlight", d.storesInFlight},
          {"pending", d.pending},
          {"drained", d.drained}};
}

// What the engine runs of this interface (and destination, when given):
// the action is refused (404) for what it doesn't run before anything is
// written, and a restart (409) while the interface runs.
void findInEngine(EngineView& engine, const std::string& interface,
                  const std::optional<std::string>& destination, const ApiRespond& respond,
                  std::function<void(const InterfaceInfo&)> then) {
  engine.interfaces([=](Result<std::vector<InterfaceInfo>> r) {
    if (!r) return respond(jsonError(503, "unavailable", r.error().message));
    for (auto& f : *r) {
      if (f.name != interface) continue;
      if (!destination) return then(f);
      for (auto& d : f.destinations)
        if (d.name == *destination) return then(f);
      return respond(jsonError(404, "not_found",
                               "interface " + interface + " has no queued destination " +
                                   *destination + " in this engine"));
    }
    respond(jsonError(404, "not_found", "this engine runs no interface " + interface));
  });
}

// ---- pause / resume -----------------------------------------------------------

// The pause's row and its audit row in one transaction; the loops are held
// (or released) after the commit, so a refused audit leaves them running.
void changePause(Deps& d, const ApiRequest& req, ApiRespond respond,
                 std::optional<std::string> reason) {
  std::string interface = req.params.at("name");
  std::string destination = req.params.at("destination");
  bool pausing = reason.has_value();
  auto entry = auditEntryFor(
      *req.caller, pausing ? AuditAction("destination.pause") : AuditAction("destination.resume"));
  entry.targetKind = "destination";
  entry.targetName = interface + "/" + destination;
  if (reason) entry.detail["reason"] = *reason;
  std::string by = req.caller->name;
  findInEngine(*d.engine, interface, destination, respond, [&d, interface, destination, reason,
                                                            by, entry,
                                                            respond](const InterfaceInfo&) {
    withConnection(d.pool, respond, [&d, interface, destination, reason, by, entry,
                                     respond](LeasePtr l) {
      auto change = reason ? store::pauseDestinationSql(interface, destination, by, *reason)
                           : store::resumeDestinationSql(interface, destination);
      std::vector<TxStep> steps;
      steps.push_back(fixedStep({change.sql, change.params}));
      steps.push_back([&d, entry, pausing = reason.has_value()](
                          const Results& r) -> Result<SqlStatement> {
        if (r[0].rows() == 0) {
          if (pausing) return Error{"the database has no such destination", ErrorKind::NotFound};
          return Error{"the destination is not paused", ErrorKind::Conflict};
        }
        auto e = entry;
        auto p = store::pausesOf(r[0]);
        e.targetId = std::to_string(p[0].destinationId);
        if (pausing) {
          e.detail["since"] = p[0].pausedAt;
          e.detail["by"] = p[0].pausedBy;
          e.detail["reasons"] = p[0].reasons.size();
        }
        return d.audit.statement(e);
      });
      runTransaction(l->conn(), std::move(steps), [&d, l, interface, destination,
                                                   pausing = reason.has_value(),
                                                   respond](Result<Results> r) {
        if (!r) return respond(actionError(r.error()));
        std::optional<PauseInfo> pause;
        if (pausing) {
          auto p = store::pausesOf((*r)[0]).at(0);
          PauseInfo info{p.pausedAt, p.pausedBy, {}};
          for (auto& x : p.reasons) info.reasons.push_back({x.at, x.by, x.reason});
          pause = std::move(info);
        }
        if (auto s = d.engine->setPaused(interface, destination, pause); !s)
          return respond(actionError(s.error()));
        respond(jsonOk(200, {{"interface", interface},
                             {"destination", destination},
                             {"paused", pauseJson(pause)}}));
      });
    });
  });
}

void pause(Deps& d, const ApiRequest& req, ApiRespond respond) {
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto reason = stringField(*body, "reason");
  if (!reason || reason->find_first_not_of(" \t\r\n") == std::string::npos)
    return respond(jsonError(400, "invalid", "give {\"reason\": why the destination is paused}"));
  if (reason->size() > kMaxReasonBytes)
    return respond(jsonError(
        400, "invalid", "the reason is longer than " + std::to_string(kMaxReasonBytes) + " bytes"));
  changePause(d, req, std::move(respond), std::move(*reason));
}

void resume(Deps& d, const ApiRequest& req, ApiRespond respond) {
  changePause(d, req, std::move(respond), std::nullopt);
}

// ---- restart ------------------------------------------------------------------

void restart(Deps& d, const ApiRequest& req, ApiRespond respond) {
  std::string name = req.params.at("name");
  auto entry = auditEntryFor(*req.caller, "interface.restart");
  entry.targetKind = "interface";
  entry.targetName = name;
  findInEngine(*d.engine, name, std::nullopt, respond,
               [&d, name, entry, respond](const InterfaceInfo& f) {
                 if (f.state != "stopped")
                   return respond(jsonError(409, "conflict",
                                            "interface " + name +
                                                " is running; only an interface runaways "
                                                "stopped is restarted"));
                 // No row changes: the audit row first, or no restart.
                 d.audit.write(entry, [&d, name, respond](Status s) {
                   if (!s)
                     return respond(jsonError(503, "unavailable",
                                              "the audit log can't be written: " +
                                                  s.error().message));
                   d.engine->restartInterface(name, [name, respond](Status s) {
                     if (!s) return respond(actionError(s.error()));
                     respond(jsonOk(200, {{"interface", name}, {"state", "running"}}));
                   });
                 });
               });
}

// ---- stop / start an interface's intake ---------------------------------------

// The stop's row and its audit row in one transaction, as a pause's; the
// source closes (or opens) after the commit, so a refused audit leaves it
// as it was. Stopped again, or started while running: 409, from the row
// (resume's rule): the first stop's time, author and reason stay.
void changeIntake(Deps& d, const ApiRequest& req, ApiRespond respond, bool stopping,
                  std::optional<std::string> reason) {
  std::string interface = req.params.at("name");
  auto entry = auditEntryFor(
      *req.caller, stopping ? AuditAction("interface.stop") : AuditAction("interface.start"));
  entry.targetKind = "interface";
  entry.targetName = interface;
  if (reason) entry.detail["reason"] = *reason;
  std::string by = req.caller->name;
  findInEngine(
      *d.engine, interface, std::nullopt, respond,
      [&d, interface, stopping, reason, by, entry, respond](const InterfaceInfo& f) {
        // Routes fill an internal interface: stopping it is pausing the
        // destinations that route to it, which says where the messages wait.
        if (f.source == "internal")
          return respond(jsonError(409, "conflict",
                                   "interface " + interface +
                                       " has no intake of its own (source: internal); pause the "
                                       "destinations that route to it"));
        withConnection(
            d.pool, respond, [&d, interface, stopping, reason, by, entry, respond](LeasePtr l) {
              auto change = stopping ? store::stopInterfaceSql(interface, by, reason)
                                     : store::startInterfaceSql(interface);
              std::vector<TxStep> steps;
              steps.push_back(fixedStep({change.sql, change.params}));
              steps.push_back(
                  [&d, entry, interface, stopping](const Results& r) -> Result<SqlStatement> {
                    if (r[0].rows() == 0)
                      return Error{"the intake of interface " + interface +
                                       (stopping ? " is stopped already" : " is not stopped"),
                                   ErrorKind::Conflict};
                    auto e = entry;
                    auto s = store::stopsOf(r[0]).at(0);
                    // A start says which stop it ended.
                    e.detail["since"] = s.stoppedAt;
                    e.detail["by"] = s.stoppedBy;
                    if (!stopping && s.reason) e.detail["reason"] = *s.reason;
                    return d.audit.statement(e);
                  });
              runTransaction(l->conn(), std::move(steps),
                             [&d, l, interface, stopping, respond](Result<Results> r) {
                               if (!r) return respond(actionError(r.error()));
                               std::optional<IntakeStopInfo> stop;
                               if (stopping) {
                                 auto s = store::stopsOf((*r)[0]).at(0);
                                 stop = IntakeStopInfo{s.stoppedAt, s.stoppedBy, s.reason};
                               }
                               if (auto s = d.engine->setIntakeStopped(interface, stop); !s)
                                 return respond(actionError(s.error()));
                               respond(jsonOk(200, {{"interface", interface},
                                                    {"intakeStopped", intakeStopJson(stop)}}));
                             });
            });
      });
}

void stopIntake(Deps& d, const ApiRequest& req, ApiRespond respond) {
  std::optional<std::string> reason;
  if (!req.http.body.empty()) {
    auto body = bodyObject(req);
    if (!body) return respond(errorResponse(body.error()));
    if (auto it = body->find("reason"); it != body->end() && !it->is_null()) {
      if (!it->is_string()) return respond(jsonError(400, "invalid", "`reason` is a string"));
      std::string r = it->get<std::string>();
      if (r.size() > kMaxReasonBytes)
        return respond(
            jsonError(400, "invalid",
                      "the reason is longer than " + std::to_string(kMaxReasonBytes) + " bytes"));
      if (r.find_first_not_of(" \t\r\n") != std::string::npos) reason = std::move(r);
    }
  }
  changeIntake(d, req, std::move(respond), true, std::move(reason));
}

void startIntake(Deps& d, const ApiRequest& req, ApiRespond respond) {
  changeIntake(d, req, std::move(respond), false, std::nullopt);
}

// ---- drain --------------------------------------------------------------------

void answerDrainStatus(Deps& d, ApiRespond respond) {
  d.engine->drainStatus([respond](Result<DrainInfo> r) {
    if (!r) return respond(actionError(r.error()));
    respond(jsonOk(200, drainJson(*r)));
  });
}

void startDrain(Deps& d, const ApiRequest& req, ApiRespond respond) {
  bool stop = false;
  if (!req.http.body.empty()) {
    auto body = bodyObject(req);
    if (!body) return respond(errorResponse(body.error()));
    if (auto it = body->find("stop"); it != body->end() && !it->is_null()) {
      if (!it->is_boolean())
        return respond(jsonError(400, "invalid", "`stop` is true or false"));
      stop = it->get<bool>();
    }
  }
  if (d.engine->state() == EngineState::Stopping)
    return respond(jsonError(409, "conflict", "the engine is stopping"));
  auto entry = auditEntryFor(*req.caller, "engine.drain");
  entry.targetKind = "engine";
  entry.detail["stop"] = stop;
  d.audit.write(entry, [&d, stop, respond](Status s) {
    if (!s)
      return respond(
          jsonError(503, "unavailable", "the audit log can't be written: " + s.error().message));
    if (auto started = d.engine->startDrain(stop); !started)
      return respond(actionError(started.error()));
    answerDrainStatus(d, respond);
  });
}

void stopDrain(Deps& d, const ApiRequest& req, ApiRespond respond) {
  if (d.engine->state() != EngineState::Draining)
    return respond(jsonError(409, "conflict", "the engine is not draining"));
  auto entry = auditEntryFor(*req.caller, "engine.undrain");
  entry.targetKind = "engine";
  d.audit.write(entry, [&d, respond](Status s) {
    if (!s)
      return respond(
          jsonError(503, "unavailable", "the audit log can't be written: " + s.error().message));
    if (auto stopped = d.engine->stopDrain(); !stopped) return respond(actionError(stopped.error()));
    answerDrainStatus(d, respond);
  });
}

void drainStatus(Deps& d, const ApiRequest&, ApiRespond respond) {
  answerDrainStatus(d, std::move(respond));
}

// ---- schemas ------------------------------------------------------------------

constexpr const char* kPauseAnswer = R"({"type":"object","required":["interface","destination","paused"],
"properties":{"interface":{"type":"string"},"destination":{"type":"string"},
"paused":{"type":["object","null"],"description":"null: resumed",
"properties":{"since":{"type":"string","format":"date-time"},"by":{"type":"string"},
"reasons":{"type":"array","items":{"type":"object","properties":{
"at":{"type":"string","format":"date-time"},"by":{"type":"string"},"reason":{"type":"string"}}}}}}}})";

constexpr const char* kIntakeAnswer = R"({"type":"object","required":["interface","intakeStopped"],
"properties":{"interface":{"type":"string"},
"intakeStopped":{"type":["object","null"],"description":"null: its intake takes messages again",
"required":["since","by","reason"],
"properties":{"since":{"type":"string","format":"date-time"},"by":{"type":"string"},
"reason":{"type":["string","null"]}}}}})";

constexpr const char* kDrainAnswer = R"({"type":"object",
"required":["draining","stopWhenDrained","storesInFlight","pending","drained"],
"properties":{"draining":{"type":"boolean"},
"stopWhenDrained":{"type":"boolean","description":"the engine exits once drained"},
"storesInFlight":{"type":"integer","description":"messages being stored now"},
"pending":{"type":"integer","description":"deliveries pending for this engine's unpaused destinations of running interfaces"},
"drained":{"type":"boolean","description":"draining, no store in flight and nothing pending"}}})";

}  // namespace

std::vector<Route> engineActionRoutes(AuthDeps* auth, EngineView* engine) {
  // Shared by the handlers, which outlive this call; null for the document.
  std::shared_ptr<Deps> d;
  if (auth && engine) d = std::make_shared<Deps>(Deps{engine, auth->pool, auth->audit});
  auto bind = [d](void (*fn)(Deps&, const ApiRequest&, ApiRespond)) {
    return bindHandler(d, fn, "no engine behind this API");
  };
  auto route = [](std::string method, std::string path, std::string id, std::string summary,
                  Requirement req, ApiHandler h, std::string in, std::string out) {
    return Route{std::move(method), std::move(path), std::move(id), std::move(summary),
                 "engine",          req,             std::move(h),  std::move(in),
                 std::move(out),    {}};
  };
  std::vector<Route> routes;
  routes.push_back(route(
      "POST", "/api/v1/interfaces/{name}/destinations/{destination}/pause", "pauseDestination",
      "Hold a destination's deliveries until it is resumed (kept across restarts); pausing "
      "again adds a reason",
      Requirement::toChange(Role::Operator), bind(pause),
      R"({"type":"object","required":["reason"],"properties":{"reason":{"type":"string","minLength":1,"maxLength":1000}}})",
      kPauseAnswer));
  routes.push_back(route("POST", "/api/v1/interfaces/{name}/destinations/{destination}/resume",
                         "resumeDestination", "Deliver to a paused destination again",
                         Requirement::toChange(Role::Operator), bind(resume), {}, kPauseAnswer));
  routes.push_back(route(
      "POST", "/api/v1/interfaces/{name}/restart", "restartInterface",
      "Load a stopped interface's code again from disk and deliver what waited (409 while it "
      "runs, 422 when the code does not load)",
      Requirement::toChange(Role::Operator), bind(restart), {},
      R"({"type":"object","properties":{"interface":{"type":"string"},"state":{"enum":["running"]}}})"));
  routes.push_back(
      route("POST", "/api/v1/interfaces/{name}/stop", "stopInterfaceIntake",
            "Stop an interface's intake (kept across restarts): an MLLP listener closes, an HTTP "
            "source answers 503, a file or schedule source stops polling; what it stored is still "
            "delivered. 409 when stopped already, or for an internal source",
            Requirement::toChange(Role::Operator), bind(stopIntake),
            R"({"type":"object","properties":{"reason":{"type":"string","maxLength":1000}}})",
            kIntakeAnswer));
  routes.push_back(route("POST", "/api/v1/interfaces/{name}/start", "startInterfaceIntake",
                         "Open a stopped interface's intake again (409 when it is not stopped)",
                         Requirement::toChange(Role::Operator), bind(startIntake), {},
                         kIntakeAnswer));
  routes.push_back(route(
      "POST", "/api/v1/engine/drain", "startDrain",
      "Close every intake gate and let the queues empty out; with stop, exit once drained",
      Requirement::toChange(Role::Operator), bind(startDrain),
      R"({"type":"object","properties":{"stop":{"type":"boolean","description":"exit once drained; default false"}}})",
      kDrainAnswer));
  routes.push_back(route("DELETE", "/api/v1/engine/drain", "stopDrain",
                         "End a drain: the gates open again", Requirement::toChange(Role::Operator),
                         bind(stopDrain), {}, kDrainAnswer));
  routes.push_back(route("GET", "/api/v1/engine/drain", "getDrain",
                         "Whether the engine drains, and whether it is drained",
                         Requirement::toRead(Role::Viewer), bind(drainStatus), {}, kDrainAnswer));
  return routes;
}

}  // namespace ductus::api
