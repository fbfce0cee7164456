#include "api/route.h"

#include <nlohmann/json.hpp>
#include <openssl/rand.h>

#include <array>
#include <atomic>

#include "common/log.h"

namespace ductus::api {

std::string_view roleName(Role r) {
  switch (r) {
    case Role::Viewer: return "viewer";
    case Role::Operator: return "operator";
    case Role::Admin: return "admin";
  }
  return "viewer";
}

std::optional<Role> roleFromName(std::string_view name) {
  for (Role r : {Role::Viewer, Role::Operator, Role::Admin})
    if (roleName(r) == name) return r;
  return std::nullopt;
}

namespace {

// libpq's diagnostics: "ERROR:  ...", with DETAIL, HINT and CONTEXT lines
// ("unnamed portal parameter $1 = '...'"); "postgres: " starts the
// connection's own failures (schema/pg_connection.cpp).
bool carriesDatabaseText(std::string_view m) {
  static constexpr std::array<std::string_view, 8> kMarks = {
      "ERROR:  ", "FATAL:  ", "PANIC:  ", "DETAIL:  ", "HINT:  ", "CONTEXT:  ",
      "unnamed portal", "postgres: "};
  for (auto mark : kMarks)
    if (m.find(mark) != std::string_view::npos) return true;
  return false;
}

}  // namespace

std::string newRequestId() {
  unsigned char b[8];
  if (RAND_bytes(b, sizeof b) != 1) {
    static std::atomic<uint64_t> n{0};
    uint64_t v = ++n;
    for (auto& x : b) x = static_cast<unsigned char>(v), v >>= 8;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (unsigned char x : b) id += {kHex[x >> 4], kHex[x & 15]};
  return id;
}

net::HttpResponse jsonErrorWithId(int status, std::string_view code, std::string_view message,
                                  const std::string& id) {
  nlohmann::json body = {{"error", code}, {"message", message}, {"requestId", id}};
  auto r = jsonResponse(status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  r.headers.emplace_back("X-Request-Id", id);
  return r;
}

net::HttpResponse internalError(std::string_view cause) {
  std::string id = newRequestId();
  spdlog::error("api: request {} failed inside the engine: {}", id, cause);
  return jsonErrorWithId(500, "internal",
                         "the operation failed inside the engine; its log names the cause under "
                         "request id " + id,
                         id);
}

net::HttpResponse jsonError(int status, std::string_view code, std::string_view message) {
  if (carriesDatabaseText(message)) {
    // The status and code stand (a 503 audit_unavailable stays one); the
    // text goes to the log.
    std::string id = newRequestId();
    spdlog::error("api: request {} answered {} {}: {}", id, status, code, message);
    return jsonErrorWithId(status, code,
                           "the database refused the operation; the engine's log names the "
                           "cause under request id " + id,
                           id);
  }
  nlohmann::json body = {{"error", code}, {"message", message}};
  // A message may quote what the caller sent, which need not be UTF-8.
  return jsonResponse(status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

net::HttpResponse jsonResponse(int status, std::string body) {
  body += '\n';
  // no-store: answers carry the engine's state and, later, payloads; no
  // proxy or browser cache should keep them.
  return net::HttpResponse{status,
                           {{"Content-Type", "application/json"}, {"Cache-Control", "no-store"}},
                           std::move(body)};
}

}  // namespace ductus::api
