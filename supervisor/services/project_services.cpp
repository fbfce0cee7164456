#include "supervisor/services/project_services.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/text.h"
#include "proto/contract.h"
#include "schema/pg_connection.h"

extern char** environ;

namespace ductus::supervisor {
namespace {

// Appended to an error's text: the failure is transient (the message waits).
const std::string kTransient = " " + std::string(proto::transientMarker());

// Connection-level failures are worth retrying (the message waits); SQL
// errors are the code's mistake (quarantine).
bool transientSqlState(const std::string& code) {
  return code.rfind("08", 0) == 0 || code == "40001" || code == "40P01" || code == "57P01" ||
         code == "57P03" || code == "53300";
}

std::string jsonQuoted(const std::string& s) { return nlohmann::json(asText(s)).dump(); }

std::string withoutQuery(const std::string& path) { return path.substr(0, path.find_first_of("?#")); }

// What fetch() and api() take from the script's init: method, headers,
// body, timeout (ms). `retry` never arrives (the SDK keeps it).
struct Init {
  std::string method = "GET";
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<std::string> body;
  std::optional<std::chrono::milliseconds> timeout;
};

Result<Init> parseInit(const std::string& text) {
  Init init;
  if (text.empty()) return init;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{"init must be an object"};
  if (auto m = j.find("method"); m != j.end() && !m->is_null()) {
    if (!m->is_string()) return Error{"init.method must be a string"};
    init.method = m->get<std::string>();
    std::transform(init.method.begin(), init.method.end(), init.method.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  }
  if (auto s = services::checkMethod(init.method); !s) return s.error();
  if (auto h = j.find("headers"); h != j.end() && !h->is_null()) {
    if (!h->is_object()) return Error{"init.headers must be an object of names and values"};
    for (auto& [name, value] : h->items()) {
      // Numbers and booleans as JavaScript's Headers would write them.
      if (!value.is_string() && !value.is_number() && !value.is_boolean())
        return Error{"header " + name + ": the value must be a string"};
      std::string v = value.is_string() ? value.get<std::string>() : value.dump();
      if (auto s = services::checkHeader(name, v); !s) return s.error();
      init.headers.emplace_back(name, std::move(v));
    }
  }
  if (auto b = j.find("body"); b != j.end() && !b->is_null()) {
    // The SDK sends objects as JSON text already; anything else as its JSON.
    init.body = b->is_string() ? b->get<std::string>() : b->dump();
  }
  if (auto t = j.find("timeout"); t != j.end() && !t->is_null()) {
    if (!t->is_number() || t->get<double>() < 1 || t->get<double>() > 600000)
      return Error{"init.timeout must be a number of milliseconds from 1 to 600000"};
    init.timeout = std::chrono::milliseconds(static_cast<int64_t>(t->get<double>()));
  }
  return init;
}

// libcurl would label a body application/x-www-form-urlencoded, which no
// script means. The SDK turns an object body into JSON text without saying
// so, so a body that is a JSON object or array is labelled JSON; any other
// text is what a browser's fetch() calls a string body.
std::string defaultContentType(const std::string& body) {
  size_t first = body.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (body[first] == '{' || body[first] == '[') &&
      nlohmann::json::accept(body))
    return "application/json";
  return "text/plain;charset=UTF-8";
}

bool hasHeader(const std::vector<std::pair<std::string, std::string>>& headers,
               const std::string& name) {
  return std::any_of(headers.begin(), headers.end(),
                     [&](auto& h) { return asciiLower(h.first) == name; });
}

}  // namespace

ProjectServices::ProjectServices(uv_loop_t* loop, const config::Project& project, Options options)
    : ProjectServices(loop, project.resources, options, &project) {}

ProjectServices::ProjectServices(uv_loop_t* loop, const config::Resources& resources)
    : ProjectServices(loop, resources, Options{}, nullptr) {}

ProjectServices::ProjectServices(uv_loop_t* loop, const config::Resources& resources,
                                 Options options, const config::Project* project)
    : loop_(loop), resources_(resources), http_(loop, options.maxResponseBytes) {
  for (auto& [name, api] : resources_.apis)
    if (auto u = services::parseHttpUrl(api.url)) origins_.emplace(u->origin, &api);
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos || kv.rfind(kEnvPrefix, 0) != 0) continue;
    env_.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  if (project) loadSecrets(*project);
  else secretsError_ = Error{"this engine was started without the project's secrets"};
}

ProjectServices::~ProjectServices() = default;

void ProjectServices::loadSecrets(const config::Project& project) {
  environment_ = project.environment;
  std::filesystem::path file = project.root / "secrets" / (project.environment + ".json");
  secretsFile_ = "secrets/" + project.environment + ".json";
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return;  // no secrets: each name is unknown
  auto key = config::findSecretsKey(std::getenv("DUCTUS_SECRETS_KEY"), project.engine.secretsKeyFile);
  if (!key) {
    secretsError_ = key.error();
    return;
  }
  auto opened = config::SecretsFile::open(file, *key);
  if (!opened) {
    secretsError_ = opened.error();
    return;
  }
  secrets_.emplace(std::move(*opened));
}

store::PgConnection* ProjectServices::connectionFor(const config::DatabaseResource& db) {
  auto& c = dbs_[db.name];
  if (!c || c->broken()) {
    c = std::make_unique<store::PgConnection>(loop_);
    c->connect(db.url, [](Status) {});  // failures reach the queued statements
  }
  return c.get();
}

void ProjectServices::database(const ServiceCall& call, Reply reply) {
  auto it = resources_.databases.find(call.resource);
  if (it == resources_.databases.end())
    return reply(Error{"db(\"" + call.resource + "\"): no such database in resources.yaml"});
  std::vector<store::Param> params;
  if (!call.paramsJson.empty()) {
    auto j = nlohmann::json::parse(call.paramsJson, nullptr, false);
    if (j.is_discarded() || !j.is_array())
      return reply(Error{"db(\"" + call.resource + "\"): parameters must be an array"});
    for (auto& v : j) {
      if (v.is_null()) params.emplace_back(std::nullopt);
      else if (v.is_string()) params.emplace_back(v.get<std::string>());
      else params.emplace_back(v.dump());
    }
  }
  bool query = call.kind == ServiceCall::Kind::DbQuery;
  std::string sql = query ? "WITH ductus_q AS (" + call.sql +
                                ") SELECT coalesce(json_agg(ductus_q), '[]'::json)::text FROM ductus_q"
                          : call.sql;
  std::string name = call.resource;
  connectionFor(it->second)
      ->query(std::move(sql), std::move(params),
              [reply, query, name](Result<store::PgResult> r) {
                if (!r) {
                  const Error& e = r.error();
                  std::string msg = "db(\"" + name + "\"): " + e.message;
                  if (transientSqlState(e.code)) msg += kTransient;
                  return reply(Error{msg});
                }
                if (query) return reply(std::string(r->rows() ? r->text(0, 0) : "[]"));
                reply(nlohmann::json{{"rowCount", r->affected()}}.dump());
              });
}

void ProjectServices::fetch(const ServiceCall& call, Reply reply) {
  bool viaApi = !call.api.empty();
  std::string who = viaApi ? "api(" + jsonQuoted(call.api) + ")" : "fetch()";
  auto init = parseInit(call.initJson);
  if (!init) return reply(Error{who + ": " + init.error().message});

  services::HttpCall http;
  http.method = init->method;
  const config::ApiResource* api = nullptr;
  if (viaApi) {
    auto it = resources_.apis.find(call.api);
    if (it == resources_.apis.end())
      return reply(Error{who + ": no such api in resources.yaml (apis: { " + call.api +
                         ": { url: https://... } })"});
    api = &it->second;
    // The path goes under the api's URL. It must start with / or ? so it
    // cannot change the host ("@other.example/" after "https://lab" would
    // make lab the user name of a request to other.example).
    const std::string& path = call.url;
    if (!path.empty() && path[0] != '/' && path[0] != '?')
      return reply(Error{who + ": the path " + jsonQuoted(withoutQuery(path)) +
                         " must start with / (it goes under the api's URL)"});
    std::string base = api->url;
    if (!base.empty() && base.back() == '/' && !path.empty() && path[0] == '/') base.pop_back();
    auto u = services::parseHttpUrl(base + path);
    auto baseUrl = services::parseHttpUrl(api->url);
    if (!u || !baseUrl || u->origin != baseUrl->origin)
      return reply(Error{who + ": the path " + jsonQuoted(withoutQuery(path)) +
                         " does not make a URL under the api's URL"});
    http.url = std::move(*u);
    http.label = who + " " + http.method + " " + withoutQuery(path.empty() ? "/" : path);
    // The api's headers, each replaced by the script's header of the same
    // name (as for HTTP destinations), then the script's others.
    for (auto& [k, v] : api->headers)
      if (!hasHeader(init->headers, asciiLower(k))) http.headers.emplace_back(k, v);
  } else {
    auto u = services::parseHttpUrl(call.url);
    if (!u)
      return reply(Error{who + ": " + jsonQuoted(withoutQuery(call.url)) + " is " + u.error().message});
    auto it = origins_.find(u->origin);
    if (it == origins_.end()) {
      std::string origin = u->shown.substr(0, u->shown.size() - u->path.size());
      return reply(Error{
          who + ": " + u->shown + " is not under any api in resources.yaml: scripts reach only "
                "declared servers; declare it (apis: { <name>: { url: " + origin +
          " } }) and call api(\"<name>\").get(path), or fetch URLs under it"});
    }
    api = it->second;
    http.url = std::move(*u);
    http.label = "fetch " + http.method + " " + http.url.shown;
  }
  for (auto& h : init->headers) http.headers.push_back(h);
  http.body = std::move(init->body);
  if (http.body && !hasHeader(http.headers, "content-type"))
    http.headers.emplace_back("Content-Type", defaultContentType(*http.body));
  http.timeout = init->timeout.value_or(api->timeout);
  http_.start(std::move(http), [reply = std::move(reply)](Result<services::HttpAnswer> r) {
    if (!r) return reply(r.error());
    reply(services::answerJson(*r));
  });
}

void ProjectServices::env(const ServiceCall& call, Reply reply) {
  const std::string& name = call.name;
  if (name.rfind(kEnvPrefix, 0) != 0 || name.size() == std::string_view(kEnvPrefix).size())
    return reply(Error{"env(" + jsonQuoted(name) + "): scripts may read only variables named " +
                       kEnvPrefix + "*, which the engine's environment sets for them (export " +
                       kEnvPrefix + "SITE=north, then env(\"" + kEnvPrefix +
                       "SITE\")); credentials belong in secret()"});
  auto it = env_.find(name);
  if (it == env_.end())
    return reply(Error{"env(" + jsonQuoted(name) + "): not set in the engine's environment"});
  reply(jsonQuoted(it->second));
}

void ProjectServices::secret(const ServiceCall& call, Reply reply) {
  const std::string& name = call.name;
  if (!config::isValidSecretName(name))
    return reply(Error{"secret(" + jsonQuoted(name) +
                       "): not a secret name (a letter or _, then letters, digits or _)"});
  if (secretsError_)
    // The deployment's to fix (a key), not the message's: it waits.
    return reply(Error{"secret(" + jsonQuoted(name) + "): " + secretsError_->message + kTransient});
  const std::string* value = secrets_ ? secrets_->find(name) : nullptr;
  if (!value) {
    std::string known;
    if (secrets_)
      for (auto& n : secrets_->names()) known += (known.empty() ? "" : ", ") + n;
    return reply(Error{"secret(" + jsonQuoted(name) + "): no such secret in " + secretsFile_ + " (" +
                       (known.empty() ? "it has none" : "it has " + known) +
                       "); add it with `ductus secret set " + name + " --env " + environment_ + "`"});
  }
  reply(jsonQuoted(*value));
}

void ProjectServices::call(const ServiceCall& call, Reply reply) {
  switch (call.kind) {
    case ServiceCall::Kind::DbQuery:
    case ServiceCall::Kind::DbExecute:
      return database(call, std::move(reply));
    case ServiceCall::Kind::Fetch:
      return fetch(call, std::move(reply));
    case ServiceCall::Kind::Env:
      return env(call, std::move(reply));
    case ServiceCall::Kind::Secret:
      return secret(call, std::move(reply));
  }
  reply(Error{"unknown service"});
}

}  // namespace ductus::supervisor
