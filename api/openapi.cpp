#include "api/openapi.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

#include "common/version.h"

namespace ductus::api {
namespace {

// Keys in the order they are written: "openapi" first reads as a person
// expects, and `ductus api-spec` prints the same bytes every time.
using ojson = nlohmann::ordered_json;

constexpr const char* kErrorSchema = R"({
  "type": "object",
  "required": ["error", "message"],
  "properties": {
    "error": {"type": "string", "description": "a code a program can test: not_found, forbidden, ..."},
    "message": {"type": "string", "description": "what went wrong, for a person"}
  }
})";

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> pathParams(const std::string& path) {
  std::vector<std::string> out;
  size_t i = 0;
  while ((i = path.find('{', i)) != std::string::npos) {
    size_t j = path.find('}', i);
    if (j == std::string::npos) break;
    out.push_back(path.substr(i + 1, j - i - 1));
    i = j + 1;
  }
  return out;
}

ojson errorResponse(const std::string& description) {
  return {{"description", description},
          {"content", {{"application/json", {{"schema", {{"$ref", "#/components/schemas/Error"}}}}}}}};
}

std::string whoMayCall(const Requirement& r) {
  if (r.anonymous) return "No credentials needed.";
  std::string s = "Needs the " + std::string(roleName(r.role)) + " role";
  if (r.permissions & kPayloads) s += " and the payloads permission";
  if (r.permissions & kAudit) s += std::string(r.permissions & kPayloads ? "," : "") +
                                   " and the audit permission";
  s += ".";
  if (r.changes) s += " With a session cookie, send the header X-Ductus: 1.";
  return s;
}

ojson operation(const Route& r) {
  ojson op;
  op["operationId"] = r.operationId;
  op["summary"] = r.summary;
  op["description"] = whoMayCall(r.requirement);
  op["tags"] = ojson::array({r.tag});
  // Anonymous: an empty list overrides the document's default security.
  op["security"] = r.requirement.anonymous ? ojson::array()
                                           : ojson::array({{{"bearer", ojson::array()}},
                                                           {{"session", ojson::array()}}});
  ojson params = ojson::array();
  for (auto& p : pathParams(r.path))
    params.push_back(
        {{"name", p}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}});
  for (auto& [name, description] : r.queryParams)
    params.push_back({{"name", name},
                      {"in", "query"},
                      {"required", false},
                      {"description", description},
                      {"schema", {{"type", "string"}}}});
  if (r.requirement.changes && !r.requirement.anonymous)
    params.push_back({{"name", "X-Ductus"},
                      {"in", "header"},
                      {"required", false},
                      {"description", "1; required when the caller signs in with a session cookie"},
                      {"schema", {{"type", "string"}, {"const", "1"}}}});
  if (!params.empty()) op["parameters"] = std::move(params);
  if (!r.requestSchema.empty())
    op["requestBody"] = {
        {"required", true},
        {"content", {{"application/json", {{"schema", ojson::parse(r.requestSchema)}}}}}};

  ojson responses;
  ojson ok = {{"description", r.successStatus == 302 ? "redirect (Location)" : "success"}};
  if (!r.responseSchema.empty())
    ok["content"] = {{r.responseContentType.empty() ? "application/json" : r.responseContentType,
                      {{"schema", ojson::parse(r.responseSchema)}}}};
  responses[std::to_string(r.successStatus)] = std::move(ok);
  bool hasInput = !r.queryParams.empty() || !pathParams(r.path).empty() || !r.requestSchema.empty();
  if (!r.badRequestSchema.empty())
    responses["400"] = {
        {"description", "a malformed parameter or body, or one the operation refuses"},
        {"content", {{"application/json", {{"schema", ojson::parse(r.badRequestSchema)}}}}}};
  else if (hasInput)
    responses["400"] = {{"$ref", "#/components/responses/BadRequest"}};
  if (!r.requirement.anonymous) {
    responses["401"] = {{"$ref", "#/components/responses/Unauthenticated"}};
    responses["403"] = {{"$ref", "#/components/responses/Forbidden"}};
  }
  responses["default"] = {{"$ref", "#/components/responses/Error"}};
  op["responses"] = std::move(responses);

  ojson need = {{"anonymous", r.requirement.anonymous}, {"changes", r.requirement.changes}};
  if (!r.requirement.anonymous) {
    need["role"] = roleName(r.requirement.role);
    ojson perms = ojson::array();
    if (r.requirement.permissions & kPayloads) perms.push_back("payloads");
    if (r.requirement.permissions & kAudit) perms.push_back("audit");
    need["permissions"] = std::move(perms);
  }
  op["x-ductus-requirement"] = std::move(need);
  return op;
}

}  // namespace

std::string openApiDocument(const std::vector<Route>& routes) {
  ojson doc;
  doc["openapi"] = "3.1.0";
  doc["info"] = {
      {"title", "Ductus REST API"},
      {"version", kVersion},
      {"description",
       "The engine's REST API. Callers show a bearer token (Authorization: Bearer dux_...) or "
       "a browser session's ductus_session cookie. Roles are ordered viewer < operator < admin; "
       "the payloads and audit permissions stand beside them. Errors are JSON: "
       "{\"error\": code, \"message\": text}."}};

  std::vector<std::string> tags;
  for (auto& r : routes)
    if (std::find(tags.begin(), tags.end(), r.tag) == tags.end()) tags.push_back(r.tag);
  doc["tags"] = ojson::array();
  for (auto& t : tags) doc["tags"].push_back({{"name", t}});

  ojson paths = ojson::object();
  for (auto& r : routes) paths[r.path][lower(r.method)] = operation(r);
  doc["paths"] = std::move(paths);

  doc["components"] = {
      {"schemas", {{"Error", ojson::parse(kErrorSchema)}}},
      {"responses",
       {{"BadRequest", errorResponse("a malformed parameter or body, or an unknown query parameter")},
        {"Unauthenticated",
         errorResponse("no credentials, or wrong, expired or revoked ones (WWW-Authenticate: Bearer)")},
        {"Forbidden",
         errorResponse("the caller lacks the role or permission, or a session's change came "
                       "without X-Ductus: 1")},
        {"Error", errorResponse("an error")}}},
      {"securitySchemes",
       {{"bearer",
         {{"type", "http"},
          {"scheme", "bearer"},
          {"description", "an API token, dux_ followed by 64 hex digits"}}},
        {"session",
         {{"type", "apiKey"},
          {"in", "cookie"},
          {"name", "ductus_session"},
          {"description", "a browser session, from signing in"}}}}}};
  return doc.dump(2);
}

Route openApiRoute(std::shared_ptr<const std::string> document) {
  Route r;
  r.method = "GET";
  r.path = "/api/v1/openapi.json";
  r.operationId = "getOpenApiDocument";
  r.summary = "This document: the OpenAPI 3.1 description of every operation";
  r.tag = "meta";
  r.requirement = Requirement::anyone();
  r.responseSchema = R"({"type": "object"})";
  r.handler = [document](const ApiRequest&, ApiRespond respond) {
    respond(jsonResponse(200, *document));
  };
  return r;
}

}  // namespace ductus::api
