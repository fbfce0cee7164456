// ProjectServices: what interface code may reach outside its worker, as
// the project names it. Every answer comes on the loop and nothing here
// blocks it. Anything the project does not name is refused with what to
// declare.
//
// * db(name).query/execute: a connection of that resources.yaml database,
//   always with bound parameters, wrapped so Postgres produces the JSON:
//   WITH ductus_q AS (<sql>) SELECT json_agg(ductus_q) FROM ductus_q.
//   Each database has a pool of at most its max_connections (opened as
//   calls need them); calls beyond it wait in order, at most maxDbWaiting.
//   An interface with `dedicated_pools: { <database>: N }` (isolation:
//   dedicated, so every call names its interface) also has N connections
//   of its own to that database, which only it uses: a call of it takes
//   one of those first; when all N are busy, a free connection of the
//   shared pool that no call waits for; else it waits for one of its own.
//   So it is never starved by the other interfaces' queries, and the
//   database sees up to max_connections plus every dedicated N.
//   A database with ca: connects with sslmode=verify-full against that CA.
//   A kind: sqlserver database is reached through FreeTDS's ODBC driver,
//   each connection on a thread of its own (services/sqlserver/): $1, $2
//   are bound as parameters (parameters.h), rows come back as the same
//   JSON (row_json.h), a connection is kept only after a call that
//   succeeded and closed after dbIdleClose unused; connection, login and
//   timeout failures are transient, the server's refusals are not.
//   A call has the calling interface's timeout (dbTimeout when unknown) for
//   waiting and running together: past it, it answers transient "timed
//   out", and the server cancels the statement (statement_timeout, set to
//   what is left of the timeout when the statement starts), so the
//   connection is soon free again. A query's result is capped
//   (maxDbRows, maxDbResultBytes of JSON), counted by Postgres, so a huge
//   result is refused without being sent.
// * fetch(url, init): only to the origin (scheme, host, port) of an api in
//   resources.yaml, with that api's timeout; through libcurl's multi-socket
//   API on the loop (services::HttpFetch), at most maxConcurrentFetches at
//   once for the whole engine, maxQueuedFetches more waiting. No redirects
//   are followed.
// * api(name).<method>(path): the api's URL + path, its headers (the
//   script's own headers win on a clash, as for HTTP destinations) and its
//   timeout, so tokens stay in resources.yaml and never enter V8.
//   An api with ca:/certificate: verifies its server against the system's
//   roots plus that CA and presents that client certificate (fetch() to its
//   origin too), from Options::certificates.
// * env(name): only variables named DUCTUS_PUBLIC_* (see kEnvPrefix).
// * secret(name): from secrets/<env>.json, read and decrypted once when the
//   services are made.
//
// Errors the message should wait out (a database or server that is down, a
// timeout, a missing secrets key) carry "[ductus:transient]"; the rest are
// the code's or the project's mistake and quarantine the message unless the
// script catches them. Statuses are answers: the SDK turns 5xx/408/429 into
// transient errors unless the script passed retry: false.
#pragma once

#include <uv.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/config/model.h"
#include "common/config/secrets.h"
#include "schema/conninfo.h"
#include "supervisor/services/http_fetch.h"
#include "supervisor/services/sqlserver/sqlserver_pool.h"
#include "supervisor/workers/worker_pool.h"

namespace ductus::store {
class PgPool;
class PgResult;
}
namespace ductus::tls {
class Certificates;
}

namespace ductus::supervisor {

class ProjectServices : public ServiceHandler {
 public:
  // Why a prefix and not every variable: the engine's own environment holds
  // its credentials (DUCTUS_DATABASE_URL, DUCTUS_SECRETS_KEY, whatever an
  // operator substitutes with ${env:}), and interface code must reach none
  // of them (no credentials in interface code: docs/architecture.md). Nothing
  // in resources.yaml lists variables yet, so the name itself is the
  // allowlist: an operator exports DUCTUS_PUBLIC_SITE=north on purpose, and
  // a script reads env("DUCTUS_PUBLIC_SITE"). Credentials belong in secret().
  static constexpr const char* kEnvPrefix = "DUCTUS_PUBLIC_";

  struct Options {
    size_t maxResponseBytes = services::HttpFetch::kDefaultMaxResponseBytes;
    size_t maxConcurrentFetches = services::HttpFetch::kDefaultMaxRunning;
    size_t maxQueuedFetches = services::HttpFetch::kDefaultMaxQueued;
    // db(): the time to wait for a connection and run, when the call's
    // interface is not in the project (each interface's own timeout
    // otherwise: the script is stopped then anyway).
    std::chrono::milliseconds dbTimeout{10000};
    // db().query: the most rows, and bytes of JSON (the rows' JSON text),
    // a script may receive; a bigger result is the code's mistake (select
    // fewer, or page), refused, not retried.
    size_t maxDbRows = 10000;
    size_t maxDbResultBytes = 16u << 20;
    // db(): calls that may wait for a connection of one database, beyond
    // those running; more are refused as transient.
    size_t maxDbWaiting = 1000;
    // db() on SQL Server: a connection idle this long is closed.
    std::chrono::milliseconds dbIdleClose = std::chrono::minutes(5);
    // The engine's certificates: entries, for apis with ca:/certificate:.
    std::shared_ptr<tls::Certificates> certificates;
  };

  // The engine's constructor: resources, the environment's secrets file
  // (secrets/<project.environment>.json with the key from
  // DUCTUS_SECRETS_KEY or ductus.yaml's key file), and the DUCTUS_PUBLIC_*
  // variables of this process, all read now (blocking reads of small files,
  // before calls arrive; the project loader reads the same files).
  ProjectServices(uv_loop_t* loop, const config::Project& project, Options options);
  ProjectServices(uv_loop_t* loop, const config::Project& project)
      : ProjectServices(loop, project, Options{}) {}
  // Resources only: secret() is refused (there is no project to read them
  // from). Kept for callers that have no Project.
  ProjectServices(uv_loop_t* loop, const config::Resources& resources);
  ~ProjectServices() override;

  void call(const ServiceCall& call, std::function<void(Result<std::string>)> reply) override;

 private:
  using Reply = std::function<void(Result<std::string>)>;
  struct DbPool;
  struct DbCall;
  DbPool& poolFor(const config::DatabaseResource& db);
  // The database's connection string: its ca: as sslmode=verify-full,
  // application_name `appName`.
  Result<std::string> dbConninfo(const config::DatabaseResource& db, const std::string& appName);
  // The calling interface's own pool for that database (dedicated_pools),
  // or null when it has none.
  DbPool* dedicatedPoolFor(const ServiceCall& call, const config::DatabaseResource& db);
  std::chrono::milliseconds dbTimeoutFor(const ServiceCall& call) const;
  void database(const ServiceCall& call, Reply reply);
  // Starts waiting calls while fewer than max_connections run.
  void pumpDb(DbPool& pool);
  void runDb(DbPool& pool, std::shared_ptr<DbCall> call);
  Result<std::string> readDbResult(const DbCall& call, const store::PgResult& r) const;
  // A SQL Server database's connection settings, or why it can't connect.
  Result<services::sqlserver::ConnectSettings> sqlServerSettings(const config::DatabaseResource& db,
                                                                 const std::string& appName);
  void makePool(DbPool& p, const config::DatabaseResource& db, const std::string& appName);
  void fetch(const ServiceCall& call, Reply reply);
  void env(const ServiceCall& call, Reply reply);
  void secret(const ServiceCall& call, Reply reply);
  ProjectServices(uv_loop_t* loop, const config::Resources& resources, Options options,
                  const config::Project* project);
  void loadSecrets(const config::Project& project);

  uv_loop_t* loop_;
  const config::Resources& resources_;
  const config::Project* project_;  // null: no interfaces to take timeouts from
  Options options_;
  // Files holding databases' CAs for libpq (sslrootcert); they outlive
  // the pools below, whose connections read them at each connect.
  store::DatabaseTls dbTls_;
  std::map<std::string, std::unique_ptr<DbPool>> dbs_;
  // (interface, database) → the interface's dedicated_pools connections.
  std::map<std::pair<std::string, std::string>, std::unique_ptr<DbPool>> dedicatedDbs_;
  services::HttpFetch http_;
  // Each api's origin, for fetch(): which api a URL belongs to.
  std::map<std::string, const config::ApiResource*> origins_;
  // By api: its TLS settings for libcurl, or why it has none (a call to it
  // is refused with that).
  std::map<const config::ApiResource*, Result<std::shared_ptr<const net::CurlTls>>> apiTls_;
  std::map<std::string, std::string> env_;  // the DUCTUS_PUBLIC_* variables
  // Exactly one of these once loaded: the secrets, or why there are none.
  std::optional<config::SecretsFile> secrets_;
  std::string secretsFile_;   // as shown in messages
  std::string environment_;   // which secrets/<env>.json
  std::optional<Error> secretsError_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor
