#include "api/message_routes.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <set>

#include "api/auth/handler_support.h"
#include "schema/pg_error.h"

namespace ductus::api {
namespace {

using json = nlohmann::json;
using store::PgResult;
using LeasePtr = store::PgPool::LeasePtr;
using Results = std::vector<PgResult>;

using Deps = MessageDeps;

constexpr size_t kMaxReasonBytes = 1000;
constexpr int64_t kQuarantineLimitDefault = 100;
constexpr int64_t kQuarantineLimitMax = 500;

net::HttpResponse answerError(const Error& e) { return errorResponse(e); }

std::string isoTime(const std::string& column) {
  return "to_char(" + column + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";
}

// Postgres array literals, as text parameters.
std::string intArray(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "}";
}
std::string textArray(const std::vector<std::string>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += '"';
    for (char c : v[i]) {
      if (c == '"' || c == '\\') s += '\\';
      s += c;
    }
    s += '"';
  }
  return s + "}";
}

std::optional<int64_t> positiveId(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

// The request's body as an object; an empty body is an empty object (the
// body of a plain resend is optional).
Result<json> optionalBody(const ApiRequest& req) {
  if (req.http.body.empty()) return json::object();
  return bodyObject(req);
}

// `destinations`: absent (nullopt: the quarantined ones) or a non-empty
// list of names.
Result<std::optional<std::vector<std::string>>> destinationsField(const json& body) {
  auto it = body.find("destinations");
  if (it == body.end() || it->is_null()) return std::optional<std::vector<std::string>>{};
  if (!it->is_array() || it->empty())
    return Error{"`destinations` must be a non-empty list of destination names",
                 ErrorKind::Invalid};
  std::set<std::string> names;
  for (auto& v : *it) {
    if (!v.is_string() || v.get<std::string>().empty())
      return Error{"`destinations` must be a list of destination names", ErrorKind::Invalid};
    names.insert(v.get<std::string>());
  }
  return std::optional<std::vector<std::string>>(
      std::vector<std::string>(names.begin(), names.end()));
}

// Locks the messages' rows in id order before their deliveries change, as
// Store::resend and settle do, so a settle running beside this sees the
// change instead of overwriting it. Columns: id, interface name.
SqlStatement lockMessages(const std::vector<int64_t>& ids) {
  return {
      "SELECT m.id, i.name FROM messages m JOIN interfaces i ON i.id = m.interface_id "
      "WHERE m.id = ANY ($1::int8[]) ORDER BY m.id FOR UPDATE OF m",
      {intArray(ids)}};
}

// Every id was found, or the not_found naming those that were not.
Status allFound(const std::vector<int64_t>& ids, const PgResult& locked) {
  std::set<int64_t> found;
  for (int i = 0; i < locked.rows(); ++i) found.insert(locked.integer(i, 0));
  std::string missing;
  for (int64_t id : ids)
    if (!found.count(id)) missing += (missing.empty() ? "" : ", ") + std::to_string(id);
  if (missing.empty()) return {};
  return Error{"no message " + missing, ErrorKind::NotFound};
}

// A delivery flush updates its row before its message, this file the
// message before its rows (the order settle needs): the two can deadlock,
// and Postgres ends one of them. The store retries its side; this retries
// ours, from BEGIN, rather than answer 503 for a race the caller can't see.
void runRetried(LeasePtr l, std::vector<TxStep> steps, TxDone done, int tries = 3) {
  runTransaction(l->conn(), steps, [l, steps, done, tries](Result<Results> r) mutable {
    if (!r && tries > 1 && store::pg::retryable(r.error()))
      return runRetried(l, std::move(steps), std::move(done), tries - 1);
    done(std::move(r));
  });
}

}  // namespace

SqlStatement quarantineSelect(std::optional<int64_t> before, int64_t limit,
                              const std::optional<std::string>& interface) {
  // A page is `limit` messages (all their quarantined deliveries), so the
  // next page, before the last message's id, never cuts a message in two.
  // Conditions are added only when asked for: an "IS NULL OR" would keep
  // the planner from the partial index. The interface's destinations are
  // an ARRAY (computed once), so their filter is checked in the index.
  std::vector<store::Param> params{std::to_string(limit)};
  std::string where = "d.status = 3";
  if (before) {
    params.push_back(std::to_string(*before));
    where += " AND d.message_id < $" + std::to_string(params.size()) + "::int8";
  }
  if (interface) {
    params.push_back(*interface);
    where +=
        " AND d.destination_id = ANY (ARRAY(SELECT dst.id FROM destinations dst "
        "JOIN interfaces i ON i.id = dst.interface_id WHERE i.name = $" +
        std::to_string(params.size()) + "))";
  }
  std::string sql =
      "WITH page AS MATERIALIZED (SELECT DISTINCT d.message_id FROM deliveries d WHERE " + where +
      " ORDER BY d.message_id DESC LIMIT $1::int8) "
      "SELECT d.message_id, i.name, dst.name, " +
      isoTime("d.received_at") + ", d.attempts, d.last_error, " + isoTime("d.updated_at") +
      " FROM page p JOIN deliveries d ON d.message_id = p.message_id AND " + where +
      " JOIN destinations dst ON dst.id = d.destination_id "
      "JOIN interfaces i ON i.id = dst.interface_id "
      "ORDER BY d.message_id DESC, i.name, dst.name";
  return {sql, params};
}

namespace {

// ---- GET /api/v1/quarantine -------------------------------------------------

void listQuarantine(Deps& d, const ApiRequest& req, ApiRespond respond) {
  auto before = positiveQuery(req, "before");
  if (!before) return respond(errorResponse(before.error()));
  auto limit = positiveQuery(req, "limit");
  if (!limit) return respond(errorResponse(limit.error()));
  int64_t n = limit->value_or(kQuarantineLimitDefault);
  if (n < 1 || n > kQuarantineLimitMax)
    return respond(
        jsonError(400, "invalid", "`limit` must be 1 to " + std::to_string(kQuarantineLimitMax)));
  std::optional<std::string> iface;
  if (auto it = req.query.find("interface"); it != req.query.end()) iface = it->second;

  auto q = quarantineSelect(*before, n, iface);
  withConnection(d.pool, respond, [q, respond, n](LeasePtr l) {
    l->conn().query(q.sql, q.params, [l, respond, n](Result<PgResult> r) {
      if (!r) return respond(errorResponse(r.error()));
      json items = json::array();
      std::set<int64_t> messages;
      for (int i = 0; i < r->rows(); ++i) {
        int64_t id = r->integer(i, 0);
        messages.insert(id);
        items.push_back(
            {{"messageId", id},
             {"interface", std::string(r->text(i, 1))},
             {"destination", std::string(r->text(i, 2))},
             {"receivedAt", std::string(r->text(i, 3))},
             {"attempts", r->integer(i, 4)},
             {"lastError", r->isNull(i, 5) ? json() : json(std::string(r->text(i, 5)))},
             {"updatedAt", r->isNull(i, 6) ? json() : json(std::string(r->text(i, 6)))}});
      }
      json next = static_cast<int64_t>(messages.size()) == n ? json(*messages.begin()) : json();
      respond(jsonOk(200, {{"items", items}, {"next", next}}));
    });
  });
}

// ---- POST /api/v1/messages/{id}/resend, POST /api/v1/messages/resend --------

// Deliveries go back to pending in place with their attempts kept: the
// count is the delivery's history (the quarantine list shows it), and a
// delivery that gave up after max_attempts gets one more try, not another
// hour of retries against a destination that may still be down; the
// operator resends again if it fails again. Store::resend keeps them too.
void resend(Deps& d, const Caller& caller, std::vector<int64_t> ids,
            std::optional<std::vector<std::string>> destinations, bool batch, ApiRespond respond) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  auto entry = auditEntryFor(caller, "message.resend");
  entry.targetKind = "message";
  std::string target;
  for (int64_t id : ids) target += (target.empty() ? "" : ",") + std::to_string(id);
  entry.targetId = target;
  withConnection(d.pool, respond, [&d, ids, destinations, batch, entry, respond](LeasePtr l) {
    std::vector<TxStep> steps;
    steps.push_back(fixedStep(lockMessages(ids)));
    steps.push_back([ids, destinations](const Results& r) -> Result<SqlStatement> {
      if (auto s = allFound(ids, r[0]); !s) return s.error();
      std::string sql =
          "UPDATE deliveries d SET status = 0, last_error = NULL, updated_at = now() "
          "FROM messages m, destinations dst "
          "WHERE m.id = ANY ($1::int8[]) AND d.message_id = m.id AND d.tier = m.tier "
          "AND d.received_at = m.received_at AND dst.id = d.destination_id ";
      std::vector<store::Param> params{intArray(ids)};
      if (destinations) {
        sql += "AND dst.name = ANY ($2::text[]) AND d.status <> 0 ";
        params.push_back(textArray(*destinations));
      } else {
        sql += "AND d.status = 3 ";
      }
      sql += "RETURNING d.message_id, dst.name";
      return SqlStatement{sql, params};
    });
    steps.push_back([destinations](const Results& r) -> Result<SqlStatement> {
      if (r[1].rows() == 0)
        return Error{destinations ? "no finished delivery to the named destinations (pending "
                                    "already, or no such destination)"
                                  : "no quarantined delivery to resend",
                     ErrorKind::NothingToChange};
      std::set<int64_t> changed;
      for (int i = 0; i < r[1].rows(); ++i) changed.insert(r[1].integer(i, 0));
      return SqlStatement{
          "UPDATE messages SET status = 0 WHERE id = ANY ($1::int8[]) AND status NOT IN (0, 4)",
          {intArray(std::vector<int64_t>(changed.begin(), changed.end()))}};
    });
    steps.push_back([&d, entry, destinations, batch](const Results& r) -> Result<SqlStatement> {
      auto e = entry;
      json resent = json::array();
      for (int i = 0; i < r[1].rows(); ++i)
        resent.push_back(
            {{"messageId", r[1].integer(i, 0)}, {"destination", std::string(r[1].text(i, 1))}});
      e.detail["destinations"] = destinations ? json(*destinations) : json("quarantined");
      e.detail["deliveries"] = r[1].rows();
      e.detail["messages"] = r[2].affected();
      e.detail["resent"] = resent;
      if (!batch && r[0].rows() > 0) e.targetName = std::string(r[0].text(0, 1));
      return d.audit.statement(e);
    });
    runRetried(l, std::move(steps), [&d, l, respond](Result<Results> r) {
      if (!r) return respond(answerError(r.error()));
      auto& rs = *r;
      std::map<int64_t, std::string> interfaceOf;
      for (int i = 0; i < rs[0].rows(); ++i)
        interfaceOf[rs[0].integer(i, 0)] = std::string(rs[0].text(i, 1));
      json resent = json::array();
      std::set<std::string> woken;
      for (int i = 0; i < rs[1].rows(); ++i) {
        int64_t id = rs[1].integer(i, 0);
        resent.push_back({{"messageId", id},
                          {"interface", interfaceOf[id]},
                          {"destination", std::string(rs[1].text(i, 1))}});
        woken.insert(interfaceOf[id]);
      }
      // After the commit: a loop woken sooner could read before the rows
      // are pending and sleep again.
      if (d.engine)
        for (auto& name : woken) d.engine->wake(name);
      respond(jsonOk(
          200, {{"deliveries", rs[1].rows()}, {"messages", rs[2].affected()}, {"resent", resent}}));
    });
  });
}

void resendOne(Deps& d, const ApiRequest& req, ApiRespond respond) {
  auto id = positiveId(req.params.at("id"));
  if (!id) return respond(jsonError(400, "invalid", "the message id must be a positive integer"));
  auto body = optionalBody(req);
  if (!body) return respond(errorResponse(body.error()));
  auto dests = destinationsField(*body);
  if (!dests) return respond(errorResponse(dests.error()));
  resend(d, *req.caller, {*id}, std::move(*dests), false, std::move(respond));
}

void resendMany(Deps& d, const ApiRequest& req, ApiRespond respond) {
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto it = body->find("ids");
  const std::string shape = "give {\"ids\": [1 to " + std::to_string(kMaxResendIds) +
                            " message ids], \"destinations\": [optional names]}";
  if (it == body->end() || !it->is_array() || it->empty() || it->size() > kMaxResendIds)
    return respond(jsonError(400, "invalid", shape));
  std::vector<int64_t> ids;
  for (auto& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0)
      return respond(jsonError(400, "invalid", shape));
    ids.push_back(v.get<int64_t>());
  }
  auto dests = destinationsField(*body);
  if (!dests) return respond(errorResponse(dests.error()));
  resend(d, *req.caller, std::move(ids), std::move(*dests), true, std::move(respond));
}

// ---- POST /api/v1/messages/{id}/dismiss -------------------------------------

// The message then settles as Store::settle would settle it (pending while
// any delivery is, else quarantined, else sent, else filtered): a message
// one destination sent stays sent when another's quarantine is dismissed,
// and a later settle can't disagree with what this wrote.
void dismiss(Deps& d, const ApiRequest& req, ApiRespond respond) {
  auto id = positiveId(req.params.at("id"));
  if (!id) return respond(jsonError(400, "invalid", "the message id must be a positive integer"));
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto reason = stringField(*body, "reason");
  if (!reason || reason->find_first_not_of(" \t\r\n") == std::string::npos)
    return respond(jsonError(400, "invalid", "give {\"reason\": why the message is dismissed}"));
  if (reason->size() > kMaxReasonBytes)
    return respond(jsonError(
        400, "invalid", "the reason is longer than " + std::to_string(kMaxReasonBytes) + " bytes"));
  const Caller& caller = *req.caller;
  std::string why = "dismissed by " + caller.name + ": " + *reason;
  auto entry = auditEntryFor(caller, "message.dismiss");
  entry.targetKind = "message";
  entry.targetId = std::to_string(*id);
  entry.detail["reason"] = *reason;
  withConnection(d.pool, respond, [&d, id = *id, why, entry, respond](LeasePtr l) {
    std::vector<TxStep> steps;
    steps.push_back(fixedStep(lockMessages({id})));
    steps.push_back([id, why](const Results& r) -> Result<SqlStatement> {
      if (auto s = allFound({id}, r[0]); !s) return s.error();
      return SqlStatement{
          "UPDATE deliveries d SET status = 2, last_error = $2, updated_at = now() "
          "FROM messages m, destinations dst "
          "WHERE m.id = $1::int8 AND d.message_id = m.id AND d.tier = m.tier "
          "AND d.received_at = m.received_at AND dst.id = d.destination_id AND d.status = 3 "
          "RETURNING dst.name",
          {std::to_string(id), why}};
    });
    steps.push_back([id](const Results& r) -> Result<SqlStatement> {
      if (r[1].rows() == 0)
        return Error{"the message has no quarantined delivery", ErrorKind::NothingToChange};
      return SqlStatement{
          "UPDATE messages m SET status = (SELECT CASE WHEN bool_or(d.status = 0) THEN 0 "
          "WHEN bool_or(d.status = 3) THEN 3 WHEN bool_or(d.status = 1) THEN 1 ELSE 2 END "
          "FROM deliveries d WHERE d.message_id = m.id AND d.tier = m.tier "
          "AND d.received_at = m.received_at) "
          "WHERE m.id = $1::int8 AND m.status <> 4 RETURNING m.status",
          {std::to_string(id)}};
    });
    steps.push_back([&d, entry](const Results& r) -> Result<SqlStatement> {
      auto e = entry;
      json names = json::array();
      for (int i = 0; i < r[1].rows(); ++i) names.push_back(std::string(r[1].text(i, 0)));
      e.targetName = std::string(r[0].text(0, 1));
      e.detail["destinations"] = names;
      e.detail["deliveries"] = r[1].rows();
      if (r[2].rows() > 0) e.detail["messageStatus"] = r[2].integer(0, 0);
      return d.audit.statement(e);
    });
    runRetried(l, std::move(steps), [l, id, respond](Result<Results> r) {
      if (!r) return respond(answerError(r.error()));
      auto& rs = *r;
      json names = json::array();
      for (int i = 0; i < rs[1].rows(); ++i) names.push_back(std::string(rs[1].text(i, 0)));
      static const char* kStatus[] = {"pending", "sent", "filtered", "quarantined", "duplicate"};
      long long s = rs[2].rows() > 0 ? rs[2].integer(0, 0) : 4;
      respond(jsonOk(200, {{"messageId", id},
                           {"interface", std::string(rs[0].text(0, 1))},
                           {"deliveries", rs[1].rows()},
                           {"destinations", names},
                           {"messageStatus", kStatus[s >= 0 && s <= 4 ? s : 4]}}));
    });
  });
}

// ---- schemas ------------------------------------------------------------------

constexpr const char* kQuarantinePage = R"({"type":"object","properties":{
"items":{"type":"array","items":{"type":"object","properties":{
"messageId":{"type":"integer"},"interface":{"type":"string"},"destination":{"type":"string"},
"receivedAt":{"type":"string"},"attempts":{"type":"integer"},
"lastError":{"type":["string","null"]},"updatedAt":{"type":["string","null"]}}}},
"next":{"type":["integer","null"],"description":"pass as `before` for the next page"}}})";

constexpr const char* kResendAnswer = R"({"type":"object","properties":{
"deliveries":{"type":"integer","description":"deliveries moved back to pending"},
"messages":{"type":"integer","description":"messages moved back to pending"},
"resent":{"type":"array","items":{"type":"object","properties":{
"messageId":{"type":"integer"},"interface":{"type":"string"},"destination":{"type":"string"}}}}}})";

constexpr const char* kDestinations =
    R"("destinations":{"type":"array","minItems":1,"items":{"type":"string"},)"
    R"("description":"these destinations whatever they ended as; default: the quarantined ones"})";

}  // namespace

std::vector<Route> messageRoutes(AuthDeps* auth, EngineView* engine) {
  // Shared by the handlers, which outlive this call; null for the document.
  std::shared_ptr<Deps> d;
  if (auth) d = std::make_shared<Deps>(Deps{*auth, engine, auth->pool, auth->audit});
  auto bind = [d](void (*fn)(Deps&, const ApiRequest&, ApiRespond)) {
    return bindHandler(d, fn, "no message store behind this API");
  };
  auto route = [](std::string method, std::string path, std::string id, std::string summary,
                  Requirement req, ApiHandler h, std::string in, std::string out,
                  std::map<std::string, std::string> query = {}) {
    return Route{
        std::move(method), std::move(path), std::move(id),  std::move(summary), "messages", req,
        std::move(h),      std::move(in),   std::move(out), std::move(query)};
  };
  std::vector<Route> routes;
  routes.push_back(
      route("GET", "/api/v1/quarantine", "listQuarantine",
            "Quarantined deliveries across interfaces, newest message first, paged by message id",
            Requirement::toRead(Role::Viewer), bind(listQuarantine), {}, kQuarantinePage,
            {{"before", "messages with a smaller id (the previous page's `next`)"},
             {"limit",
              "messages per page: 1-500 (default 100), each with all its quarantined "
              "deliveries"},
             {"interface", "only this interface's deliveries"}}));
  routes.push_back(route(
      "POST", "/api/v1/messages/{id}/resend", "resendMessage",
      "Move a message's quarantined (or named) deliveries back to pending, attempts kept",
      Requirement::toChange(Role::Operator), bind(resendOne),
      std::string(R"({"type":"object","properties":{)") + kDestinations + "}}", kResendAnswer));
  routes.push_back(route(
      "POST", "/api/v1/messages/resend", "resendMessages",
      "Resend up to 500 messages in one transaction", Requirement::toChange(Role::Operator),
      bind(resendMany),
      std::string(
          R"({"type":"object","required":["ids"],"properties":{)"
          R"("ids":{"type":"array","minItems":1,"maxItems":500,"items":{"type":"integer"}},)") +
          kDestinations + "}}",
      kResendAnswer));
  routes.push_back(route(
      "POST", "/api/v1/messages/{id}/dismiss", "dismissMessage",
      "Filter a message's quarantined deliveries, recording who dismissed them and why",
      Requirement::toChange(Role::Operator), bind(dismiss),
      R"({"type":"object","required":["reason"],"properties":{"reason":{"type":"string","minLength":1,"maxLength":1000}}})",
      R"({"type":"object","properties":{"messageId":{"type":"integer"},
"interface":{"type":"string"},"deliveries":{"type":"integer"},
"destinations":{"type":"array","items":{"type":"string"}},
"messageStatus":{"enum":["pending","sent","filtered","quarantined","duplicate"]}}})"));
  return routes;
}

}  // namespace ductus::api
