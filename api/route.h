// What every part of the REST API shares: who calls (Caller), what an
// operation asks of its caller (Requirement), and the route table entry
// (Route) that both the server and the OpenAPI document are made from, so
// the document cannot drift from what the server answers.
//
// Roles are ordered: viewer < operator < admin. Two permissions stand
// beside the roles: `payloads` (read message contents) and `audit` (read
// the audit log). A token owned by a user acts as that user at most.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/net/http_server.h"
#include "common/result.h"

namespace ductus::api {

enum class Role { Viewer = 1, Operator = 2, Admin = 3 };

// Bits of Caller::permissions and Requirement::permissions.
enum Permission : unsigned {
  kNoPermission = 0,
  kPayloads = 1u << 0,  // read message payloads and outputs
  kAudit = 1u << 1,     // read the audit log
};

std::string_view roleName(Role r);                      // "viewer"
std::optional<Role> roleFromName(std::string_view name);  // nullopt: not a role

// How a caller proved who it is.
// Local: a person on the engine's machine, through ductusctl and the
// control socket (api/auth/local_caller.h), never from the network.
enum class Via { Token, Session, Local };

// "token", "session", "control" (the audit log's `via`).
inline std::string_view viaName(Via v) {
  switch (v) {
    case Via::Token: return "token";
    case Via::Session: return "session";
    case Via::Local: return "control";
  }
  return "token";
}

struct Caller {
  Via via = Via::Token;
  int64_t userId = 0;   // 0: a token that belongs to no user
  int64_t tokenId = 0;  // Via::Token
  int64_t sessionId = 0;  // Via::Session
  std::string name;     // the user's name, or the token's for a token without one
  Role role = Role::Viewer;
  unsigned permissions = kNoPermission;
  std::string address;  // the peer, "127.0.0.1:53412"
  // Where the user signs in: "local", "ldap", "oidc"; "" for a token of no
  // user (api/auth/accounts.h's UserInfo::source).
  std::string source;
};

// What an operation asks of its caller. `anonymous`: no credentials needed
// (GET /health, sign-in). `changes`: the operation changes something, so a
// browser session must also send `X-Ductus: 1` (a cross-site form cannot).
struct Requirement {
  bool anonymous = false;
  Role role = Role::Viewer;
  unsigned permissions = kNoPermission;
  bool changes = false;
  // Set only by the three below. The router refuses a route whose
  // requirement was not made by one of them (a default one, or one filled
  // in field by field), so who may call an operation is always written
  // down on purpose, never left to a default.
  bool stated = false;

  // No credentials needed: GET /health, sign-in.
  static Requirement anyone(bool changes = false) {
    Requirement r;
    r.anonymous = true;
    r.changes = changes;
    r.stated = true;
    return r;
  }
  // The role (or higher) and every permission given; reads only.
  static Requirement toRead(Role role, unsigned permissions = kNoPermission) {
    Requirement r;
    r.role = role;
    r.permissions = permissions;
    r.stated = true;
    return r;
  }
  // As toRead, for an operation that changes something.
  static Requirement toChange(Role role, unsigned permissions = kNoPermission) {
    Requirement r = toRead(role, permissions);
    r.changes = true;
    return r;
  }
};

// One request as a handler sees it, valid during the handler's call only: a
// handler that answers later copies what it needs.
struct ApiRequest {
  const net::HttpRequest& http;
  std::map<std::string, std::string> params;  // from the path template, decoded
  std::map<std::string, std::string> query;   // decoded; the last of a repeated name
  std::optional<Caller> caller;               // set unless the route is anonymous
};

using ApiRespond = net::HttpRespond;
using ApiHandler = std::function<void(const ApiRequest&, ApiRespond)>;

// One operation: the row of the route table.
struct Route {
  std::string method;       // "GET"
  std::string path;         // "/api/v1/interfaces/{name}/messages/{id}"
  std::string operationId;  // unique, camelCase: "listMessages"
  std::string summary;      // one line, for the OpenAPI document
  std::string tag;          // "engine", "messages", "auth", ...
  Requirement requirement;
  ApiHandler handler;
  // JSON Schemas (as JSON text) for the OpenAPI document; empty: none.
  std::string requestSchema;
  std::string responseSchema;
  // Query parameters the operation reads: name -> description.
  std::map<std::string, std::string> queryParams;
  // The status of a successful answer, for the document (201 for a create).
  int successStatus = 200;
  // The success answer's media type, for the document; "" is JSON. Last,
  // with an initializer, so routes written as {field, field, ...} need
  // not name it.
  std::string responseContentType = {};
  // A 400's schema when it says more than {error, message} (the payload's
  // problems, say); "" is the shared BadRequest answer.
  std::string badRequestSchema = {};
};

// Identifies a caller from a request's credentials (Authorization: Bearer
// dux_..., or the ductus_session cookie). Answers once, on the loop:
// nullopt when the request carries none, an Error when they are wrong or
// revoked (the server answers 401 for both). An Error of kind Unavailable
// means the credentials could not be checked at all (the database is
// down): the server answers 503 instead, so a client retries rather than
// signing in again.

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  virtual void identify(const net::HttpRequest& request,
                        std::function<void(Result<std::optional<Caller>>)> done) = 0;
};

// A JSON error response: {"error": code, "message": message}. A message
// that carries PostgreSQL's own diagnostics (a handler passing a database
// Error's text on) is not sent: it is logged under a request id, and the
// answer (same status and code) carries the id instead, so no route can
// show a caller the schema, a parameter or a row.
net::HttpResponse jsonError(int status, std::string_view code, std::string_view message);
// As jsonError, with "requestId": id in the body and X-Request-Id.
net::HttpResponse jsonErrorWithId(int status, std::string_view code, std::string_view message,
                                  const std::string& id);
// 16 random hex digits naming one answer in the log.
std::string newRequestId();
// The 500 for a failure inside the engine: `cause` is logged under a new
// request id, and the answer carries the id only.
net::HttpResponse internalError(std::string_view cause);
// A JSON response with the given body (already JSON text).
net::HttpResponse jsonResponse(int status, std::string body);

}  // namespace ductus::api
