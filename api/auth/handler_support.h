// What the auth and audit handlers share: an Error as its HTTP answer, a
// JSON body read as an object, and a pool lease or a 503.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/route.h"
#include "common/result.h"
#include "schema/pg_pool.h"

namespace ductus::api {

// exists 409, not_found 404, invalid 400, busy 503 (Retry-After: 1),
// anything else (the database) 503.
net::HttpResponse errorResponse(const Error& e);

net::HttpResponse jsonOk(int status, const nlohmann::json& body);

// The request's body as a JSON object, or the 400 to answer.
Result<nlohmann::json> bodyObject(const ApiRequest& request);

// A string member, or nullopt when missing or not a string.
std::optional<std::string> stringField(const nlohmann::json& o, const char* name);

// Runs fn with a connection, or answers 503.
void withConnection(store::PgPool& pool, const ApiRespond& respond,
                    std::function<void(store::PgPool::LeasePtr)> fn);

// fn as a route's handler over the routes' shared deps. Without deps (the
// routes made for the OpenAPI document alone) it answers 503 saying
// `missing`.
template <typename Deps>
ApiHandler bindHandler(std::shared_ptr<Deps> deps,
                       void (*fn)(Deps&, const ApiRequest&, ApiRespond), std::string missing) {
  return [deps, fn, missing](const ApiRequest& req, ApiRespond respond) {
    if (!deps) return respond(jsonError(503, "unavailable", missing));
    fn(*deps, req, std::move(respond));
  };
}

// A query parameter as a positive integer: nullopt when absent, an Error
// when present and not one.
Result<std::optional<int64_t>> positiveQuery(const ApiRequest& request, const std::string& name);

}  // namespace ductus::api
