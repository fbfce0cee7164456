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

// exists 409, not_found 404, invalid 400 and weak_password 400 (the
// engine's own words), busy 503 (Retry-After: 1). A database Error's text
// never reaches the caller: a statement, schema or value that doesn't fit
// (SQLSTATE 42, 22, 23, XX, ...) or an Error without a SQLSTATE is the
// engine's mistake, answered 500 internal; the database unable to serve
// now (a lost connection, no room, a conflict, a trigger refusing a row)
// answers 503 unavailable (Retry-After: 1). Both carry a requestId under
// which the log has the real cause (it may quote a parameter, a row or
// the schema).
net::HttpResponse errorResponse(const Error& e);

net::HttpResponse jsonOk(int status, const nlohmann::json& body);

// The request's body as a JSON object, or the 400 to answer. No string in
// it (a member's name or value, at any depth) may hold a NUL: PostgreSQL's
// text can't, and every body's text goes there.
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

// A query parameter as a time: nullopt when absent or empty, an "invalid"
// Error when present and not an RFC 3339 date-time ("2026-01-01T12:00:00Z",
// "2026-01-01T12:00:00.25+02:00") with each field in its range and the year
// 1970 to 9999. Every route that takes a time reads it with this, so the
// database never sees one it would refuse.
Result<std::optional<std::string>> timeQuery(const ApiRequest& request, const std::string& name);
bool isRfc3339(std::string_view s);
// An RFC 3339 time as whole seconds since the epoch (its fraction dropped,
// its offset applied); nullopt when isRfc3339 says no.
std::optional<int64_t> rfc3339Seconds(std::string_view s);

}  // namespace ductus::api
