#include "api/auth/handler_support.h"

#include <charconv>

namespace ductus::api {

net::HttpResponse errorResponse(const Error& e) {
  if (e.code == "exists") return jsonError(409, "exists", e.message);
  if (e.code == "not_found") return jsonError(404, "not_found", e.message);
  if (e.code == "invalid" || e.code.starts_with("22")) return jsonError(400, "invalid", e.message);
  auto r = jsonError(503, "unavailable", e.code == "busy" ? e.message
                                                          : "the database is unavailable: " +
                                                                e.message);
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

net::HttpResponse jsonOk(int status, const nlohmann::json& body) {
  return jsonResponse(status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Result<nlohmann::json> bodyObject(const ApiRequest& request) {
  auto j = nlohmann::json::parse(request.http.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{"the body must be a JSON object", "invalid"};
  return j;
}

std::optional<std::string> stringField(const nlohmann::json& o, const char* name) {
  auto it = o.find(name);
  if (it == o.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

void withConnection(store::PgPool& pool, const ApiRespond& respond,
                    std::function<void(store::PgPool::LeasePtr)> fn) {
  pool.acquire([respond, fn = std::move(fn)](Result<store::PgPool::LeasePtr> lease) {
    if (!lease) return respond(errorResponse(lease.error()));
    fn(*lease);
  });
}

Result<std::optional<int64_t>> positiveQuery(const ApiRequest& request, const std::string& name) {
  auto it = request.query.find(name);
  if (it == request.query.end()) return std::optional<int64_t>{};
  int64_t v = 0;
  auto& s = it->second;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0)
    return Error{"`" + name + "` must be a whole number", "invalid"};
  return std::optional<int64_t>(v);
}

}  // namespace ductus::api
