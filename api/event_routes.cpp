#include "api/event_routes.h"

#include <memory>

#include "api/auth/handler_support.h"
#include "common/event_log.h"
#include "common/time_text.h"
#include "schema/event_store.h"

namespace ductus::api {
namespace {

struct EventDeps {
  store::PgPool& pool;
};

// The kinds as the document lists them (common/event_log.h).
std::string eventKindsList() {
  std::string s;
  for (auto k : events::kKindNames) s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

std::string eventKindsEnum() {
  std::string s;
  for (auto k : events::kKindNames) s += (s.empty() ? "\"" : ",\"") + std::string(k) + "\"";
  return s;
}

std::string eventPageSchema() {
  return R"({
  "type": "object",
  "required": ["events", "next"],
  "properties": {
    "events": {
      "type": "array",
      "description": "newest first",
      "items": {
        "type": "object",
        "required": ["id", "at", "kind", "interface", "destination", "messageId", "detail"],
        "properties": {
          "id": {"type": "integer"},
          "at": {"type": "string", "format": "date-time"},
          "kind": {"enum": [)" +
         eventKindsEnum() + R"(]},
          "interface": {"type": ["string", "null"]},
          "destination": {"type": ["string", "null"]},
          "messageId": {"type": ["integer", "null"]},
          "detail": {"type": "string", "description": "what happened, at most 1,000 bytes"}
        }
      }
    },
    "next": {"type": ["integer", "null"], "description": "pass as `before` for the older page; null: none"}
  }
})";
}

std::optional<std::string> eventQueryText(const ApiRequest& req, const char* name) {
  auto it = req.query.find(name);
  if (it == req.query.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// The query's filters, or the 400 naming the parameter that is wrong.
Result<store::EventQuery> readEventQuery(const ApiRequest& req) {
  store::EventQuery q;
  if (auto kind = eventQueryText(req, "kind")) {
    if (!events::parseKind(*kind))
      return Error{"`kind` must be one of " + eventKindsList(), ErrorKind::Invalid};
    q.kind = *kind;
  }
  if (auto name = eventQueryText(req, "interface")) {
    if (name->size() > 200) return Error{"`interface` is at most 200 bytes", ErrorKind::Invalid};
    q.interface = *name;
  }
  auto since = timeQuery(req, "since");
  if (!since) return since.error();
  q.since = *since;
  auto before = positiveQuery(req, "before");
  if (!before) return before.error();
  if (*before && **before < 1) return Error{"`before` must be an event id", ErrorKind::Invalid};
  q.beforeId = *before;
  auto limit = positiveQuery(req, "limit");
  if (!limit) return limit.error();
  q.limit = limit->value_or(kEventPageDefault);
  if (q.limit < 1 || q.limit > kEventPageMax)
    return Error{"`limit` must be 1 to " + std::to_string(kEventPageMax), ErrorKind::Invalid};
  return q;
}

void listEvents(EventDeps& d, const ApiRequest& req, ApiRespond respond) {
  auto q = readEventQuery(req);
  if (!q) return respond(errorResponse(q.error()));
  int64_t limit = q->limit;
  store::readEvents(d.pool, *q, [respond, limit](Result<std::vector<store::EventRow>> rows) {
    if (!rows) return respond(errorResponse(rows.error()));
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (auto& e : *rows) {
      nlohmann::ordered_json row{
          {"id", e.id},           {"at", rfc3339(e.at)},    {"kind", e.kind},
          {"interface", nullptr}, {"destination", nullptr}, {"messageId", nullptr},
          {"detail", e.detail}};
      if (e.interface) row["interface"] = *e.interface;
      if (e.destination) row["destination"] = *e.destination;
      if (e.messageId) row["messageId"] = *e.messageId;
      out.push_back(std::move(row));
    }
    nlohmann::ordered_json next = nullptr;
    if (static_cast<int64_t>(rows->size()) == limit && !rows->empty()) next = rows->back().id;
    respond(jsonOk(200, nlohmann::ordered_json{{"events", std::move(out)}, {"next", next}}));
  });
}

}  // namespace

std::vector<Route> eventRoutes(AuthDeps* auth) {
  std::shared_ptr<EventDeps> d;
  if (auth) d = std::make_shared<EventDeps>(EventDeps{auth->pool});
  std::vector<Route> routes;
  routes.push_back(Route{
      "GET",
      "/api/v1/event-log",
      "listEvents",
      "The engine's events, newest first: AR refusals, deliveries given up after their "
      "retries, worker restarts, runaways, intake stops and starts, alerts fired and resolved "
      "(kept 30 days, at most 100,000 by default)",
      "engine",
      Requirement::toRead(Role::Viewer),
      bindHandler(d, listEvents, "no database behind this API"),
      "",
      eventPageSchema(),
      {{"kind", "only this kind: " + eventKindsList()},
       {"interface", "only this interface's"},
       {"since", "only events at or after this RFC 3339 time"},
       {"before", "only events with a smaller id (the previous page's `next`)"},
       {"limit", "events per page: 1-500 (default 100)"}}});
  return routes;
}

}  // namespace ductus::api
