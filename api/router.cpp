#include "api/router.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <exception>
#include <set>

#include "common/log.h"

namespace ductus::api {
namespace {

const std::set<std::string, std::less<>> kMethods = {"GET", "POST", "PUT", "PATCH", "DELETE"};

bool isParam(std::string_view seg) {
  return seg.size() > 2 && seg.front() == '{' && seg.back() == '}';
}

bool isCamelCase(std::string_view s) {
  if (s.empty() || s[0] < 'a' || s[0] > 'z') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  });
}

bool isIdentifier(std::string_view s) {
  if (s.empty() || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// Literal path segments use only what needs no escaping in a URL.
bool isLiteral(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
  });
}

// "/api/v1/x" -> {"api", "v1", "x"}; empty segments kept ("//", a trailing
// slash), so they match nothing.
std::vector<std::string> split(std::string_view path) {
  std::vector<std::string> out;
  if (path.empty() || path[0] != '/') return out;
  size_t i = 1;
  for (;;) {
    size_t j = path.find('/', i);
    out.emplace_back(path.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  return out;
}

// The template with its parameters' names taken out: two routes of one
// method whose shapes are equal would be ambiguous.
std::string shapeOf(const std::vector<std::string>& segments) {
  std::string s;
  for (auto& seg : segments) s += "/" + (isParam(seg) ? std::string("{}") : seg);
  return s;
}

bool jsonObjectText(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return !j.is_discarded() && j.is_object();
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string> percentDecode(std::string_view s, bool plusIsSpace) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = hexValue(s[i + 1]), lo = hexValue(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plusIsSpace) {
      c = ' ';
    }
    if (c == '\0') return std::nullopt;
    out += c;
  }
  return out;
}

Status checkRoutes(const std::vector<Route>& routes) {
  std::set<std::string> ids, shapes;
  for (const Route& r : routes) {
    std::string name = r.method + " " + r.path;
    auto bad = [&](const std::string& why) { return Error{"route " + name + ": " + why}; };
    if (!kMethods.count(r.method)) return bad("the method is not one of GET, POST, PUT, PATCH, DELETE");
    if (r.path.rfind("/api/", 0) != 0) return bad("the path must start with /api/");
    auto segments = split(r.path);
    std::set<std::string> params;
    for (auto& seg : segments) {
      if (isParam(seg)) {
        std::string p = seg.substr(1, seg.size() - 2);
        if (!isIdentifier(p)) return bad("path parameter {" + p + "} is not a name");
        if (!params.insert(p).second) return bad("path parameter {" + p + "} appears twice");
      } else if (!isLiteral(seg)) {
        return bad("path segment \"" + seg + "\" is empty or needs escaping");
      }
    }
    if (!isCamelCase(r.operationId))
      return bad("operationId \"" + r.operationId + "\" is not camelCase");
    if (!ids.insert(r.operationId).second)
      return bad("operationId " + r.operationId + " is taken by another route");
    if (!shapes.insert(r.method + " " + shapeOf(segments)).second)
      return bad("another route has the same method and path");
    if (r.summary.empty()) return bad("no summary");
    if (r.tag.empty()) return bad("no tag");
    if (!r.handler) return bad("no handler");
    // Who may call it is a decision: Requirement::anyone(), toRead() or
    // toChange(), never a default.
    if (!r.requirement.stated)
      return bad("no stated requirement (use Requirement::anyone, toRead or toChange)");
    if (r.requirement.anonymous && r.requirement.permissions != kNoPermission)
      return bad("an anonymous route can't ask for permissions");
    // The X-Ductus rule guards changes; a GET can't carry it from a form,
    // and every other method must be guarded by it.
    if (r.method == "GET" && r.requirement.changes)
      return bad("a GET must not change anything");
    if (r.method != "GET" && !r.requirement.anonymous && !r.requirement.changes)
      return bad("a " + r.method + " changes something: use Requirement::toChange");
    for (auto& [q, description] : r.queryParams)
      if (!isIdentifier(q)) return bad("query parameter \"" + q + "\" is not a name");
    if (!r.requestSchema.empty() && !jsonObjectText(r.requestSchema))
      return bad("requestSchema is not a JSON object");
    if (!r.responseSchema.empty() && !jsonObjectText(r.responseSchema))
      return bad("responseSchema is not a JSON object");
    // 302: single sign-on's routes send the browser on (api/auth/oidc_routes.h).
    if ((r.successStatus < 200 || r.successStatus > 299) && r.successStatus != 302)
      return bad("successStatus must be 2xx, or 302 for a redirect");
  }
  return {};
}

Router::Router(std::shared_ptr<const std::vector<Route>> routes, Authenticator* authenticator)
    : table_(std::move(routes)), authenticator_(authenticator) {
  for (auto& r : *table_) segments_.push_back(split(r.path));
}

Result<std::unique_ptr<Router>> Router::make(std::vector<Route> routes,
                                              Authenticator* authenticator) {
  if (auto s = checkRoutes(routes); !s) return s.error();
  if (!authenticator)
    for (auto& r : routes)
      if (!r.requirement.anonymous)
        return Error{"route " + r.method + " " + r.path + " needs a caller, and no authenticator "
                     "was given"};
  auto table = std::make_shared<const std::vector<Route>>(std::move(routes));
  return std::unique_ptr<Router>(new Router(std::move(table), authenticator));
}

namespace {

net::HttpResponse unauthenticated(std::string_view message) {
  auto r = jsonError(401, "unauthenticated", message);
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

// The Requirement, held against a known caller; nullopt when it passes.
std::optional<net::HttpResponse> refusal(const Requirement& need, const Caller& caller,
                                         const net::HttpRequest& http) {
  if (static_cast<int>(caller.role) < static_cast<int>(need.role))
    return jsonError(403, "forbidden",
                     "this operation needs the " + std::string(roleName(need.role)) +
                         " role; " + caller.name + " has " + std::string(roleName(caller.role)));
  if ((caller.permissions & need.permissions) != need.permissions) {
    std::string missing;
    unsigned lacking = need.permissions & ~caller.permissions;
    if (lacking & kPayloads) missing += "payloads";
    if (lacking & kAudit) missing += std::string(missing.empty() ? "" : " and ") + "audit";
    return jsonError(403, "forbidden", "this operation needs the " + missing + " permission");
  }
  // A cross-site form can make the browser send the cookie, never this header.
  if (caller.via == Via::Session && need.changes) {
    auto x = http.header("x-ductus");
    if (!x || *x != "1")
      return jsonError(403, "x_ductus_required",
                       "a change made with a session cookie must carry the header X-Ductus: 1");
  }
  return std::nullopt;
}

void callHandler(const Route& route, const ApiRequest& request, net::HttpRespond respond) {
  // nlohmann::json and the standard library throw; a handler's mistake
  // answers 500 and never takes the engine down.
  try {
    route.handler(request, respond);
  } catch (const std::exception& e) {
    respond(internalError(request.http.method + " " + request.http.path + ": " + e.what()));
  }
}

}  // namespace

void Router::handle(const net::HttpRequest& http, net::HttpRespond respond) {
  auto segments = split(http.path);
  std::string method = http.method == "HEAD" ? "GET" : http.method;

  // The most specific template that matches: at the first segment where
  // two differ, a literal beats a parameter.
  std::string best;  // per segment 'b' literal, 'a' parameter: larger is more specific
  std::vector<size_t> candidates;
  for (size_t i = 0; i < segments_.size(); ++i) {
    const auto& t = segments_[i];
    if (t.size() != segments.size()) continue;
    std::string key;
    bool match = true;
    for (size_t k = 0; k < t.size() && match; ++k) {
      if (isParam(t[k])) {
        key += 'a';
        match = !segments[k].empty();
      } else {
        key += 'b';
        match = t[k] == segments[k];
      }
    }
    if (!match) continue;
    if (key > best) {
      best = key;
      candidates.clear();
    }
    if (key == best) candidates.push_back(i);
  }
  if (candidates.empty())
    return respond(jsonError(404, "not_found", "no operation at " + http.path));
  const Route* route = nullptr;
  size_t index = 0;
  std::string allow;
  for (size_t i : candidates) {
    const Route& r = (*table_)[i];
    allow += (allow.empty() ? "" : ", ") + r.method;
    if (r.method == "GET") allow += ", HEAD";
    if (r.method == method) {
      route = &r;
      index = i;
    }
  }
  if (!route) {
    auto r = jsonError(405, "method_not_allowed",
                       http.method + " is not an operation of " + http.path + "; allowed: " + allow);
    r.headers.emplace_back("Allow", allow);
    return respond(std::move(r));
  }

  std::map<std::string, std::string> params;
  const auto& t = segments_[index];
  for (size_t k = 0; k < t.size(); ++k) {
    if (!isParam(t[k])) continue;
    std::string name = t[k].substr(1, t[k].size() - 2);
    auto v = percentDecode(segments[k], false);
    if (!v || v->size() > kMaxParamBytes)
      return respond(jsonError(400, "bad_request",
                               "path parameter " + name + " is malformed or over " +
                                   std::to_string(kMaxParamBytes) + " bytes"));
    params[name] = std::move(*v);
  }

  std::map<std::string, std::string> query;
  size_t count = 0;
  std::string_view q = http.query;
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view piece = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (piece.empty()) continue;
    if (++count > kMaxQueryParams)
      return respond(jsonError(400, "bad_request",
                               "more than " + std::to_string(kMaxQueryParams) + " query parameters"));
    size_t eq = piece.find('=');
    auto name = percentDecode(piece.substr(0, eq), true);
    auto value = percentDecode(eq == std::string_view::npos ? std::string_view() : piece.substr(eq + 1),
                               true);
    if (!name || !value || value->size() > kMaxParamBytes)
      return respond(jsonError(400, "bad_request",
                               "a query parameter is malformed or over " +
                                   std::to_string(kMaxParamBytes) + " bytes"));
    if (!route->queryParams.count(*name)) {
      std::string known;
      for (auto& [k, d] : route->queryParams) known += (known.empty() ? "" : ", ") + k;
      return respond(jsonError(400, "bad_request",
                               "unknown query parameter \"" + *name + "\"" +
                                   (known.empty() ? "; this operation takes none"
                                                  : "; this operation takes " + known)));
    }
    query[*name] = std::move(*value);
  }

  if (route->requirement.anonymous) {
    ApiRequest request{http, std::move(params), std::move(query), std::nullopt};
    return callHandler(*route, request, std::move(respond));
  }

  // The authenticator may answer later: the request and the route table
  // are kept until it does.
  auto held = std::make_shared<const net::HttpRequest>(http);
  auto table = table_;
  auto alive = alive_;
  authenticator_->identify(
      *held, [held, table, index, alive, respond, params = std::move(params),
              query = std::move(query)](Result<std::optional<Caller>> who) mutable {
        if (!*alive) return respond(jsonError(503, "unavailable", "the API is closing"));
        if (!who) {
          if (who.error().kind == ErrorKind::Unavailable) {
            spdlog::warn("api: credentials of {} could not be checked: {}", held->peer,
                         who.error().message);
            auto r = jsonError(503, "unavailable", "the credentials could not be checked now");
            r.headers.emplace_back("Retry-After", "5");
            return respond(std::move(r));
          }
          spdlog::debug("api: {} {} from {}: refused: {}", held->method, held->path, held->peer,
                        who.error().message);
          // Signed in, but told to choose a password of their own first:
          // who they are is known, so forbidden rather than unauthenticated.
          if (who.error().kind == ErrorKind::PasswordChangeRequired ||
              who.error().kind == ErrorKind::TotpRequired)
            return respond(jsonError(403, kindName(who.error().kind), who.error().message));
          return respond(unauthenticated("the credentials are wrong, expired or revoked"));
        }
        if (!*who)
          return respond(unauthenticated(
              "this operation needs a token (Authorization: Bearer) or a signed-in session"));
        const Route& route = (*table)[index];
        Caller caller = std::move(**who);
        if (caller.address.empty()) caller.address = held->peer;
        if (auto no = refusal(route.requirement, caller, *held)) return respond(std::move(*no));
        ApiRequest request{*held, std::move(params), std::move(query), std::move(caller)};
        callHandler(route, request, std::move(respond));
      });
}

}  // namespace ductus::api
