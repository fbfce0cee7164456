#include "api/auth/handler_support.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>
#include <regex>

namespace ductus::api {
namespace {

// SQLSTATE classes that say the engine is wrong, not the database's state:
// a statement or schema that doesn't fit (42, 0A, 21, 26, 34), a value the
// engine should have checked first (22, 23: the names taken meanwhile are
// answered before this), the database's own fault (XX). Anything else (a
// lost connection, no room, a conflict, a trigger refusing the audit row)
// is the database unable to serve now: 503, to be tried again.
bool engineMistake(std::string_view code) {
  if (code.size() != 5) return true;  // not PostgreSQL's: the engine's own failure
  for (std::string_view c : {"42", "0A", "21", "26", "34", "22", "23", "XX"})
    if (code.starts_with(c)) return true;
  return false;
}

}  // namespace

net::HttpResponse errorResponse(const Error& e) {
  if (e.code == "exists") return jsonError(409, "exists", e.message);
  if (e.code == "not_found") return jsonError(404, "not_found", e.message);
  if (e.code == "invalid" || e.code == "weak_password") return jsonError(400, e.code, e.message);
  if (e.code == "busy") {
    auto r = jsonError(503, "unavailable", e.message);
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  if (e.code == "unavailable" || !engineMistake(e.code)) {
    std::string id = newRequestId();
    spdlog::warn("api: request {}: the database can't serve it: {} (SQLSTATE {})", id, e.message,
                 e.code);
    auto r = jsonErrorWithId(503, "unavailable",
                           "the database is unavailable; try again (request id " + id + ")", id);
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  return internalError(e.code.empty() ? e.message : e.message + " (SQLSTATE " + e.code + ")");
}

net::HttpResponse jsonOk(int status, const nlohmann::json& body) {
  return jsonResponse(status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

namespace {

// The path of the first string holding a NUL ("reason", "items[2].name"),
// or nullopt. Depth is bounded by the parser's own limit.
std::optional<std::string> nulAt(const nlohmann::json& j, const std::string& path) {
  if (j.is_string()) {
    if (j.get_ref<const std::string&>().find('\0') != std::string::npos) return path;
    return std::nullopt;
  }
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) {
      std::string at = path.empty() ? k : path + "." + k;
      if (k.find('\0') != std::string::npos) return path.empty() ? "a member's name" : path;
      if (auto p = nulAt(v, at)) return p;
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i)
      if (auto p = nulAt(j[i], path + "[" + std::to_string(i) + "]")) return p;
  }
  return std::nullopt;
}

}  // namespace

Result<nlohmann::json> bodyObject(const ApiRequest& request) {
  auto j = nlohmann::json::parse(request.http.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{"the body must be a JSON object", "invalid"};
  if (auto at = nulAt(j, ""))
    return Error{"`" + *at + "` holds a NUL character (\\u0000), which no text here may", "invalid"};
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

bool isRfc3339(std::string_view text) {
  static const std::regex re(
      R"(^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,6})?([Zz]|[+-](\d{2}):(\d{2}))$)");
  std::string s(text);
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  auto n = [&](int i) { return m[i].matched ? std::stoi(m[i].str()) : 0; };
  using namespace std::chrono;
  year_month_day d{year(n(1)), month(static_cast<unsigned>(n(2))),
                   day(static_cast<unsigned>(n(3)))};
  return n(1) >= 1970 && d.ok() && n(4) < 24 && n(5) < 60 && n(6) < 60 && n(9) < 24 &&
         n(10) < 60;
}

Result<std::optional<std::string>> timeQuery(const ApiRequest& request, const std::string& name) {
  auto it = request.query.find(name);
  if (it == request.query.end() || it->second.empty()) return std::optional<std::string>{};
  if (!isRfc3339(it->second))
    return Error{"`" + name + "` must be an RFC 3339 time from 1970 to 9999, such as "
                 "2026-01-01T12:00:00Z",
                 "invalid"};
  return std::optional<std::string>(it->second);
}

}  // namespace ductus::api
