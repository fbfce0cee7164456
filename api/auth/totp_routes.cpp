#include "api/auth/totp_routes.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <memory>

#include "api/auth/accounts.h"
#include "api/auth/handler_support.h"
#include "api/auth/totp.h"
#include "schema/pg_transaction.h"

namespace ductus::api {
namespace {

using json = nlohmann::json;
using store::PgResult;
using LeasePtr = store::PgPool::LeasePtr;
using Results = std::vector<PgResult>;

// The name the app shows beside the code.
constexpr std::string_view kIssuer = "Ductus";

// A second factor belongs to a person signing in: a session's user.
std::optional<net::HttpResponse> notASessionUser(const Caller& c) {
  if (c.userId == 0 || c.via != Via::Session)
    return jsonError(400, "not_a_session",
                     "a second factor is turned on and off from a signed-in session of its user");
  return std::nullopt;
}

net::HttpResponse noStore(net::HttpResponse r) {
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

// Keeps a new secret, not yet in use (a secret not yet confirmed is
// replaced: the person scans again), and answers it.
void storeNewTotpSecret(AuthDeps& d, const Caller& c, const ApiRespond& respond) {
  auto secret = newTotpSecret();
  if (!secret) return respond(errorResponse(secret.error()));
  withConnection(d.pool, respond, [&d, c, respond, secret = *secret](LeasePtr l) {
    std::vector<TxStep> steps;
    steps.push_back(fixedStep({"UPDATE users SET totp_secret = $2, updated_at = $3 "
                               "WHERE id = $1 AND NOT totp_enabled RETURNING id",
                               {std::to_string(c.userId), secret, pgTime(d.clock())}}));
    steps.push_back([&d, c](const Results& r) -> Result<SqlStatement> {
      if (r[0].rows() == 0)
        return Error{"this user's second factor is on already; turn it off first "
                     "(POST /api/v1/me/totp/disable)",
                     ErrorKind::Conflict};
      return d.audit.statement(auditEntryAboutCaller(c, "user.totp.begin"));
    });
    runTransaction(l->conn(), std::move(steps), [l, c, respond, secret](Result<Results> r) {
      if (!r) return respond(errorResponse(r.error()));
      respond(noStore(jsonOk(201, {{"secret", secret},
                                   {"uri", otpauthUri(kIssuer, c.name, secret)}})));
    });
  });
}

}  // namespace

// ---- POST /api/v1/me/totp ----------------------------------------------------

// The password again: a session left open on a shared screen must not be
// enough to put a second factor of someone else's on the account (the user
// would then be shut out), as it is not enough to change the password.
void beginTotp(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  const Caller c = *req.caller;
  if (auto no = notASessionUser(c)) return respond(std::move(*no));
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto password = stringField(*body, "password");
  if (!password)
    return respond(jsonError(400, "invalid", "give {\"password\": \"your password\"}"));
  if (password->size() > d.policy.maxPasswordLength)
    return respond(jsonError(400, "invalid", "the password is too long"));
  checkCallerPassword(d, c, std::move(*password),
                      {"user.totp.begin", "wrong password", "the password is wrong"}, respond,
                      [&d, c, respond] { storeNewTotpSecret(d, c, respond); });
}

// ---- POST /api/v1/me/totp/confirm ---------------------------------------------

void confirmTotp(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  const Caller c = *req.caller;
  if (auto no = notASessionUser(c)) return respond(std::move(*no));
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto code = stringField(*body, "code");
  if (!code) return respond(jsonError(400, "invalid", "give {\"code\": \"the app's 6 digits\"}"));
  withConnection(d.pool, respond, [&d, c, respond, code = *code](LeasePtr l) {
    l->conn().query(
        "SELECT totp_enabled, totp_secret, totp_last_step FROM users WHERE id = $1",
        {std::to_string(c.userId)}, [&d, c, respond, code, l](Result<PgResult> r) {
          if (!r) return respond(errorResponse(r.error()));
          if (r->rows() == 0) return respond(jsonError(404, "not_found", "no such user"));
          if (r->text(0, 0) == "t")
            return respond(jsonError(409, "conflict", "this user's second factor is on already"));
          if (r->isNull(0, 1))
            return respond(jsonError(409, "conflict",
                                     "no second factor is being set up: POST /api/v1/me/totp first"));
          std::string secret(r->text(0, 1));
          std::optional<int64_t> last;
          if (!r->isNull(0, 2)) last = r->integer(0, 2);
          auto step = matchTotp(secret, code, d.clock(), last);
          if (!step) {
            auto e = auditEntryAboutCaller(c, "user.totp.enable");
            e.outcome = "denied";
            e.detail["reason"] = "wrong code";
            return d.audit.write(e, [respond](Status) {
              respond(jsonError(400, "wrong_code",
                                "that is not the code the app shows now; check the phone's "
                                "clock and try the next one"));
            });
          }
          auto codes = newRecoveryCodes();
          if (!codes) return respond(errorResponse(codes.error()));
          std::string hashes = "{";
          for (size_t i = 0; i < codes->size(); ++i)
            hashes += (i ? "," : "") + recoveryCodeHash((*codes)[i]);
          hashes += "}";
          std::vector<TxStep> steps;
          // Only the secret this answer checked the code against: a second
          // POST /me/totp meanwhile made another.
          steps.push_back(fixedStep(
              {"UPDATE users SET totp_enabled = true, totp_last_step = $2, totp_recovery = $3, "
               "updated_at = $5 WHERE id = $1 AND NOT totp_enabled AND totp_secret = $4 "
               "RETURNING id",
               {std::to_string(c.userId), std::to_string(*step), hashes, secret,
                pgTime(d.clock())}}));
          steps.push_back([&d, c](const Results& r) -> Result<SqlStatement> {
            if (r[0].rows() == 0)
              return Error{"the second factor changed meanwhile: start again (POST /api/v1/me/totp)",
                           ErrorKind::Conflict};
            return d.audit.statement(auditEntryAboutCaller(c, "user.totp.enable"));
          });
          runTransaction(l->conn(), std::move(steps),
                         [l, respond, codes = *codes](Result<Results> r) {
                           if (!r) return respond(errorResponse(r.error()));
                           respond(noStore(jsonOk(200, {{"recoveryCodes", codes}})));
                         });
        });
  });
}

// ---- POST /api/v1/me/totp/disable -----------------------------------------------

void disableTotp(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  const Caller c = *req.caller;
  if (auto no = notASessionUser(c)) return respond(std::move(*no));
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto code = stringField(*body, "code");
  if (!code)
    return respond(jsonError(400, "invalid", "give {\"code\": \"the app's 6 digits\"}"));
  withConnection(d.pool, respond, [&d, c, respond, code = *code](LeasePtr l) {
    l->conn().query(
        "SELECT totp_enabled, coalesce(totp_secret, ''), totp_last_step, "
        "EXISTS (SELECT 1 FROM totp_required_roles t WHERE t.role = users.role) "
        "FROM users WHERE id = $1",
        {std::to_string(c.userId)}, [&d, c, respond, code, l](Result<PgResult> r) {
          if (!r) return respond(errorResponse(r.error()));
          if (r->rows() == 0) return respond(jsonError(404, "not_found", "no such user"));
          if (r->text(0, 0) != "t")
            return respond(jsonError(409, "conflict", "this user has no second factor on"));
          if (r->text(0, 3) == "t")
            return respond(jsonError(409, "required",
                                     "your role must sign in with a second factor; an admin can "
                                     "reset yours (DELETE /api/v1/users/{name}/totp)"));
          std::optional<int64_t> last;
          if (!r->isNull(0, 2)) last = r->integer(0, 2);
          auto step = matchTotp(r->text(0, 1), code, d.clock(), last);
          if (!step) {
            // Counted as a failed sign-in: a stolen session can't try every code.
            auto e = auditEntryAboutCaller(c, "user.totp.disable");
            e.outcome = "denied";
            e.detail["reason"] = "wrong code";
            return recordFailure(d, c.userId, e, [respond](Result<bool> r) {
              if (!r) return respond(errorResponse(r.error()));
              respond(jsonError(400, "wrong_code", "that is not the code the app shows now"));
            });
          }
          std::vector<TxStep> steps;
          steps.push_back(fixedStep(
              {"UPDATE users SET totp_enabled = false, totp_secret = NULL, "
               "totp_last_step = NULL, totp_recovery = '{}', updated_at = $3 "
               "WHERE id = $1 AND totp_enabled "
               "AND (totp_last_step IS NULL OR totp_last_step < $2) RETURNING id",
               {std::to_string(c.userId), std::to_string(*step), pgTime(d.clock())}}));
          steps.push_back([&d, c](const Results& r) -> Result<SqlStatement> {
            if (r[0].rows() == 0)
              return Error{"that code was used meanwhile; use the next one", ErrorKind::Conflict};
            return d.audit.statement(auditEntryAboutCaller(c, "user.totp.disable"));
          });
          runTransaction(l->conn(), std::move(steps), [l, respond](Result<Results> r) {
            if (!r) return respond(errorResponse(r.error()));
            net::HttpResponse resp;
            resp.status = 204;
            respond(std::move(resp));
          });
        });
  });
}

// ---- DELETE /api/v1/users/{name}/totp ---------------------------------------------

// A lost phone: the admin turns the user's second factor off and ends their
// sessions; the user signs in with the password alone and sets up a new one
// (at once, if their role needs it).
void resetTotpRoute(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  auto who = auditEntryFor(*req.caller, "");
  std::string name = req.params.at("name");
  withConnection(d.pool, respond, [&d, respond, name, who](LeasePtr l) {
    resetTotp(l->conn(), name, who, d.clock(), [l, respond](Result<UserInfo> r) {
      if (!r) return respond(errorResponse(r.error()));
      net::HttpResponse resp;
      resp.status = 204;
      respond(std::move(resp));
    });
  });
}

// ---- GET / PUT /api/v1/auth/totp ----------------------------------------------------

void getTotpPolicy(AuthDeps& d, const ApiRequest&, ApiRespond respond) {
  withConnection(d.pool, respond, [respond](LeasePtr l) {
    l->conn().query("SELECT role FROM totp_required_roles ORDER BY role", {},
                    [l, respond](Result<PgResult> r) {
                      if (!r) return respond(errorResponse(r.error()));
                      json roles = json::array();
                      for (int i = 0; i < r->rows(); ++i) roles.push_back(std::string(r->text(i, 0)));
                      respond(jsonOk(200, {{"requiredFor", roles}}));
                    });
  });
}

void putTotpPolicy(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto it = body->find("requiredFor");
  if (it == body->end() || !it->is_array() || body->size() != 1)
    return respond(jsonError(400, "invalid",
                             "give {\"requiredFor\": [roles]}: viewer, operator, admin"));
  std::vector<std::string> roles;
  for (auto& v : *it) {
    if (!v.is_string() || !roleFromName(v.get<std::string>()))
      return respond(jsonError(400, "invalid",
                               "`requiredFor`: " + v.dump() + " is not a role (viewer, operator, admin)"));
    if (std::find(roles.begin(), roles.end(), v.get<std::string>()) == roles.end())
      roles.push_back(v.get<std::string>());
  }
  std::sort(roles.begin(), roles.end());
  std::string array = "{";
  for (size_t i = 0; i < roles.size(); ++i) array += (i ? "," : "") + roles[i];
  array += "}";
  const Caller c = *req.caller;
  withConnection(d.pool, respond, [&d, c, respond, roles, array](LeasePtr l) {
    std::vector<TxStep> steps;
    steps.push_back(fixedStep({"DELETE FROM totp_required_roles", {}}));
    steps.push_back(fixedStep(
        {"INSERT INTO totp_required_roles (role) SELECT unnest($1::text[])", {array}}));
    steps.push_back([&d, c, roles](const Results&) -> Result<SqlStatement> {
      auto e = auditEntryFor(c, "auth.totp");
      e.targetKind = "auth";
      e.detail["requiredFor"] = roles;
      return d.audit.statement(e);
    });
    runTransaction(l->conn(), std::move(steps), [l, respond, roles](Result<Results> r) {
      if (!r) return respond(errorResponse(r.error()));
      respond(jsonOk(200, {{"requiredFor", roles}}));
    });
  });
}

}  // namespace ductus::api
