#include "api/audit/audit_routes.h"

#include "api/auth/handler_support.h"

namespace ductus::api {
namespace {

using json = nlohmann::json;
using LeasePtr = store::PgPool::LeasePtr;

constexpr int64_t kPageDefault = 100;
constexpr int64_t kPageMax = 1000;
// An export answers in one response held in memory: 100,000 rows of ~300
// bytes is ~30 MB; a bigger log is exported in pieces with `after`.
constexpr int64_t kExportDefault = 10000;
constexpr int64_t kExportMax = 100000;

std::optional<std::string> queryText(const ApiRequest& req, const char* name) {
  auto it = req.query.find(name);
  if (it == req.query.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// The filters every listing shares, or the 400 to answer.
Result<AuditQuery> readQuery(const ApiRequest& req, int64_t limitDefault, int64_t limitMax) {
  AuditQuery q;
  q.actor = queryText(req, "actor");
  q.action = queryText(req, "action");
  for (auto [name, field] : {std::pair{"since", &q.since}, std::pair{"until", &q.until}}) {
    auto t = timeQuery(req, name);
    if (!t) return t.error();
    *field = *t;
  }
  auto before = positiveQuery(req, "before");
  if (!before) return before.error();
  q.beforeId = *before;
  auto after = positiveQuery(req, "after");
  if (!after) return after.error();
  q.afterId = *after;
  auto limit = positiveQuery(req, "limit");
  if (!limit) return limit.error();
  q.limit = limit->value_or(limitDefault);
  if (q.limit < 1 || q.limit > limitMax)
    return Error{"`limit` must be 1 to " + std::to_string(limitMax), ErrorKind::Invalid};
  return q;
}

// {items: [...], next: the `before` of the next page, or null}.
void answerPage(store::PgPool& pool, AuditQuery q, ApiRespond respond) {
  auto s = auditSelect(q);
  withConnection(pool, respond, [s, respond, limit = q.limit](LeasePtr l) {
    l->conn().query(s.sql, s.params, [l, respond, limit](Result<store::PgResult> r) {
      if (!r) return respond(errorResponse(r.error()));
      std::string body = "{\"items\":[";
      for (int i = 0; i < r->rows(); ++i) {
        if (i) body += ',';
        body += r->text(i, 1);
      }
      body += "],\"next\":";
      body += r->rows() == limit ? std::string(r->text(r->rows() - 1, 0)) : "null";
      body += '}';
      respond(jsonResponse(200, std::move(body)));
    });
  });
}

void exportNdjson(store::PgPool& pool, AuditLog& audit, const ApiRequest& req, AuditQuery q,
                  ApiRespond respond) {
  q.oldestFirst = true;
  q.beforeId.reset();
  auto e = auditEntryFor(*req.caller, "audit.export");
  e.targetKind = "audit";
  for (auto& [k, v] : req.query) e.detail["query"][k] = v;
  // The export's own row first: an export nobody can see happened is refused.
  audit.write(e, [&pool, q, respond](Status written) {
    if (!written)
      return respond(jsonError(503, "audit_unavailable",
                               "the export cannot be audited, so it is refused: " +
                                   written.error().message));
    auto s = auditSelect(q);
    withConnection(pool, respond, [s, respond, limit = q.limit](LeasePtr l) {
      l->conn().query(s.sql, s.params, [l, respond, limit](Result<store::PgResult> r) {
        if (!r) return respond(errorResponse(r.error()));
        net::HttpResponse resp;
        resp.headers.emplace_back("Content-Type", "application/x-ndjson");
        resp.headers.emplace_back("Cache-Control", "no-store");
        for (int i = 0; i < r->rows(); ++i) {
          resp.body += r->text(i, 1);
          resp.body += '\n';
        }
        // More rows may follow: the next export starts after the last one.
        if (r->rows() == limit)
          resp.headers.emplace_back("X-Ductus-Next-After", std::string(r->text(r->rows() - 1, 0)));
        respond(std::move(resp));
      });
    });
  });
}

constexpr const char* kPageSchema = R"({"type":"object","properties":{
"items":{"type":"array","items":{"type":"object","properties":{
"id":{"type":"integer"},"at":{"type":"string"},"actor":{"type":"string"},
"actorKind":{"enum":["user","token","system"]},"via":{"type":"string"},
"address":{"type":"string"},"action":{"type":"string"},
"target":{"type":"object","properties":{"kind":{"type":"string"},
"id":{"type":["string","null"]},"name":{"type":"string"}}},
"outcome":{"enum":["ok","denied","failed"]},"detail":{"type":"object"}}}},
"next":{"type":["integer","null"],"description":"pass as `before` for the next page"}}})";

}  // namespace

// The document's routes served anyway (a test serving allRoutes({})): an
// answer, not a null dereference.
static net::HttpResponse noStore() {
  return jsonError(503, "unavailable", "no accounts store behind this API");
}

std::vector<Route> auditRoutes(AuthDeps* d) {
  std::vector<Route> routes;
  routes.push_back(
      {"GET", "/api/v1/audit", "listAudit",
       "The audit log, newest first, paged by id; format=ndjson exports oldest first", "audit",
       Requirement::toRead(Role::Viewer, kAudit),
       [d](const ApiRequest& req, ApiRespond respond) {
         if (!d) return respond(noStore());
         store::PgPool* p = &d->pool;
         AuditLog* a = &d->audit;
         bool ndjson = req.query.count("format") && req.query.at("format") == "ndjson";
         if (req.query.count("format") && !ndjson && req.query.at("format") != "json")
           return respond(jsonError(400, "invalid", "`format` is json or ndjson"));
         auto q = ndjson ? readQuery(req, kExportDefault, kExportMax)
                         : readQuery(req, kPageDefault, kPageMax);
         if (!q) return respond(errorResponse(q.error()));
         if (ndjson) return exportNdjson(*p, *a, req, *q, std::move(respond));
         q->afterId.reset();
         answerPage(*p, *q, std::move(respond));
       },
       {}, kPageSchema,
       {{"before", "rows with a smaller id (the previous page's `next`)"},
        {"after", "ndjson: rows with a larger id (the previous export's X-Ductus-Next-After)"},
        {"limit", "rows per page: 1-1000 (default 100); ndjson 1-100000 (default 10000)"},
        {"actor", "only this actor"},
        {"action", "only this action, e.g. session.create"},
        {"since", "only rows at or after this RFC 3339 time"},
        {"until", "only rows before this RFC 3339 time"},
        {"format", "json (default) or ndjson"}}});
  routes.push_back(
      {"GET", "/api/v1/me/activity", "listMyActivity",
       "The caller's own audit rows, newest first, paged by id", "auth",
       Requirement::toRead(Role::Viewer),
       [d](const ApiRequest& req, ApiRespond respond) {
         if (!d) return respond(noStore());
         store::PgPool* p = &d->pool;
         auto q = readQuery(req, kPageDefault, kPageMax);
         if (!q) return respond(errorResponse(q.error()));
         q->afterId.reset();
         q->actor = req.caller->name;
         q->actorKind = req.caller->userId != 0 ? ActorKind::User : ActorKind::Token;
         answerPage(*p, *q, std::move(respond));
       },
       {}, kPageSchema,
       {{"before", "rows with a smaller id (the previous page's `next`)"},
        {"limit", "rows per page: 1-1000 (default 100)"},
        {"action", "only this action"},
        {"since", "only rows at or after this RFC 3339 time"},
        {"until", "only rows before this RFC 3339 time"}}});
  return routes;
}

}  // namespace ductus::api
