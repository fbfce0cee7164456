#include "supervisor/services/project_services.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/config/sqlserver_url.h"
#include "common/net/curl_easy.h"
#include "common/text.h"
#include "common/tls/certificates.h"
#include "common/uv_handle.h"
#include "proto/contract.h"
#include "schema/conninfo.h"
#include "schema/pg_error.h"
#include "schema/pg_pool.h"
#include "supervisor/services/db_result_caps.h"
#include "supervisor/services/sqlserver/parameters.h"

extern char** environ;

namespace ductus::supervisor {
namespace {

// Appended to an error's text: the failure is transient (the message waits).
const std::string kTransient = " " + std::string(proto::transientMarker());

// Connection-level failures and lost races are worth retrying (the message
// waits); other SQL errors are the code's mistake (quarantine).
bool transient(const Error& e) { return store::pg::connectionLost(e) || store::pg::retryable(e); }

// A query's rows as one JSON array, made by Postgres, with the count and
// the JSON size beside it so a result over the caps is refused without
// being sent: the LIMIT stops reading one row past the row cap, and rows
// past the byte cap stay out of the array. The caps are numbers of ours,
// not values from the script. The line breaks keep a script's trailing
// `-- comment` from swallowing the rest.
std::string cappedQuery(const std::string& sql, size_t maxRows, size_t maxBytes) {
  return "WITH ductus_q AS (\n" + sql +
         "\n), ductus_r AS (SELECT row_to_json(ductus_q) AS j FROM ductus_q LIMIT " +
         std::to_string(maxRows + 1) +
         "), ductus_s AS (SELECT j, sum(octet_length(j::text)) OVER (ROWS UNBOUNDED PRECEDING) "
         "AS total FROM ductus_r) "
         "SELECT count(*), coalesce(max(total), 0), coalesce(json_agg(j) FILTER (WHERE total <= " +
         std::to_string(maxBytes) + "), '[]'::json)::text FROM ductus_s";
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
    : loop_(loop),
      resources_(resources),
      project_(project),
      options_(options),
      http_(loop, options.maxResponseBytes, options.maxConcurrentFetches,
            options.maxQueuedFetches) {
  for (auto& [name, api] : resources_.apis) {
    if (auto u = services::parseHttpUrl(api.url)) origins_.emplace(u->origin, &api);
    // ca:/certificate: need the certificates; https alone is libcurl's
    // defaults (the system's roots).
    if (!api.tls.enabled || (api.tls.ca.empty() && api.tls.certificate.empty())) continue;
    if (!options_.certificates) {
      apiTls_.emplace(&api, Error{"api(" + jsonQuoted(name) +
                                  "): TLS settings without the engine's certificates"});
      continue;
    }
    auto client = options_.certificates->client(api.tls);
    if (!client) {
      apiTls_.emplace(&api, Error{"api(" + jsonQuoted(name) + "): " + client.error().message});
      continue;
    }
    apiTls_.emplace(&api, std::shared_ptr<const net::CurlTls>(
                              std::make_shared<net::CurlTls>(*client)));
  }
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos || kv.rfind(kEnvPrefix, 0) != 0) continue;
    env_.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  if (project) loadSecrets(*project);
  else secretsError_ = Error{"this engine was started without the project's secrets"};
}

// One db() call, from its arrival until it is answered and its connection
// (if it got one) is free again.
struct ProjectServices::DbCall : std::enable_shared_from_this<DbCall> {
  std::string database;  // its resources.yaml name, for messages
  bool query = false;
  std::string sql;  // as sent: a query is wrapped by cappedQuery
  std::vector<store::Param> params;
  // SQL Server: the statement with its markers and typed parameters.
  std::optional<services::sqlserver::Statement> sqlServer;
  std::chrono::milliseconds timeout{0};
  std::chrono::steady_clock::time_point deadline;
  bool started = false;  // took a place among max_connections
  bool answered = false;
  Reply reply;
  UvHandle<uv_timer_t> timer;  // the timeout, waiting and running together
  DbPool* pool = nullptr;

  std::string who() const { return "db(" + jsonQuoted(database) + ")"; }
  Error timedOut(const std::string& why) const {
    return Error{who() + ": timed out: no answer within " + std::to_string(timeout.count()) +
                 " ms (" + why + ")" + kTransient};
  }
  void answer(Result<std::string> r) {
    if (answered) return;
    answered = true;
    timer.reset();
    auto out = std::move(reply);
    out(std::move(r));
  }
};

struct ProjectServices::DbPool {
  size_t limit = 1;  // the database's max_connections, or a dedicated_pools count
  // In messages: which connections a call waits for, and the setting that
  // sizes them.
  std::string connections;
  std::string setting = "max_connections in resources.yaml";
  std::unique_ptr<store::PgPool> pool;                            // PostgreSQL
  std::unique_ptr<services::sqlserver::SqlServerPool> sqlServer;  // or SQL Server
  // Why its connections cannot be opened as configured (its ca:); every
  // call is answered with it.
  std::optional<Error> broken;
  size_t running = 0;  // calls holding or getting one of its connections
  std::deque<std::shared_ptr<DbCall>> waiting;
};

ProjectServices::~ProjectServices() { *alive_ = false; }

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

ProjectServices::DbPool& ProjectServices::poolFor(const config::DatabaseResource& db) {
  auto& p = dbs_[db.name];
  if (!p) {
    p = std::make_unique<DbPool>();
    p->limit = std::max<size_t>(1, db.maxConnections);
    p->connections = "one of the database's " + std::to_string(p->limit) + " connections";
    // Named in pg_stat_activity (or sys.dm_exec_sessions), so an operator
    // can tell scripts' connections from the engine's and from each
    // database resource's.
    makePool(*p, db, "ductus db(" + db.name + ")");
  }
  return *p;
}

void ProjectServices::makePool(DbPool& p, const config::DatabaseResource& db,
                               const std::string& appName) {
  // The pool starts empty and opens connections as calls need them.
  if (db.kind == config::DatabaseKind::SqlServer) {
    auto settings = sqlServerSettings(db, appName);
    if (!settings) {
      p.broken = settings.error();
      return;
    }
    p.sqlServer = std::make_unique<services::sqlserver::SqlServerPool>(
        loop_, std::move(*settings), p.limit, options_.dbIdleClose);
    return;
  }
  auto conninfo = dbConninfo(db, appName);
  if (!conninfo) p.broken = conninfo.error();
  p.pool = std::make_unique<store::PgPool>(loop_, conninfo ? *conninfo : db.url, p.limit);
}

Result<services::sqlserver::ConnectSettings> ProjectServices::sqlServerSettings(
    const config::DatabaseResource& db, const std::string& appName) {
  std::string who = "db(\"" + db.name + "\")";
  auto url = config::parseSqlServerUrl(db.url);
  if (!url) return Error{who + ": url: " + url.error().message};
  services::sqlserver::ConnectSettings s;
  s.url = std::move(*url);
  s.appName = appName;
  s.trustServerCertificate = db.trustServerCertificate;
  auto ca = dbTls_.caFile(who, db.tls, resources_.certificates, options_.certificates.get());
  if (!ca) return ca.error();
  s.caFile = *ca;
  return s;
}

ProjectServices::DbPool* ProjectServices::dedicatedPoolFor(const ServiceCall& call,
                                                           const config::DatabaseResource& db) {
  const config::InterfaceConfig* iface = project_ ? project_->find(call.interfaceName) : nullptr;
  if (!iface) return nullptr;
  auto n = iface->dedicatedPools.find(db.name);
  if (n == iface->dedicatedPools.end()) return nullptr;
  auto& p = dedicatedDbs_[{iface->name, db.name}];
  if (!p) {
    p = std::make_unique<DbPool>();
    p->limit = std::max<uint32_t>(1, n->second);
    p->connections = "one of its own " + std::to_string(p->limit) + " dedicated connections";
    p->setting = "dedicated_pools in interfaces/" + iface->name + "/interface.yaml";
    makePool(*p, db, "ductus db(" + db.name + ") for " + iface->name);
  }
  return p.get();
}

Result<std::string> ProjectServices::dbConninfo(const config::DatabaseResource& db,
                                                const std::string& appName) {
  std::string url = db.url;
  if (db.tls.enabled) {
    auto verified = dbTls_.apply("db(\"" + db.name + "\")", db.url, db.tls,
                                 resources_.certificates, options_.certificates.get());
    if (!verified) return verified.error();
    url = *verified;
  }
  // A URL that does not parse is reported by the connect, per call.
  auto conninfo = store::withConninfoDefaults(url, {{"application_name", appName}});
  return conninfo ? *conninfo : url;
}

std::chrono::milliseconds ProjectServices::dbTimeoutFor(const ServiceCall& call) const {
  auto timeout = options_.dbTimeout;
  if (project_)
    if (const config::InterfaceConfig* i = project_->find(call.interfaceName)) timeout = i->timeout;
  return call.timeLeft ? std::min(timeout, *call.timeLeft) : timeout;
}

void ProjectServices::database(const ServiceCall& call, Reply reply) {
  auto it = resources_.databases.find(call.resource);
  if (it == resources_.databases.end())
    return reply(Error{"db(\"" + call.resource + "\"): no such database in resources.yaml"});
  std::vector<store::Param> params;
  std::vector<services::sqlserver::Param> typed;  // SQL Server binds by type
  if (!call.paramsJson.empty()) {
    auto j = nlohmann::json::parse(call.paramsJson, nullptr, false);
    if (j.is_discarded() || !j.is_array())
      return reply(Error{"db(\"" + call.resource + "\"): parameters must be an array"});
    using T = services::sqlserver::Param::Type;
    for (auto& v : j) {
      if (v.is_null()) params.emplace_back(std::nullopt);
      else if (v.is_string()) params.emplace_back(v.get<std::string>());
      else params.emplace_back(v.dump());
      T t = v.is_null()             ? T::Null
            : v.is_string()         ? T::Text
            : v.is_boolean()        ? T::Boolean
            : v.is_number_integer() ? T::Integer
            : v.is_number()         ? T::Real
                                    : T::Text;  // an object or array: its JSON text
      std::string text = v.is_string()    ? v.get<std::string>()
                         : v.is_boolean() ? (v.get<bool>() ? "1" : "0")
                         : v.is_null()    ? ""
                                          : v.dump();
      typed.push_back({t, std::move(text)});
    }
  }
  DbPool& shared = poolFor(it->second);
  DbPool* chosen = &shared;
  // An interface with dedicated_pools for this database takes its own
  // connections first; when they are all busy, a free shared one nobody
  // waits for; else it waits for one of its own, never behind the other
  // interfaces' calls queued on the shared pool.
  if (DbPool* own = dedicatedPoolFor(call, it->second)) {
    chosen = own;
    if (own->running >= own->limit && shared.running < shared.limit && shared.waiting.empty())
      chosen = &shared;
  }
  DbPool& pool = *chosen;
  if (pool.broken) return reply(*pool.broken);
  auto c = std::make_shared<DbCall>();
  c->database = call.resource;
  if (pool.running >= pool.limit && pool.waiting.size() >= options_.maxDbWaiting)
    return reply(Error{c->who() + ": refused, " + std::to_string(pool.waiting.size()) +
                       " calls already wait for one of its " + std::to_string(pool.limit) +
                       " connections (" + pool.setting + ")" + kTransient});
  c->query = call.kind == ServiceCall::Kind::DbQuery;
  if (pool.sqlServer) {
    auto bound = services::sqlserver::bindMarkers(call.sql, typed.size());
    if (!bound) return reply(Error{c->who() + ": " + bound.error().message});
    services::sqlserver::Statement st;
    st.query = c->query;
    st.bound = std::move(*bound);
    st.params = std::move(typed);
    st.caps = {options_.maxDbRows, options_.maxDbResultBytes};
    c->sqlServer = std::move(st);
  } else {
    c->sql =
        c->query ? cappedQuery(call.sql, options_.maxDbRows, options_.maxDbResultBytes) : call.sql;
    c->params = std::move(params);
  }
  c->timeout = dbTimeoutFor(call);
  c->deadline = std::chrono::steady_clock::now() + c->timeout;
  c->reply = std::move(reply);
  c->pool = &pool;
  c->timer = makeTimer(loop_, c.get());
  uv_timer_start(
      c->timer.get(),
      [](uv_timer_t* t) {
        auto* raw = static_cast<DbCall*>(t->data);
        if (!raw) return;
        auto self = raw->shared_from_this();  // answering may drop the last owner
        if (!self->started) {
          std::erase(self->pool->waiting, self);
          return self->answer(self->timedOut(
              "it waited for " + self->pool->connections + " the whole time; " +
              self->pool->setting));
        }
        // Still running: its connection stays taken until the server's
        // statement_timeout (what was left of this one) cancels it.
        self->answer(self->timedOut(
            "it was opening a connection or running; the server cancels the statement"));
      },
      static_cast<uint64_t>(c->timeout.count()), 0);
  pool.waiting.push_back(std::move(c));
  pumpDb(pool);
}

void ProjectServices::pumpDb(DbPool& pool) {
  while (pool.running < pool.limit && !pool.waiting.empty()) {
    auto c = std::move(pool.waiting.front());
    pool.waiting.pop_front();
    if (c->answered) continue;
    runDb(pool, std::move(c));
  }
}

void ProjectServices::runDb(DbPool& pool, std::shared_ptr<DbCall> call) {
  ++pool.running;
  call->started = true;
  auto alive = alive_;
  DbPool* p = &pool;
  // After the connection is back in the pool (the next call takes it).
  auto finished = [this, alive, p] {
    if (!*alive) return;
    --p->running;
    pumpDb(*p);
  };
  auto failed = [call](const Error& e) {
    if (store::pg::queryCanceled(e))
      return call->answer(call->timedOut("the server cancelled the statement: " + e.message));
    std::string msg = call->who() + ": " + e.message;
    if (transient(e)) msg += kTransient;
    call->answer(Error{msg});
  };
  if (p->sqlServer) {
    // The driver cancels the statement where this call's time ends
    // (its query timeout, whole seconds), so a statement nobody waits for
    // any more gives its connection back soon.
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        call->deadline - std::chrono::steady_clock::now());
    call->sqlServer->timeout = std::max(left, std::chrono::milliseconds(1));
    p->sqlServer->run(std::move(*call->sqlServer), [alive, call, finished](Result<std::string> r) {
      if (!*alive) return;
      if (r) {
        call->answer(std::move(r));
      } else {
        std::string msg = call->who() + ": " + r.error().message;
        if (r.error().kind == ErrorKind::Unavailable) msg += kTransient;
        call->answer(Error{msg});
      }
      finished();
    });
    return;
  }
  using LeasePtr = store::PgPool::LeasePtr;
  p->pool->acquire([this, alive, call, finished, failed](Result<LeasePtr> got) {
    if (!*alive) return;
    if (!got) {
      failed(got.error());
      return finished();
    }
    LeasePtr lease = std::move(*got);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        call->deadline - std::chrono::steady_clock::now());
    if (call->answered || left.count() <= 0) {
      call->answer(call->timedOut("it waited for a connection the whole time"));
      lease.reset();
      return finished();
    }
    // The server stops the statement where this call's time ends, so a
    // statement nobody waits for any more gives its connection back soon.
    // Set on every call: each has its own time left.
    store::PgConnection& conn = lease->conn();
    conn.query("SELECT set_config('statement_timeout', $1, false)", {std::to_string(left.count())},
               [this, alive, call, lease = std::move(lease), finished,
                failed](Result<store::PgResult> set) mutable {
                 if (!*alive) return;
                 if (!set || call->answered) {
                   if (!set) failed(set.error());
                   lease.reset();
                   return finished();
                 }
                 store::PgConnection& conn = lease->conn();
                 conn.query(call->sql, std::move(call->params),
                            [this, alive, call, lease = std::move(lease), finished,
                             failed](Result<store::PgResult> r) mutable {
                              if (!*alive) return;
                              if (!r)
                                failed(r.error());
                              else
                                call->answer(readDbResult(*call, *r));
                              lease.reset();
                              finished();
                            });
               });
  });
}

Result<std::string> ProjectServices::readDbResult(const DbCall& call,
                                                  const store::PgResult& r) const {
  if (!call.query) return nlohmann::json{{"rowCount", r.affected()}}.dump();
  if (r.rows() == 0) return std::string("[]");
  if (static_cast<size_t>(r.integer(0, 0)) > options_.maxDbRows)
    return Error{call.who() + ": " + services::tooManyRows(options_.maxDbRows, "LIMIT")};
  if (static_cast<size_t>(r.integer(0, 1)) > options_.maxDbResultBytes)
    return Error{call.who() + ": " + services::tooManyBytes(options_.maxDbResultBytes)};
  return std::string(r.text(0, 2));
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
  if (call.timeLeft) http.timeout = std::min(http.timeout, *call.timeLeft);
  if (auto t = apiTls_.find(api); t != apiTls_.end()) {
    if (!t->second) return reply(t->second.error());
    http.tls = *t->second;
  }
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
