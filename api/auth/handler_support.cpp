#include "api/auth/handler_support.h"

#include <charconv>
#include <chrono>
#include <regex>

#include "common/log.h"
#include "schema/pg_error.h"

namespace ductus::api {

// The one mapping from an error's kind to an HTTP answer. The JSON `error`
// is the kind's name, so a client tells "exists" from "conflict" without
// reading the text.
net::HttpResponse errorResponse(const Error& e) {
  switch (e.kind) {
    case ErrorKind::Invalid:
    case ErrorKind::WeakPassword:
      return jsonError(400, kindName(e.kind), e.message);
    case ErrorKind::Unauthenticated:
    case ErrorKind::Denied:
      return jsonError(401, "unauthenticated", e.message);
    case ErrorKind::PasswordChangeRequired:
    case ErrorKind::TotpRequired:
      return jsonError(403, kindName(e.kind), e.message);
    case ErrorKind::NotFound:
      return jsonError(404, kindName(e.kind), e.message);
    case ErrorKind::Exists:
    case ErrorKind::Conflict:
    case ErrorKind::NothingToChange:
    case ErrorKind::StillPending:
    case ErrorKind::NotRunHere:
      return jsonError(409, kindName(e.kind), e.message);
    case ErrorKind::Code:
      return jsonError(422, kindName(e.kind), e.message);
    case ErrorKind::Busy: {
      auto r = jsonError(503, "unavailable", e.message);
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
    case ErrorKind::Unavailable:
    case ErrorKind::Database:
      // A statement or schema that doesn't fit is the engine's mistake
      // (500); anything else PostgreSQL says (a lost connection, no room, a
      // trigger refusing the audit row) is the database unable to serve now.
      if (e.kind == ErrorKind::Database && store::pg::engineMistake(e)) break;
      {
        std::string id = newRequestId();
        spdlog::warn("api: request {}: the database can't serve it: {}{}", id, e.message,
                     e.sqlstate.empty() ? "" : " (SQLSTATE " + e.sqlstate + ")");
        auto r =
            jsonErrorWithId(503, "unavailable",
                            "the database is unavailable; try again (request id " + id + ")", id);
        r.headers.emplace_back("Retry-After", "1");
        return r;
      }
    case ErrorKind::Internal:
    case ErrorKind::Config:
    case ErrorKind::NotRunning:
    case ErrorKind::OwnedElsewhere:
    case ErrorKind::Stranded:
      break;
  }
  return internalError(e.sqlstate.empty() ? e.message
                                          : e.message + " (SQLSTATE " + e.sqlstate + ")");
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
  if (j.is_discarded() || !j.is_object())
    return Error{"the body must be a JSON object", ErrorKind::Invalid};
  if (auto at = nulAt(j, ""))
    return Error{"`" + *at + "` holds a NUL character (\\u0000), which no text here may",
                 ErrorKind::Invalid};
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
    return Error{"`" + name + "` must be a whole number", ErrorKind::Invalid};
  return std::optional<int64_t>(v);
}

namespace {
const std::regex& rfc3339Pattern() {
  static const std::regex re(
      R"(^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,6})?([Zz]|([+-])(\d{2}):(\d{2}))$)");
  return re;
}
}  // namespace

std::optional<int64_t> rfc3339Seconds(std::string_view text) {
  if (!isRfc3339(text)) return std::nullopt;
  std::string s(text);
  std::smatch m;
  std::regex_match(s, m, rfc3339Pattern());
  auto n = [&](int i) { return m[i].matched ? std::stoi(m[i].str()) : 0; };
  using namespace std::chrono;
  sys_days date{year_month_day{year(n(1)), month(static_cast<unsigned>(n(2))),
                               day(static_cast<unsigned>(n(3)))}};
  int64_t t =
      duration_cast<std::chrono::seconds>(date.time_since_epoch()).count() + n(4) * 3600 + n(5) * 60 + n(6);
  if (m[9].matched) {
    int64_t offset = n(10) * 3600 + n(11) * 60;
    t += m[9].str() == "+" ? -offset : offset;
  }
  return t;
}

bool isRfc3339(std::string_view text) {
  const std::regex& re = rfc3339Pattern();
  std::string s(text);
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  auto n = [&](int i) { return m[i].matched ? std::stoi(m[i].str()) : 0; };
  using namespace std::chrono;
  year_month_day d{year(n(1)), month(static_cast<unsigned>(n(2))),
                   day(static_cast<unsigned>(n(3)))};
  // 9 is the offset's sign; 10 and 11 its hours and minutes.
  return n(1) >= 1970 && d.ok() && n(4) < 24 && n(5) < 60 && n(6) < 60 && n(10) < 24 && n(11) < 60;
}

Result<std::optional<std::string>> timeQuery(const ApiRequest& request, const std::string& name) {
  auto it = request.query.find(name);
  if (it == request.query.end() || it->second.empty()) return std::optional<std::string>{};
  if (!isRfc3339(it->second))
    return Error{"`" + name +
                     "` must be an RFC 3339 time from 1970 to 9999, such as "
                     "2026-01-01T12:00:00Z",
                 ErrorKind::Invalid};
  return std::optional<std::string>(it->second);
}

}  // namespace ductus::api
