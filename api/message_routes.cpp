#include "api/message_routes.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <set>

#include "api/auth/handler_support.h"
#include "schema/message_actions.h"
#include "schema/message_pages.h"

namespace ductus::api {

std::optional<int64_t> positiveId(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

nlohmann::json orNull(const std::optional<std::string>& s) {
  return s ? nlohmann::json(*s) : nlohmann::json();
}

namespace {

using json = nlohmann::json;

using Deps = MessageDeps;

constexpr int64_t kQuarantineLimitDefault = 100;
constexpr int64_t kQuarantineLimitMax = 500;

net::HttpResponse answerError(const Error& e) { return errorResponse(e); }

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

  store::quarantinePage(
      d.pool, *before, n, iface,
      [respond, n](Result<std::vector<store::QuarantinedDelivery>> r) {
        if (!r) return respond(errorResponse(r.error()));
        json items = json::array();
        std::set<int64_t> messages;
        for (auto& q : *r) {
          messages.insert(q.messageId);
          items.push_back({{"messageId", q.messageId},
                           {"interface", q.interface},
                           {"destination", q.destination},
                           {"receivedAt", q.receivedAt},
                           {"attempts", q.attempts},
                           {"lastError", orNull(q.lastError)},
                           {"updatedAt", orNull(q.updatedAt)}});
        }
        json next = static_cast<int64_t>(messages.size()) == n ? json(*messages.begin()) : json();
        respond(jsonOk(200, {{"items", items}, {"next", next}}));
      });
}

// ---- POST /api/v1/messages/{id}/resend, POST /api/v1/messages/resend --------

// Deliveries go back to pending in place with their attempts kept: the
// count is the delivery's history (the quarantine list shows it), and a
// delivery that gave up after max_attempts gets one more try, not another
// hour of retries against a destination that may still be down; the
// operator resends again if it fails again. Store::resend keeps them too.
// An optional `reason` (why these go again, e.g. "lab asked for a replay"):
// a string of at most kMaxReasonBytes, kept in the audit row.
Result<std::optional<std::string>> resendReason(const json& body) {
  auto it = body.find("reason");
  if (it == body.end() || it->is_null()) return std::optional<std::string>{};
  if (!it->is_string()) return Error{"`reason` must be a string", ErrorKind::Invalid};
  auto text = it->get<std::string>();
  if (text.size() > kMaxReasonBytes)
    return Error{"the reason is longer than " + std::to_string(kMaxReasonBytes) + " bytes",
                 ErrorKind::Invalid};
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return std::optional<std::string>{};
  return std::optional<std::string>(std::move(text));
}

void resend(Deps& d, const Caller& caller, std::vector<int64_t> ids,
            std::optional<std::vector<std::string>> destinations, std::optional<std::string> reason,
            bool batch, ApiRespond respond) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  auto entry = auditEntryFor(caller, "message.resend");
  entry.targetKind = "message";
  std::string target;
  for (int64_t id : ids) target += (target.empty() ? "" : ",") + std::to_string(id);
  entry.targetId = target;
  if (reason) entry.detail["reason"] = *reason;
  auto audit = [&d, entry, destinations, batch](const store::Resent& x) -> Result<SqlStatement> {
    auto e = entry;
    json resent = json::array();
    for (auto& r : x.deliveries)
      resent.push_back({{"messageId", r.messageId}, {"destination", r.destination}});
    e.detail["destinations"] = destinations ? json(*destinations) : json("quarantined");
    e.detail["deliveries"] = static_cast<int64_t>(x.deliveries.size());
    e.detail["messages"] = x.messagesResent;
    e.detail["resent"] = resent;
    if (!batch && !x.messages.empty()) e.targetName = x.messages[0].interface;
    return d.audit.statement(e);
  };
  store::resendMessages(
      d.pool, std::move(ids), std::move(destinations), audit,
      [&d, respond](Result<store::Resent> r) {
        if (!r) return respond(answerError(r.error()));
        json resent = json::array();
        std::set<std::string> woken;
        for (auto& x : r->deliveries) {
          resent.push_back({{"messageId", x.messageId},
                            {"interface", x.interface},
                            {"destination", x.destination}});
          woken.insert(x.interface);
        }
        // After the commit: a loop woken sooner could read before the rows
        // are pending and sleep again.
        if (d.engine)
          for (auto& name : woken) d.engine->wake(name);
        respond(jsonOk(200, {{"deliveries", static_cast<int64_t>(r->deliveries.size())},
                             {"messages", r->messagesResent},
                             {"resent", resent}}));
      });
}

void resendOne(Deps& d, const ApiRequest& req, ApiRespond respond) {
  auto id = positiveId(req.params.at("id"));
  if (!id) return respond(jsonError(400, "invalid", "the message id must be a positive integer"));
  auto body = optionalBody(req);
  if (!body) return respond(errorResponse(body.error()));
  auto dests = destinationsField(*body);
  if (!dests) return respond(errorResponse(dests.error()));
  auto reason = resendReason(*body);
  if (!reason) return respond(errorResponse(reason.error()));
  resend(d, *req.caller, {*id}, std::move(*dests), std::move(*reason), false, std::move(respond));
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
  auto reason = resendReason(*body);
  if (!reason) return respond(errorResponse(reason.error()));
  resend(d, *req.caller, std::move(ids), std::move(*dests), std::move(*reason), true,
         std::move(respond));
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
  auto audit = [&d, entry](const store::Dismissed& x) -> Result<SqlStatement> {
    auto e = entry;
    e.targetName = x.interface;
    e.detail["destinations"] = x.destinations;
    e.detail["deliveries"] = static_cast<int64_t>(x.destinations.size());
    if (x.messageStatus) e.detail["messageStatus"] = static_cast<int>(*x.messageStatus);
    return d.audit.statement(e);
  };
  store::dismissMessage(
      d.pool, *id, why, audit, [respond](Result<store::Dismissed> r) {
        if (!r) return respond(answerError(r.error()));
        respond(jsonOk(200, {{"messageId", r->messageId},
                             {"interface", r->interface},
                             {"deliveries", static_cast<int64_t>(r->destinations.size())},
                             {"destinations", r->destinations},
                             {"messageStatus", store::statusName(r->messageStatus.value_or(
                                                   store::MessageStatus::Duplicate))}}));
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
    R"("description":"these destinations whatever they ended as; default: the quarantined ones"},)"
    R"("reason":{"type":"string","maxLength":1000,"description":"why they go again, kept in the audit row"})";

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
