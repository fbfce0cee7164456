#include "supervisor/project_services.h"

#include <nlohmann/json.hpp>

#include "schema/pg_connection.h"

namespace ductus::supervisor {
namespace {

// Connection-level failures are worth retrying (the message waits); SQL
// errors are the code's mistake (quarantine).
bool transientSqlState(const std::string& code) {
  return code.rfind("08", 0) == 0 || code == "40001" || code == "40P01" || code == "57P01" ||
         code == "57P03" || code == "53300";
}

}  // namespace

ProjectServices::ProjectServices(uv_loop_t* loop, const config::Resources& resources)
    : loop_(loop), resources_(resources) {}

ProjectServices::~ProjectServices() = default;

store::PgConnection* ProjectServices::connectionFor(const config::DatabaseResource& db) {
  auto& c = dbs_[db.name];
  if (!c || c->broken()) {
    c = std::make_unique<store::PgConnection>(loop_);
    c->connect(db.url, [](Status) {});  // failures reach the queued statements
  }
  return c.get();
}

void ProjectServices::database(const ServiceCall& call,
                               std::function<void(Result<std::string>)> reply) {
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
                  if (transientSqlState(e.code)) msg += " [ductus:transient]";
                  return reply(Error{msg});
                }
                if (query) return reply(std::string(r->rows() ? r->text(0, 0) : "[]"));
                reply(nlohmann::json{{"rowCount", r->affected()}}.dump());
              });
}

void ProjectServices::call(const ServiceCall& call,
                           std::function<void(Result<std::string>)> reply) {
  switch (call.kind) {
    case ServiceCall::Kind::DbQuery:
    case ServiceCall::Kind::DbExecute:
      return database(call, std::move(reply));
    case ServiceCall::Kind::Fetch:
      return reply(Error{"fetch() is not supported by this engine yet"});
    case ServiceCall::Kind::Env:
      return reply(Error{"env(\"" + call.name + "\") is not supported by this engine yet"});
    case ServiceCall::Kind::Secret:
      return reply(Error{"secret(\"" + call.name + "\") is not supported by this engine yet"});
  }
  reply(Error{"unknown service"});
}

}  // namespace ductus::supervisor
