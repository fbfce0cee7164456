#include "api/retention_routes.h"

#include <memory>

#include "api/auth/handler_support.h"
#include "schema/retention.h"

namespace ductus::api {
namespace {

using json = nlohmann::ordered_json;
using store::PgResult;
using LeasePtr = store::PgPool::LeasePtr;
using Results = std::vector<PgResult>;

struct Deps {
  EngineView* engine;
  store::PgPool& pool;
  AuditLog& audit;
};

json optional(const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); }

json interfaceJson(const RetentionInterfaceInfo& f) {
  return {{"interface", f.interface},
          {"configured", f.configured},
          {"applied", f.applied},
          {"change", f.change},
          {"requestedAt", optional(f.requestedAt)},
          {"quarantined", f.quarantined}};
}

json retentionJson(const RetentionInfo& r) {
  json interfaces = json::array();
  for (auto& f : r.interfaces) interfaces.push_back(interfaceJson(f));
  json periods = json::array();
  for (auto& p : r.periods)
    periods.push_back({{"tier", p.tier},
                       {"from", p.from},
                       {"to", p.to},
                       {"dropsOn", p.dropsOn},
                       {"expired", p.expired},
                       {"messages", p.messages},
                       {"deliveries", p.deliveries},
                       {"bytes", p.bytes},
                       {"unfinished", p.unfinished},
                       {"detached", p.detached}});
  json held = nullptr;
  if (r.held)
    held = {{"pending", r.held->pending},   {"quarantined", r.held->quarantined},
            {"finished", r.held->finished}, {"deliveries", r.held->deliveries},
            {"bytes", r.held->bytes},       {"moved", r.held->moved}};
  json last = nullptr;
  if (r.lastRun)
    last = {{"at", r.lastRun->at},
            {"busy", r.lastRun->busy},
            {"dropped", r.lastRun->dropped},
            {"moved", r.lastRun->moved},
            {"dedupeKeysPurged", r.lastRun->dedupeKeysPurged},
            {"tierMoved", r.lastRun->tierMoved},
            {"tierDeleted", r.lastRun->tierDeleted},
            {"kept", r.lastRun->kept},
            {"failed", r.lastRun->failed}};
  return {{"interfaces", std::move(interfaces)},
          {"periods", std::move(periods)},
          {"held", std::move(held)},
          {"lastRun", std::move(last)}};
}

void getRetention(Deps& d, const ApiRequest&, ApiRespond respond) {
  d.engine->retention([respond](Result<RetentionInfo> r) {
    if (!r) return respond(errorResponse(r.error()));
    respond(jsonOk(200, retentionJson(*r)));
  });
}

void confirm(Deps& d, const ApiRequest& req, ApiRespond respond) {
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto interface = stringField(*body, "interface");
  auto tierText = stringField(*body, "tier");
  auto tier = tierText ? store::tierNamed(*tierText) : std::nullopt;
  if (!interface || interface->empty() || !tier)
    return respond(jsonError(400, "invalid",
                             "give {\"interface\": its name, \"tier\": \"1w\" | \"3w\" | \"7w\"}"));
  auto entry = auditEntryFor(*req.caller, "retention.confirm");
  entry.targetKind = "interface";
  entry.targetName = *interface;
  entry.detail["tier"] = *tierText;
  std::string name = *interface, wanted = *tierText;
  d.engine->retention([&d, name, wanted, tier = *tier, entry, respond](Result<RetentionInfo> r) {
    if (!r) return respond(errorResponse(r.error()));
    const RetentionInterfaceInfo* f = nullptr;
    for (auto& i : r->interfaces)
      if (i.interface == name) f = &i;
    if (!f)
      return respond(jsonError(404, "not_found", "this engine keeps no queued interface " + name));
    if (f->configured != wanted)
      return respond(jsonError(409, "conflict",
                               "the project asks for " + f->configured + " for " + name + ", not " +
                                   wanted + " (reload the page)"));
    // Confirmed meanwhile (the command line, another engine): this engine
    // follows; nothing more to write.
    if (f->applied == wanted) {
      if (auto s = d.engine->retentionConfirmed(name, wanted); !s)
        return respond(errorResponse(s.error()));
      return respond(jsonOk(200, interfaceJson(*f)));
    }
    if (f->change != "waiting")
      return respond(jsonError(409, "conflict",
                               name + " keeps its messages " + f->applied +
                                   " already; only a shorter tier waits for a confirmation"));
    auto e = entry;
    e.detail["from"] = f->applied;
    // What the row says once written: the tier applies, nothing waits.
    auto after = *f;
    after.applied = wanted;
    after.change = "none";
    after.requestedAt.reset();
    withConnection(d.pool, respond, [&d, name, wanted, tier, e, after, respond](LeasePtr l) {
      std::vector<TxStep> steps;
      steps.push_back(fixedStep(store::confirmTierStatement(name, tier)));
      steps.push_back([&d, e](const Results& r) -> Result<SqlStatement> {
        if (r[0].rows() == 0) return Error{"nothing to confirm", ErrorKind::Conflict};
        auto a = e;
        a.targetId = std::string(r[0].text(0, 0));
        return d.audit.statement(a);
      });
      runTransaction(l->conn(), std::move(steps),
                     [&d, l, name, wanted, after, respond](Result<Results> r) {
                       if (!r) return respond(errorResponse(r.error()));
                       if (auto s = d.engine->retentionConfirmed(name, wanted); !s)
                         return respond(errorResponse(s.error()));
                       respond(jsonOk(200, interfaceJson(after)));
                     });
    });
  });
}

constexpr const char* kInterfaceSchema = R"({"type":"object",
"required":["interface","configured","applied","change","requestedAt","quarantined"],
"properties":{"interface":{"type":"string"},
"configured":{"enum":["1w","3w","7w"],"description":"what the project asks for"},
"applied":{"enum":["1w","3w","7w"],"description":"where its new messages go"},
"change":{"enum":["none","new","lengthened","waiting"],"description":"waiting: a shorter tier waits for POST /retention/confirm"},
"requestedAt":{"type":["string","null"],"format":"date-time"},
"quarantined":{"enum":["keep","purge"],"description":"keep: held past their period; purge: go with it"}}})";

std::string retentionSchema() {
  return std::string(R"({"type":"object","required":["interfaces","periods","held","lastRun"],
"properties":{"interfaces":{"type":"array","items":)") +
         kInterfaceSchema + R"(},
"periods":{"type":"array","description":"every partition pair, by tier then period; held: a month of the held area","items":{"type":"object",
"required":["tier","from","to","dropsOn","expired","messages","deliveries","bytes","unfinished","detached"],
"properties":{"tier":{"enum":["1w","3w","7w","held"]},"from":{"type":"string","format":"date"},
"to":{"type":"string","format":"date"},"dropsOn":{"type":"string","format":"date"},
"expired":{"type":"boolean"},"messages":{"type":"integer","description":"estimate"},
"deliveries":{"type":"integer","description":"estimate"},"bytes":{"type":"integer"},
"unfinished":{"type":"integer","description":"expired periods: pending messages and deliveries and kept quarantined messages"},
"detached":{"type":"boolean","description":"an interrupted drop, finished by the next run"}}}},
"held":{"type":["object","null"],"description":"null before the first run",
"required":["pending","quarantined","finished","deliveries","bytes","moved"],"properties":{
"pending":{"type":"integer"},"quarantined":{"type":"integer"},"finished":{"type":"integer"},
"deliveries":{"type":"integer"},"bytes":{"type":"integer"},
"moved":{"type":"integer","description":"messages moved there since the engine started"}}},
"lastRun":{"type":["object","null"],
"required":["at","busy","dropped","moved","dedupeKeysPurged","tierMoved","tierDeleted","kept","failed"],"properties":{"at":{"type":"string","format":"date-time"},
"busy":{"type":"boolean","description":"another engine's run had the database"},
"dropped":{"type":"integer"},"moved":{"type":"integer"},"dedupeKeysPurged":{"type":"integer"},
"tierMoved":{"type":"integer","description":"stored messages brought to their interface's changed tier"},
"tierDeleted":{"type":"integer","description":"stored messages a shortened tier no longer keeps, deleted"},
"kept":{"type":"array","items":{"type":"string"}},"failed":{"type":"array","items":{"type":"string"}}}}}})";
}

}  // namespace

std::vector<Route> retentionRoutes(AuthDeps* auth, EngineView* engine) {
  std::shared_ptr<Deps> d;
  if (auth && engine) d = std::make_shared<Deps>(Deps{engine, auth->pool, auth->audit});
  auto bind = [d](void (*fn)(Deps&, const ApiRequest&, ApiRespond)) {
    return bindHandler(d, fn, "no engine behind this API");
  };
  std::vector<Route> routes;
  routes.push_back(Route{"GET",
                         "/api/v1/retention",
                         "getRetention",
                         "Each interface's retention, every partition with its drop date, the "
                         "held area and the last run",
                         "engine",
                         Requirement::toRead(Role::Viewer),
                         bind(getRetention),
                         "",
                         retentionSchema(),
                         {}});
  routes.push_back(Route{
      "POST",
      "/api/v1/retention/confirm",
      "confirmRetention",
      "Apply a shorter retention the project asks for (deletes messages sooner); 409 when the "
      "tier is not the project's or not shorter",
      "engine",
      Requirement::toChange(Role::Operator),
      bind(confirm),
      R"({"type":"object","required":["interface","tier"],"properties":{"interface":{"type":"string"},"tier":{"enum":["1w","3w","7w"]}}})",
      kInterfaceSchema,
      {}});
  return routes;
}

}  // namespace ductus::api
