#include "api/alert_routes.h"

#include <charconv>
#include <memory>

#include "api/auth/handler_support.h"
#include "common/config/duration.h"
#include "common/time_text.h"
#include "schema/alert_store.h"

namespace ductus::api {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

struct Deps {
  store::PgPool& pool;
  AuditLog& audit;
};

// How long a silence may be: shorter is noise, longer is forgetting the alert.
constexpr auto kMinSilence = std::chrono::minutes(1);
constexpr auto kMaxSilence = std::chrono::hours(24 * 30);

json timeJson(const std::optional<store::AlertTime>& t) {
  return t ? json(rfc3339(*t)) : json(nullptr);
}

json alertJson(const monitor::AlertState& a) {
  auto orNull = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  return {{"id", a.id},
          {"subject", a.subject.key()},
          {"interface", orNull(a.subject.interface)},
          {"destination", orNull(a.subject.destination)},
          {"certificate", orNull(a.subject.certificate)},
          {"phase", monitor::phaseName(a.phase)},
          {"state", monitor::stateName(a.state)},
          {"severity", monitor::severityName(a.severity)},
          {"openedAt", timeJson(a.openedAt)},
          {"changedAt", timeJson(a.changedAt)},
          {"acknowledgedAt", timeJson(a.acknowledgedAt)},
          {"acknowledgedBy", orNull(a.acknowledgedBy)},
          {"silencedUntil", timeJson(a.silencedUntil)},
          {"silencedBy", orNull(a.silencedBy)},
          {"told", a.told}};
}

// The {id} of the path: a positive integer, else the 400 to answer.
Result<int64_t> alertId(const ApiRequest& req) {
  const std::string& s = req.params.at("id");
  int64_t id = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
  if (ec != std::errc() || end != s.data() + s.size() || id <= 0)
    return Error{"the alert id is a positive integer", ErrorKind::Invalid};
  return id;
}

void list(Deps& d, const ApiRequest&, ApiRespond respond) {
  store::listAlerts(d.pool, [respond](Result<std::vector<store::AlertListItem>> r) {
    if (!r) return respond(errorResponse(r.error()));
    json alerts = json::array();
    for (auto& item : *r) {
      json a = alertJson(item.alert);
      json events = json::array();
      for (auto& e : item.events)
        events.push_back({{"at", rfc3339(e.at)},
                          {"change", e.change},
                          {"state", e.state},
                          {"severity", e.severity},
                          {"reason", e.reason}});
      a["events"] = std::move(events);
      alerts.push_back(std::move(a));
    }
    respond(jsonOk(200, {{"alerts", std::move(alerts)}}));
  });
}

// The audit row of an operator's change, made from the alert as changed.
store::AuditStatement<monitor::AlertState> auditOf(Deps& d, AuditEntry entry) {
  return [&d, entry](const monitor::AlertState& a) -> Result<store::SqlStatement> {
    auto e = entry;
    e.targetId = std::to_string(a.id);
    e.targetName = a.subject.key();
    e.detail["state"] = monitor::stateName(a.state);
    e.detail["severity"] = monitor::severityName(a.severity);
    return d.audit.statement(e);
  };
}

void answerChanged(const ApiRespond& respond, Result<monitor::AlertState> r) {
  if (!r) return respond(errorResponse(r.error()));
  respond(jsonOk(200, alertJson(*r)));
}

void acknowledge(Deps& d, const ApiRequest& req, ApiRespond respond) {
  auto id = alertId(req);
  if (!id) return respond(errorResponse(id.error()));
  auto entry = auditEntryFor(*req.caller, "alert.acknowledge");
  entry.targetKind = "alert";
  store::acknowledgeAlert(
      d.pool, *id, req.caller->name, auditOf(d, entry),
      [respond](Result<monitor::AlertState> r) { answerChanged(respond, std::move(r)); });
}

void silence(Deps& d, const ApiRequest& req, ApiRespond respond) {
  auto id = alertId(req);
  if (!id) return respond(errorResponse(id.error()));
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto text = stringField(*body, "for");
  std::optional<config::Duration> length;
  if (text) length = config::parseDuration(*text);
  if (!length || *length < kMinSilence || *length > kMaxSilence)
    return respond(
        jsonError(400, "invalid", "give {\"for\": how long} from 1m to 30d, e.g. \"2h\""));
  auto until = std::chrono::system_clock::now() +
               std::chrono::duration_cast<std::chrono::system_clock::duration>(*length);
  auto entry = auditEntryFor(*req.caller, "alert.silence");
  entry.targetKind = "alert";
  entry.detail["for"] = *text;
  entry.detail["until"] = rfc3339(until);
  store::silenceAlert(
      d.pool, *id, until, req.caller->name, auditOf(d, entry),
      [respond](Result<monitor::AlertState> r) { answerChanged(respond, std::move(r)); });
}

// ---- schemas ------------------------------------------------------------------

// One alert's properties, shared by the list's items and the POSTs' answers.
constexpr const char* kAlertProperties =
    R"("id":{"type":"integer"},
"subject":{"type":"string","description":"interface, interface/destination or certificate:name"},
"interface":{"type":["string","null"]},"destination":{"type":["string","null"]},
"certificate":{"type":["string","null"]},"phase":{"enum":["ok","firing","recovering"]},
"state":{"type":"string"},"severity":{"enum":["info","warning","critical"]},
"openedAt":{"type":["string","null"],"format":"date-time"},
"changedAt":{"type":["string","null"],"format":"date-time"},
"acknowledgedAt":{"type":["string","null"],"format":"date-time"},
"acknowledgedBy":{"type":["string","null"]},
"silencedUntil":{"type":["string","null"],"format":"date-time"},
"silencedBy":{"type":["string","null"]},
"told":{"type":"boolean","description":"a notification of this firing was made"})";

constexpr const char* kAlertRequired =
    R"("required":["id","subject","interface","destination","certificate","phase","state","severity","openedAt","changedAt","acknowledgedAt","acknowledgedBy","silencedUntil","silencedBy","told"])";

std::string alertSchema() {
  return std::string(R"({"type":"object",)") + kAlertRequired + R"(,"properties":{)" +
         kAlertProperties + "}}";
}

std::string listSchema() {
  return std::string(
             R"({"type":"object","required":["alerts"],"properties":{"alerts":{"type":"array","items":{"type":"object",)") +
         kAlertRequired + R"(,"properties":{)" + kAlertProperties +
         R"(,"events":{"type":"array","description":"the last changes, newest first","items":{"type":"object","required":["at","change","state","severity","reason"],"properties":{"at":{"type":"string","format":"date-time"},"change":{"type":"string"},"state":{"type":"string"},"severity":{"type":"string"},"reason":{"type":"string"}}}}}}}}})";
}

}  // namespace

std::vector<Route> alertRoutes(AuthDeps* auth) {
  std::shared_ptr<Deps> d;
  if (auth) d = std::make_shared<Deps>(Deps{auth->pool, auth->audit});
  auto bind = [d](void (*fn)(Deps&, const ApiRequest&, ApiRespond)) {
    return bindHandler(d, fn, "no database behind this API");
  };
  auto route = [](std::string method, std::string path, std::string id, std::string summary,
                  Requirement req, ApiHandler h, std::string in, std::string out) {
    return Route{std::move(method), std::move(path),
                 std::move(id),     std::move(summary),
                 "alerts",          req,
                 std::move(h),      std::move(in),
                 std::move(out),    {}};
  };
  std::vector<Route> routes;
  routes.push_back(route("GET", "/api/v1/alerts", "listAlerts",
                         "The alerts, firing and recovering first, each with its last changes",
                         Requirement::toRead(Role::Viewer), bind(list), {}, listSchema()));
  routes.push_back(route("POST", "/api/v1/alerts/{id}/acknowledge", "acknowledgeAlert",
                         "Acknowledge a firing alert: no more reminders for this firing",
                         Requirement::toChange(Role::Operator), bind(acknowledge), {},
                         alertSchema()));
  routes.push_back(route(
      "POST", "/api/v1/alerts/{id}/silence", "silenceAlert",
      "Silence a firing alert for a while (1m to 30d): no notifications until then",
      Requirement::toChange(Role::Operator), bind(silence),
      R"({"type":"object","required":["for"],"properties":{"for":{"type":"string","description":"how long: 30m, 2h, 1d","example":"2h"}}})",
      alertSchema()));
  return routes;
}

}  // namespace ductus::api
