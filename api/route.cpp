#include "api/route.h"

#include <nlohmann/json.hpp>

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

net::HttpResponse jsonError(int status, std::string_view code, std::string_view message) {
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
