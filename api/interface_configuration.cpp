#include "api/interface_configuration.h"

#include <cstdio>

#include "common/duration_text.h"

namespace ductus::api {
namespace {

using ojson = nlohmann::ordered_json;
using config::Duration;

ojson secretOrNull(const std::string& value) {
  return value.empty() ? ojson(nullptr) : ojson(kRedacted);
}

std::string dayMinute(int m) {
  char out[8];
  std::snprintf(out, sizeof out, "%02d:%02d", (m / 60) % 24, m % 60);
  return out;
}

std::string windowText(const monitor::DayWindow& w) {
  return dayMinute(w.startMinute) + "-" + dayMinute(w.endMinute);
}

std::string seconds(monitor::Seconds s) {
  return formatDuration(std::chrono::duration_cast<Duration>(s));
}

ojson listenerTlsJson(const std::optional<tls::ListenerTls>& t) {
  if (!t) return nullptr;
  // Names of certificates: entries (resources.yaml), never their PEM text.
  return {{"certificate", t->certificate},
          {"clientCa", t->clientCa.empty() ? ojson(nullptr) : ojson(t->clientCa)},
          {"clientSubjects", t->subjects}};
}

ojson connectTlsJson(const tls::ConnectTls& t) {
  if (!t.enabled) return nullptr;
  return {{"ca", t.ca.empty() ? ojson(nullptr) : ojson(t.ca)},
          {"certificate", t.certificate.empty() ? ojson(nullptr) : ojson(t.certificate)}};
}

ojson sftpServerJson(const sftp::ServerSettings& s) {
  ojson privateKey = nullptr;
  // A key file's path is where the key is, not the key; inline PEM is the
  // key itself.
  if (!s.privateKeyFile.empty())
    privateKey = {{"file", s.privateKeyFile.string()}};
  else if (!s.privateKeyPem.empty())
    privateKey = {{"inline", kRedacted}};
  ojson hostKey = s.knownHostsFile.empty() ? ojson{{"pinned", s.hostKeys.size()}}
                                           : ojson{{"knownHosts", s.knownHostsFile.string()}};
  return {{"host", s.host},
          {"port", s.port},
          {"user", s.user},
          {"password", secretOrNull(s.password)},
          {"privateKey", std::move(privateKey)},
          {"hostKey", std::move(hostKey)}};
}

ojson filesJson(const config::FileSelection& f) {
  return {{"path", f.path},
          {"pattern", f.pattern},
          {"split", f.split == config::Split::Records ? "records" : "none"},
          {"moveTo", f.moveTo.empty() ? ojson(nullptr) : ojson(f.moveTo)},
          {"delete", f.deleteAfter},
          {"poll", formatDuration(f.poll)}};
}

ojson sourceJson(const config::InterfaceConfig& c) {
  ojson s = {{"kind", config::sourceKind(c.source)}};
  if (auto* m = std::get_if<config::MllpSource>(&c.source)) {
    s["listen"] = m->listen.toString();
    s["tls"] = listenerTlsJson(m->tls);
    s["allow"] = m->allow.entries;
  } else if (auto* h = std::get_if<config::HttpSource>(&c.source)) {
    s["listen"] = h->listen.toString();
    s["path"] = h->path;
    s["mode"] = h->mode == config::HttpMode::Respond ? "respond" : "queue";
    s["tls"] = listenerTlsJson(h->tls);
    s["allow"] = h->allow.entries;
    if (h->mode == config::HttpMode::Respond) s["respond"] = c.respond;
  } else if (auto* f = std::get_if<config::FileSource>(&c.source)) {
    s["files"] = filesJson(f->files);
  } else if (auto* sf = std::get_if<config::SftpSource>(&c.source)) {
    s["server"] = sftpServerJson(sf->server);
    s["files"] = filesJson(sf->files);
  } else if (auto* sc = std::get_if<config::ScheduleSource>(&c.source)) {
    s["every"] = sc->every ? ojson(formatDuration(*sc->every)) : ojson(nullptr);
    s["cron"] = sc->cron.empty() ? ojson(nullptr) : ojson(sc->cron);
  }
  return s;
}

ojson behindJson(const std::optional<monitor::Behind>& b) {
  if (!b) return nullptr;
  return {{"waiting", b->waiting ? ojson(*b->waiting) : ojson(nullptr)},
          {"oldest", b->oldest ? ojson(seconds(*b->oldest)) : ojson(nullptr)}};
}

ojson monitorJson(const monitor::Expectations& m) {
  ojson within = nullptr;
  if (m.activeWithin)
    within = {{"within", seconds(m.activeWithin->within)},
              {"between", m.activeWithin->between ? ojson(windowText(*m.activeWithin->between))
                                                  : ojson(nullptr)}};
  ojson by = nullptr;
  if (auto& a = m.activeBy) {
    static const char* kDays[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};
    switch (a->kind) {
      case monitor::ActiveBy::Kind::Daily:
        by = {{"daily", dayMinute(a->minuteOfDay)}};
        break;
      case monitor::ActiveBy::Kind::Weekly:
        by = {{"weekly", std::string(kDays[a->weekday % 7]) + " " + dayMinute(a->minuteOfDay)}};
        break;
      case monitor::ActiveBy::Kind::Cron:
        by = {{"cron", a->cron}};
        break;
    }
    by["from"] = a->fromMinute ? ojson(dayMinute(*a->fromMinute)) : ojson(nullptr);
  }
  return {{"behind", behindJson(m.behind)}, {"activeWithin", within}, {"activeBy", by}};
}

const char* syncName(config::FileSyncMode m) {
  switch (m) {
    case config::FileSyncMode::Group:
      return "group";
    case config::FileSyncMode::Each:
      return "each";
    case config::FileSyncMode::None:
      return "none";
  }
  return "group";
}

std::string modeText(int mode) {
  char out[8];
  std::snprintf(out, sizeof out, "%04o", mode);
  return out;
}

ojson destinationJson(const config::Destination& d) {
  ojson j = {{"name", d.name}, {"kind", config::targetKind(d.target)}};
  if (auto* m = std::get_if<config::MllpDestination>(&d.target)) {
    j["target"] = m->address.toString();
    j["tls"] = connectTlsJson(m->tls);
    j["ackTimeout"] = formatDuration(m->ackTimeout);
  } else if (auto* h = std::get_if<config::HttpDestination>(&d.target)) {
    if (!h->api.empty()) {
      // The apis: entry's URL and headers stay in resources.yaml's view.
      j["target"] = "api " + h->api + h->path;
      j["api"] = h->api;
      j["path"] = h->path;
    } else {
      j["target"] = redactedUrl(h->url);
      j["tls"] = connectTlsJson(h->tls);
    }
    j["method"] = h->method;
    // Header values are where tokens go (Authorization, X-Api-Key): only
    // the names are shown.
    ojson headers = ojson::object();
    for (const auto& [name, value] : h->headers) headers[name] = kRedacted;
    j["headers"] = std::move(headers);
    j["timeout"] = formatDuration(h->timeout);
  } else if (auto* f = std::get_if<config::FileDestination>(&d.target)) {
    j["target"] = f->path;
    j["fileName"] = f->name;
    j["mode"] = modeText(f->mode);
    j["sync"] = syncName(f->sync);
    j["publish"] = f->publish == config::FilePublish::Link ? "link" : "rename";
  } else if (auto* s = std::get_if<config::SftpDestination>(&d.target)) {
    j["target"] = s->server.describe() + ":" + s->path;
    j["server"] = sftpServerJson(s->server);
    j["path"] = s->path;
    j["fileName"] = s->name;
    j["mode"] = modeText(s->mode);
  } else if (auto* r = std::get_if<config::RouteDestination>(&d.target)) {
    j["target"] = r->interface;
  }
  j["transform"] = d.transform;
  j["output"] = config::formatName(d.output);
  j["retry"] = {{"maxAttempts", d.maxAttempts ? ojson(d.maxAttempts) : ojson(nullptr)}};
  if (d.rateLimit)
    j["rateLimit"] = {{"messages", d.rateLimit->messages},
                      {"per", formatDuration(d.rateLimit->per)},
                      {"over", d.rateLimit->dropOver ? "drop" : "wait"}};
  else
    j["rateLimit"] = nullptr;
  j["saveOutput"] = d.saveOutput;
  j["behind"] = behindJson(d.behind);
  return j;
}

constexpr const char* kConfigurationSchema = R"({
  "type": "object",
  "description": "secrets are never shown: a password, an inline private key, an HTTP header's value, a URL's user information and query read \"***\" when set",
  "required": ["name", "source", "format", "charset", "ordering", "dedupe", "durability",
               "retention", "quarantined", "maxMessageBytes", "timeout", "isolation", "code",
               "monitor", "destinations"],
  "properties": {
    "name": {"type": "string"},
    "source": {
      "type": "object",
      "required": ["kind"],
      "description": "kind and that kind's settings: mllp and http listen, tls (certificate names), allow; http path, mode; file and sftp files (and sftp's server); schedule every or cron",
      "properties": {
        "kind": {"type": "string", "enum": ["mllp", "http", "file", "sftp", "schedule", "internal"]},
        "listen": {"type": "string"},
        "path": {"type": "string"},
        "mode": {"type": "string", "enum": ["queue", "respond"]},
        "respond": {"type": "string"},
        "tls": {"type": ["object", "null"], "properties": {
          "certificate": {"type": "string"}, "clientCa": {"type": ["string", "null"]},
          "clientSubjects": {"type": "array", "items": {"type": "string"}}}},
        "allow": {"type": "array", "items": {"type": "string"}},
        "files": {"type": "object", "properties": {
          "path": {"type": "string"}, "pattern": {"type": "string"},
          "split": {"type": "string", "enum": ["none", "records"]},
          "moveTo": {"type": ["string", "null"]}, "delete": {"type": "boolean"},
          "poll": {"type": "string"}}},
        "server": {"type": "object", "description": "host, port, user; password and an inline privateKey read \"***\" when set; privateKey {file} names the key's file; hostKey {pinned: how many} or {knownHosts: file}"},
        "every": {"type": ["string", "null"]},
        "cron": {"type": ["string", "null"]}
      }
    },
    "format": {"type": "string"},
    "charset": {"type": "string"},
    "ordering": {"type": ["object", "null"], "properties": {
      "key": {"type": "string"}, "partitions": {"type": "integer"}}},
    "dedupe": {"type": ["object", "null"], "properties": {
      "key": {"type": "string"}, "window": {"type": ["string", "null"], "description": "null: the retention's days"}}},
    "durability": {"type": "string", "enum": ["strict", "relaxed"]},
    "retention": {"type": "string", "description": "as configured; GET /retention says where new messages go"},
    "quarantined": {"type": "string", "enum": ["keep", "purge"]},
    "maxMessageBytes": {"type": "integer"},
    "timeout": {"type": "string"},
    "isolation": {"type": "object", "properties": {
      "mode": {"type": "string", "enum": ["shared", "dedicated"]}, "workers": {"type": "integer"}}},
    "code": {"type": "string"},
    "dedicatedPools": {"type": "object", "additionalProperties": {"type": "integer"}},
    "monitor": {"type": "object", "properties": {
      "behind": {"type": ["object", "null"]},
      "activeWithin": {"type": ["object", "null"]},
      "activeBy": {"type": ["object", "null"]}}},
    "destinations": {
      "type": "array",
      "items": {
        "type": "object",
        "required": ["name", "kind", "target", "transform", "output", "retry", "rateLimit", "saveOutput"],
        "properties": {
          "name": {"type": "string"},
          "kind": {"type": "string", "enum": ["mllp", "http", "file", "sftp", "interface"]},
          "target": {"type": "string", "description": "host:port, a URL (user information and query redacted), api NAME/path, a folder, user@host:port:folder, or the interface routed to"},
          "tls": {"type": ["object", "null"], "properties": {
            "ca": {"type": ["string", "null"]}, "certificate": {"type": ["string", "null"]}}},
          "ackTimeout": {"type": "string"},
          "api": {"type": "string"},
          "path": {"type": "string"},
          "method": {"type": "string"},
          "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "names only; every value reads \"***\""},
          "timeout": {"type": "string"},
          "fileName": {"type": "string"},
          "mode": {"type": "string", "description": "octal, e.g. 0640"},
          "sync": {"type": "string", "enum": ["group", "each", "none"]},
          "publish": {"type": "string", "enum": ["link", "rename"]},
          "server": {"type": "object", "description": "host, port, user; password and an inline privateKey read \"***\" when set; privateKey {file} names the key's file; hostKey {pinned: how many} or {knownHosts: file}"},
          "transform": {"type": "string"},
          "output": {"type": "string"},
          "retry": {"type": "object", "properties": {"maxAttempts": {"type": ["integer", "null"], "description": "null: forever"}}},
          "rateLimit": {"type": ["object", "null"], "properties": {
            "messages": {"type": "integer"}, "per": {"type": "string"},
            "over": {"type": "string", "enum": ["wait", "drop"]}}},
          "saveOutput": {"type": "boolean"},
          "behind": {"type": ["object", "null"]}
        }
      }
    }
  }
})";

}  // namespace

std::string redactedUrl(const std::string& url) {
  std::string out = url;
  auto scheme = out.find("://");
  size_t hostStart = scheme == std::string::npos ? 0 : scheme + 3;
  size_t hostEnd = out.find_first_of("/?#", hostStart);
  if (hostEnd == std::string::npos) hostEnd = out.size();
  auto at = out.rfind('@', hostEnd - 1);
  if (at != std::string::npos && at >= hostStart && hostEnd > hostStart)
    out.replace(hostStart, at - hostStart, kRedacted);
  auto query = out.find('?');
  if (query != std::string::npos) {
    auto fragment = out.find('#', query);
    out.replace(query + 1, (fragment == std::string::npos ? out.size() : fragment) - query - 1,
                kRedacted);
  }
  return out;
}

nlohmann::ordered_json interfaceConfigurationJson(const config::InterfaceConfig& c) {
  ojson j = {{"name", c.name}, {"source", sourceJson(c)}, {"format", config::formatName(c.format)}};
  j["charset"] = config::charsetName(c.charset);
  j["ordering"] = c.ordering
                      ? ojson{{"key", c.ordering->key}, {"partitions", c.ordering->partitions}}
                      : ojson(nullptr);
  j["dedupe"] = c.dedupeKey
                    ? ojson{{"key", *c.dedupeKey},
                            {"window", c.dedupeWindow ? ojson(formatDuration(*c.dedupeWindow))
                                                      : ojson(nullptr)}}
                    : ojson(nullptr);
  j["durability"] = c.durability == config::Durability::Relaxed ? "relaxed" : "strict";
  j["retention"] = config::retentionName(c.retention);
  j["quarantined"] = c.quarantined == config::QuarantinedRetention::Purge ? "purge" : "keep";
  j["maxMessageBytes"] = c.maxMessageBytes;
  j["timeout"] = formatDuration(c.timeout);
  j["isolation"] = c.isolation == config::Isolation::Dedicated
                       ? ojson{{"mode", "dedicated"}, {"workers", c.workers}}
                       : ojson{{"mode", "shared"}};
  j["code"] = c.code;
  ojson pools = ojson::object();
  for (const auto& [name, n] : c.dedicatedPools) pools[name] = n;
  j["dedicatedPools"] = std::move(pools);
  j["monitor"] = monitorJson(c.monitor);
  ojson dests = ojson::array();
  for (const auto& d : c.destinations) dests.push_back(destinationJson(d));
  j["destinations"] = std::move(dests);
  return j;
}

std::vector<Route> interfaceConfigurationRoutes(EngineView* engine) {
  Route r;
  r.method = "GET";
  r.path = "/api/v1/interfaces/{name}/configuration";
  r.operationId = "getInterfaceConfiguration";
  r.summary =
      "An interface as the engine runs it (loaded at its start): source, format, ordering, "
      "dedupe, retention, monitor and destinations; secrets read \"***\"";
  r.tag = "engine";
  r.requirement = Requirement::toRead(Role::Viewer);
  r.responseSchema = kConfigurationSchema;
  r.handler = [engine](const ApiRequest& req, ApiRespond respond) {
    if (!engine) return respond(jsonError(503, "unavailable", "no engine is running"));
    const std::string& name = req.params.at("name");
    const config::InterfaceConfig* c = engine->interfaceConfig(name);
    if (!c) return respond(jsonError(404, "not_found", "this engine runs no interface " + name));
    respond(jsonResponse(200, interfaceConfigurationJson(*c).dump(
                                  -1, ' ', false, nlohmann::json::error_handler_t::replace)));
  };
  return {std::move(r)};
}

}  // namespace ductus::api
