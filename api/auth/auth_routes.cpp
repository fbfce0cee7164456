#include "api/auth/auth_routes.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "api/auth/accounts.h"
#include "api/auth/handler_support.h"
#include "api/auth/oidc_routes.h"
#include "api/auth/password_rules.h"
#include "api/auth/totp.h"
#include "api/auth/totp_routes.h"
#include "common/log.h"

namespace ductus::api {
namespace {

using json = nlohmann::json;
using store::PgResult;
using LeasePtr = store::PgPool::LeasePtr;
using Results = std::vector<PgResult>;

std::string seconds(std::chrono::seconds s) { return std::to_string(s.count()) + " seconds"; }

net::HttpResponse invalidCredentials() {
  return jsonError(401, "invalid_credentials", "wrong name or password");
}

// The statement that counts a failed password for user `id`: at the
// policy's limit the user is locked and the count starts again.
SqlStatement countFailure(const AuthPolicy& p, int64_t id, const std::string& now) {
  return {"UPDATE users SET "
          "failed_attempts = CASE WHEN failed_attempts + 1 >= $2 THEN 0 "
          "ELSE failed_attempts + 1 END, "
          "locked_until = CASE WHEN failed_attempts + 1 >= $2 "
          "THEN $3::timestamptz + $4::interval ELSE locked_until END "
          "WHERE id = $1 RETURNING coalesce(locked_until > $3::timestamptz, false)",
          {std::to_string(id), std::to_string(p.maxFailedSignIns), now, seconds(p.lockout)}};
}

}  // namespace

void recordFailure(AuthDeps& d, int64_t userId, AuditEntry e,
                   std::function<void(Result<bool>)> done) {
  std::string now = pgTime(d.clock());
  d.pool.acquire([&d, userId, e, now, done](Result<LeasePtr> lease) mutable {
    if (!lease) return done(lease.error());
    auto l = *lease;
    std::vector<TxStep> steps;
    steps.push_back(fixedStep(countFailure(d.policy, userId, now)));
    steps.push_back([&d, e](const Results& r) -> Result<SqlStatement> {
      auto entry = e;
      entry.detail["locked"] = r[0].rows() > 0 && r[0].text(0, 0) == "t";
      return d.audit.statement(entry);
    });
    runTransaction(l->conn(), std::move(steps), [l, done](Result<Results> r) {
      if (!r) return done(r.error());
      done(r->at(0).rows() > 0 && r->at(0).text(0, 0) == "t");
    });
  });
}

AuditEntry auditEntryAboutCaller(const Caller& c, AuditAction action) {
  auto e = auditEntryFor(c, action);
  e.targetKind = "user";
  e.targetId = std::to_string(c.userId);
  e.targetName = c.name;
  return e;
}

void checkCallerPassword(AuthDeps& d, const Caller& c, std::string password, WrongPassword wrong,
                         ApiRespond respond, std::function<void()> then) {
  auto given = std::make_shared<std::string>(std::move(password));
  withConnection(d.pool, respond, [&d, c, given, wrong, respond, then](LeasePtr l) {
    l->conn().query("SELECT password_hash, source FROM users WHERE id = $1",
                    {std::to_string(c.userId)},
                    [&d, c, given, wrong, respond, then, l](Result<PgResult> r) {
                      if (!r) return respond(errorResponse(r.error()));
                      if (r->rows() == 0)
                        return respond(jsonError(404, "not_found", "no such user"));
                      // Their password and their second factor are the
                      // directory's, changed there.
                      if (r->text(0, 1) != "local")
                        return respond(
                            jsonError(400, "directory_user",
                                      "you sign in with your directory password or single sign-on: "
                                      "change the password, or set up a second factor, where that "
                                      "account is managed"));
                      d.hasher.verify(
                          std::string(r->text(0, 0)), *given,
                          [&d, c, given, wrong, respond, then](Result<bool> ok) {
                            OPENSSL_cleanse(given->data(), given->size());
                            if (!ok) return respond(errorResponse(ok.error()));
                            if (*ok) return then();
                            auto e = auditEntryAboutCaller(c, wrong.action);
                            e.outcome = "denied";
                            e.detail["reason"] = wrong.reason;
                            recordFailure(d, c.userId, e, [respond, wrong](Result<bool> r) {
                              if (!r) return respond(errorResponse(r.error()));
                              respond(jsonError(403, "wrong_password", wrong.answer));
                            });
                          });
                    });
  });
}

namespace {

json callerJson(const Caller& c) {
  return {{"name", c.name},
          {"kind", c.via == Via::Local ? "local" : c.userId != 0 ? "user" : "token"},
          {"via", viaName(c.via)},
          {"role", roleName(c.role)},
          {"permissions", permissionNames(c.permissions)}};
}

// ---- POST /api/v1/sessions ------------------------------------------------

struct SignIn {
  AuthDeps& d;
  ApiRespond respond;
  std::string name, password, address;
  int64_t userId = 0;
  std::string hash;
  Role role = Role::Viewer;
  unsigned permissions = kNoPermission;
  bool mustChange = false;
  // The address's share of sign-ins in flight, until this one is answered.
  std::shared_ptr<SignInSlot> slot = {};
  // The second factor (api/auth/totp.h): what the caller gave, what the
  // user has, and what the session's transaction must still hold true
  // (the step not yet used, the recovery code not yet spent).
  std::optional<std::string> code = {}, recoveryCode = {};
  bool totpOn = false;
  bool totpRequired = false;  // their role needs one and they have none yet
  std::string totpSecret = {};
  std::optional<int64_t> lastStep = {};
  std::vector<std::string> recovery = {};
  std::optional<int64_t> usedStep = {};
  std::optional<std::string> usedRecovery = {};
  // A directory user (api/auth/directory.h): the directory checked the
  // password, and what it said goes into the session's audit row.
  bool directory = false;
  json directoryDetail = {};

  ~SignIn() {
    OPENSSL_cleanse(password.data(), password.size());
    OPENSSL_cleanse(totpSecret.data(), totpSecret.size());
  }

  AuditEntry entry(std::string outcome, std::string reason) const {
    AuditEntry e;
    e.actor = name.substr(0, 64);
    e.actorKind = ActorKind::User;
    e.via = "session";
    e.address = address;
    e.action = AuditAction("session.create").str();
    e.targetKind = "session";
    e.outcome = std::move(outcome);
    if (!reason.empty()) e.detail["reason"] = std::move(reason);
    return e;
  }
  // The same, about the user row the name found.
  AuditEntry userEntry(std::string outcome, std::string reason) const {
    auto e = entry(std::move(outcome), std::move(reason));
    e.targetKind = "user";
    e.targetId = std::to_string(userId);
    e.targetName = name;
    return e;
  }
};

// 429 locked, audited: the same answer for a user's row and for a name
// that is no user's.
void answerLocked(std::shared_ptr<SignIn> s, AuditEntry e, int64_t seconds) {
  std::string retry = std::to_string(std::max<int64_t>(1, seconds));
  s->d.audit.write(e, [s, retry](Status) {
    auto resp = jsonError(429, "locked", "too many failed sign-ins; try again in " + retry + " s");
    resp.headers.emplace_back("Retry-After", retry);
    s->respond(std::move(resp));
  });
}

// Unknown and disabled users cost a hash too, so the answer's timing does
// not tell which names exist; their failures are counted in memory
// (SignInGuard) and lock the name as a user's row would, so the lockout
// does not tell either.
void refuseAfterHashing(std::shared_ptr<SignIn> s, std::string reason) {
  TimePoint now = s->d.clock();
  if (auto left = s->d.signIns.lockedFor(s->name, now))
    return answerLocked(s, s->entry("denied", "locked"), *left);
  s->d.hasher.hash(s->password, [s, reason, now](Result<std::string> r) {
    if (!r && r.error().kind == ErrorKind::Busy) return s->respond(errorResponse(r.error()));
    auto e = s->entry("denied", reason);
    e.detail["locked"] = s->d.signIns.fail(s->name, now, s->d.policy);
    s->d.audit.write(e, [s](Status) { s->respond(invalidCredentials()); });
  });
}

void startSession(std::shared_ptr<SignIn> s) {
  auto secret = newSessionSecret();
  if (!secret) return s->respond(internalError(secret.error().message));
  auto& d = s->d;
  TimePoint at = d.clock();
  std::string now = pgTime(at);
  withConnection(d.pool, s->respond, [s, now, secret = *secret](LeasePtr l) {
    std::vector<TxStep> steps;
    // The code's step is recorded, or the recovery code spent, only if no
    // other sign-in did it first: of two sign-ins with one code, one wins.
    steps.push_back(fixedStep(
        {"UPDATE users SET failed_attempts = 0, locked_until = NULL, "
         "totp_last_step = coalesce($3::bigint, totp_last_step), "
         "totp_recovery = CASE WHEN $4::text IS NULL THEN totp_recovery "
         "ELSE array_remove(totp_recovery, $4::text) END "
         "WHERE id = $1 "
         "AND NOT disabled AND (locked_until IS NULL OR locked_until <= $2::timestamptz) "
         "AND ($3::bigint IS NULL OR totp_last_step IS NULL OR totp_last_step < $3::bigint) "
         "AND ($4::text IS NULL OR $4::text = ANY (totp_recovery)) "
         "RETURNING id, cardinality(totp_recovery)",
         {std::to_string(s->userId), now,
          s->usedStep ? store::Param(std::to_string(*s->usedStep)) : std::nullopt,
          s->usedRecovery}}));
    steps.push_back([s, now, secret](const Results& r) -> Result<SqlStatement> {
      if (r[0].rows() == 0)
        return Error{"locked, disabled or its code used meanwhile", ErrorKind::Denied};
      return SqlStatement{
          "INSERT INTO sessions (secret_hash, user_id, address, created_at, last_seen_at, "
          "expires_at) VALUES ($1, $2, $3, $4, $4, $4::timestamptz + $5::interval) RETURNING id",
          {secretHash(secret), std::to_string(s->userId), s->address, now,
           seconds(s->d.policy.sessionLifetime)}};
    });
    steps.push_back([s](const Results& r) -> Result<SqlStatement> {
      auto e = s->entry("ok", "");
      e.targetId = std::string(r[1].text(0, 0));
      if (s->directory) e.detail["directory"] = s->directoryDetail;
      if (s->usedStep) e.detail["factor"] = "totp";
      if (s->usedRecovery) {
        e.detail["factor"] = "recovery code";
        e.detail["recoveryCodesLeft"] = r[0].integer(0, 1);
      }
      return s->d.audit.statement(e);
    });
    runTransaction(l->conn(), std::move(steps), [s, l, secret](Result<Results> r) {
      if (!r && r.error().kind == ErrorKind::Denied) return s->respond(invalidCredentials());
      if (!r) return s->respond(errorResponse(r.error()));
      auto resp = jsonOk(201, {{"user",
                                {{"name", s->name},
                                 {"role", roleName(s->role)},
                                 {"permissions", permissionNames(s->permissions)},
                                 {"mustChangePassword", s->mustChange},
                                 {"totp", s->totpOn},
                                 {"totpRequired", s->totpRequired},
                                 {"source", s->directory ? "ldap" : "local"}}}});
      resp.headers.emplace_back("Set-Cookie",
                                sessionCookieHeader(secret, s->d.secureCookies, s->d.policy));
      s->respond(std::move(resp));
    });
  });
}

// The password was right. A user with a second factor also needs a code
// of theirs (or a recovery code): none given is 401 code_required, so the
// console asks for one; a wrong one counts as a failed sign-in, as a
// wrong password does. A code or recovery code given to a user without a
// second factor is ignored.
void checkSecondFactor(std::shared_ptr<SignIn> s) {
  if (!s->totpOn) return startSession(s);
  auto refuse = [s](std::string reason, bool count) {
    auto e = s->userEntry("denied", reason);
    if (!count)
      return s->d.audit.write(e, [s](Status) {
        s->respond(jsonError(401, "code_required",
                             "this user signs in with a code from their authenticator app: "
                             "give `code` (or a `recoveryCode`) beside the password"));
      });
    recordFailure(s->d, s->userId, e, [s](Result<bool> r) {
      if (!r) return s->respond(errorResponse(r.error()));
      s->respond(jsonError(401, "invalid_credentials", "wrong name, password or code"));
    });
  };
  if (s->recoveryCode) {
    std::string hash = recoveryCodeHash(*s->recoveryCode);
    if (std::find(s->recovery.begin(), s->recovery.end(), hash) == s->recovery.end())
      return refuse("wrong recovery code", true);
    s->usedRecovery = hash;
    return startSession(s);
  }
  if (!s->code) return refuse("code required", false);
  auto step = matchTotp(s->totpSecret, *s->code, s->d.clock(), s->lastStep);
  if (!step) return refuse("wrong code", true);
  s->usedStep = *step;
  startSession(s);
}

// ---- Directory users (api/auth/directory.h) ---------------------------------

// A refusal the directory's answer caused: counted towards the lockout as a
// wrong password is (on the user's row when there is one, else in memory,
// as for unknown names), audited, 401.
void refuseDirectory(std::shared_ptr<SignIn> s, std::string reason) {
  if (s->userId != 0)
    return recordFailure(s->d, s->userId, s->userEntry("denied", reason), [s](Result<bool> r) {
      if (!r) return s->respond(errorResponse(r.error()));
      s->respond(invalidCredentials());
    });
  auto e = s->entry("denied", reason);
  e.detail["locked"] = s->d.signIns.fail(s->name, s->d.clock(), s->d.policy);
  s->d.audit.write(e, [s](Status) { s->respond(invalidCredentials()); });
}

// The directory let them in: their row made or brought up to date (the
// role their groups give, their entry, no longer "left"), then the session
// as for anyone. A local user of the same name made meanwhile, or an admin
// who disabled the row, wins.
void storeDirectoryUser(std::shared_ptr<SignIn> s, DirectoryEntry entry) {
  s->role = *entry.role;
  s->directoryDetail = {{"dn", entry.dn}, {"groups", entry.groups}};
  std::string now = pgTime(s->d.clock());
  withConnection(s->d.pool, s->respond, [s, now, dn = entry.dn](LeasePtr l) {
    l->conn().query(
        "INSERT INTO users (name, password_hash, role, source, external_id, "
        "directory_checked_at) VALUES ($1, '', $2, 'ldap', $3, $4) "
        "ON CONFLICT (name) DO UPDATE SET role = EXCLUDED.role, "
        "external_id = EXCLUDED.external_id, directory_checked_at = "
        "EXCLUDED.directory_checked_at, "
        "directory_left_at = NULL, updated_at = EXCLUDED.directory_checked_at "
        "WHERE users.source = 'ldap' AND NOT users.disabled "
        "RETURNING id, permissions, must_change_password",
        {s->name, std::string(roleName(s->role)), dn, now}, [s, l](Result<PgResult> r) {
          if (!r) return s->respond(errorResponse(r.error()));
          if (r->rows() == 0) {
            auto e = s->entry("denied", "a local or disabled user holds the name");
            return s->d.audit.write(e, [s](Status) { s->respond(invalidCredentials()); });
          }
          s->userId = r->integer(0, 0);
          auto bits = permissionsFromNames(parseTextArray(r->text(0, 1)));
          s->permissions = bits ? *bits : kNoPermission;
          s->mustChange = false;
          startSession(s);
        });
  });
}

// No local user has the name (or it is a directory user's row): the
// directory decides. Names are kept in lower case, as directories compare
// them. A directory that can't be asked refuses directory users only
// (503 directory_unavailable), never local ones.
void directorySignIn(std::shared_ptr<SignIn> s) {
  s->directory = true;
  std::transform(s->name.begin(), s->name.end(), s->name.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (s->userId == 0)
    if (auto left = s->d.signIns.lockedFor(s->name, s->d.clock()))
      return answerLocked(s, s->entry("denied", "locked"), *left);
  if (!isValidName(s->name)) return refuseDirectory(s, "not a name a user may have here");
  s->d.directory->signIn(s->name, s->password, [s](Result<DirectoryEntry> r) {
    if (r && !r->role) {
      auto e = s->entry("denied", "in no group that has a role here");
      e.detail["directory"] = {{"dn", r->dn}, {"groups", r->groups}};
      return s->d.audit.write(e, [s](Status) {
        s->respond(jsonError(403, "no_role",
                             "the directory knows you, but you are in none of the groups that "
                             "have a role here (auth.ldap.groups.roles); ask your administrator"));
      });
    }
    if (r) return storeDirectoryUser(s, std::move(*r));
    if (r.error().kind == ErrorKind::Denied) return refuseDirectory(s, r.error().message);
    if (r.error().kind == ErrorKind::Busy) return s->respond(errorResponse(r.error()));
    spdlog::warn(
        "sign-in of directory user {}: {}; directory users can't sign in until it "
        "answers (local users can)",
        s->name, r.error().message);
    auto e = s->entry("denied", "directory unavailable: " + r.error().message);
    s->d.audit.write(e, [s](Status) {
      s->respond(jsonError(503, "directory_unavailable",
                           "the directory can't be asked now; try again later"));
    });
  });
}

void signIn(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto name = stringField(*body, "name");
  auto password = stringField(*body, "password");
  if (!name || !password || name->empty())
    return respond(jsonError(400, "invalid", "give {\"name\": ..., \"password\": ...}"));
  auto code = stringField(*body, "code");
  auto recoveryCode = stringField(*body, "recoveryCode");
  if ((body->contains("code") && !code) || (body->contains("recoveryCode") && !recoveryCode))
    return respond(jsonError(400, "invalid", "`code` and `recoveryCode` are strings"));
  if (code && recoveryCode)
    return respond(jsonError(400, "invalid", "give `code` or `recoveryCode`, not both"));
  if ((code && code->size() > 64) || (recoveryCode && recoveryCode->size() > 64))
    return respond(jsonError(400, "invalid", "the code is too long"));
  if (password->size() > d.policy.maxPasswordLength)
    return respond(jsonError(400, "invalid", "the password is too long"));
  // One address gets its share of the hasher, never all of it.
  if (!d.signIns.enter(req.http.peer, d.policy)) {
    auto resp = jsonError(429, "too_many_sign_ins",
                          "this address has " + std::to_string(d.policy.maxSignInsPerAddress) +
                              " sign-ins under way; try again when they are answered");
    resp.headers.emplace_back("Retry-After", "1");
    return respond(std::move(resp));
  }
  auto slot = std::make_shared<SignInSlot>(d.signIns, req.http.peer);
  auto s = std::make_shared<SignIn>(SignIn{d, respond, *name, *password, req.http.peer, 0, {},
                                           Role::Viewer, kNoPermission, false, slot});
  s->code = code;
  s->recoveryCode = recoveryCode;
  std::string now = pgTime(d.clock());
  withConnection(d.pool, respond, [s, now](LeasePtr l) {
    l->conn().query(
        "SELECT id, password_hash, role, permissions, must_change_password, disabled, "
        "coalesce(locked_until > $2::timestamptz, false), "
        "ceil(extract(epoch FROM locked_until - $2::timestamptz))::bigint, "
        "totp_enabled, coalesce(totp_secret, ''), totp_last_step, totp_recovery, "
        "source = 'local' AND "
        "EXISTS (SELECT 1 FROM totp_required_roles t WHERE t.role = users.role), "
        "source = 'ldap', source "
        "FROM users WHERE name = $1 OR (source = 'ldap' AND name = lower($1)) "
        "ORDER BY source = 'ldap' LIMIT 1",
        {s->name, now}, [s, l](Result<PgResult> r) {
          if (!r) return s->respond(errorResponse(r.error()));
          if (r->rows() == 0) {
            if (s->d.directory) return directorySignIn(s);
            return refuseAfterHashing(s, "unknown user");
          }
          if (r->text(0, 5) == "t") return refuseAfterHashing(s, "user disabled");
          // Signs in through the provider only: no password of theirs is here.
          if (r->text(0, 14) == "oidc")
            return refuseAfterHashing(s, "signs in with single sign-on");
          s->userId = r->integer(0, 0);
          if (r->text(0, 13) == "t") {
            if (r->text(0, 6) == "t")
              return answerLocked(s, s->userEntry("denied", "locked"), r->integer(0, 7));
            if (!s->d.directory)
              return refuseDirectory(s, "a directory user, and auth.ldap is not configured");
            return directorySignIn(s);
          }
          s->hash = std::string(r->text(0, 1));
          s->role = roleFromName(r->text(0, 2)).value_or(Role::Viewer);
          auto bits = permissionsFromNames(parseTextArray(r->text(0, 3)));
          s->permissions = bits ? *bits : kNoPermission;
          s->mustChange = r->text(0, 4) == "t";
          s->totpOn = r->text(0, 8) == "t";
          s->totpSecret = std::string(r->text(0, 9));
          if (!r->isNull(0, 10)) s->lastStep = r->integer(0, 10);
          s->recovery = parseTextArray(r->text(0, 11));
          s->totpRequired = !s->totpOn && r->text(0, 12) == "t";
          if (r->text(0, 6) == "t") {
            auto e = s->userEntry("denied", "locked");
            return answerLocked(s, e, r->integer(0, 7));
          }
          s->d.hasher.verify(s->hash, s->password, [s](Result<bool> ok) {
            if (!ok) return s->respond(errorResponse(ok.error()));
            if (*ok) return checkSecondFactor(s);
            auto e = s->userEntry("denied", "wrong password");
            recordFailure(s->d, s->userId, e, [s](Result<bool> r) {
              if (!r) return s->respond(errorResponse(r.error()));
              s->respond(invalidCredentials());
            });
          });
        });
  });
}

// ---- DELETE /api/v1/sessions/current --------------------------------------

void signOut(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  const Caller& c = *req.caller;
  if (c.via != Via::Session)
    return respond(jsonError(400, "not_a_session", "this call was made with a token"));
  auto e = auditEntryFor(c, "session.delete");
  e.targetKind = "session";
  e.targetId = std::to_string(c.sessionId);
  e.targetName = c.name;
  withConnection(d.pool, respond, [&d, respond, e, id = c.sessionId](LeasePtr l) {
    std::vector<TxStep> steps;
    steps.push_back(fixedStep({"DELETE FROM sessions WHERE id = $1", {std::to_string(id)}}));
    steps.push_back(fixedStep(d.audit.statement(e)));
    runTransaction(l->conn(), std::move(steps), [&d, l, respond](Result<Results> r) {
      if (!r) return respond(errorResponse(r.error()));
      net::HttpResponse resp;
      resp.status = 204;
      resp.headers.emplace_back("Set-Cookie", clearSessionCookieHeader(d.secureCookies));
      resp.headers.emplace_back("Cache-Control", "no-store");
      respond(std::move(resp));
    });
  });
}

// ---- GET /api/v1/me, POST /api/v1/me/password -------------------------------

void me(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  const Caller c = *req.caller;
  if (c.userId == 0) return respond(jsonOk(200, callerJson(c)));
  withConnection(d.pool, respond, [c, respond](LeasePtr l) {
    l->conn().query(
        "SELECT role, must_change_password, totp_enabled, "
        "NOT totp_enabled AND source = 'local' AND EXISTS (SELECT 1 FROM "
        "totp_required_roles t WHERE t.role = users.role), source "
        "FROM users WHERE id = $1",
        {std::to_string(c.userId)}, [l, c, respond](Result<PgResult> r) {
          if (!r) return respond(errorResponse(r.error()));
          auto j = callerJson(c);
          if (r->rows() > 0) {
            j["userRole"] = std::string(r->text(0, 0));
            j["mustChangePassword"] = r->text(0, 1) == "t";
            j["totp"] = r->text(0, 2) == "t";
            j["totpRequired"] = r->text(0, 3) == "t";
            j["source"] = std::string(r->text(0, 4));
          }
          respond(jsonOk(200, j));
        });
  });
}

// ---- GET / PUT /api/v1/me/settings -----------------------------------------

// What the console keeps per user, each member checked: a setting the
// console does not know is refused, not stored for a later version to trip on.
Result<json> checkedSettings(const json& body) {
  json out = json::object();
  for (auto& [k, v] : body.items()) {
    if (k == "theme") {
      if (!v.is_string() || (v != "system" && v != "light" && v != "dark"))
        return Error{"settings: theme must be \"system\", \"light\" or \"dark\"",
                     ErrorKind::Invalid};
      out[k] = v;
    } else {
      return Error{"settings: no setting named \"" + k + "\" (known: theme)", ErrorKind::Invalid};
    }
  }
  return out;
}

json withDefaults(json settings) {
  if (!settings.is_object()) settings = json::object();
  if (!settings.contains("theme")) settings["theme"] = "system";
  return settings;
}

Status requireUser(const Caller& c) {
  if (c.userId != 0) return {};
  return Error{"a token of no user has no settings: the console keeps them in the browser",
               ErrorKind::NotFound};
}

void getSettings(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  const Caller c = *req.caller;
  if (auto s = requireUser(c); !s) return respond(jsonError(404, "no_user", s.error().message));
  withConnection(d.pool, respond, [c, respond](LeasePtr l) {
    l->conn().query("SELECT settings FROM users WHERE id = $1", {std::to_string(c.userId)},
                    [l, respond](Result<PgResult> r) {
                      if (!r) return respond(errorResponse(r.error()));
                      if (r->rows() == 0)
                        return respond(jsonError(404, "no_user", "the caller's user is gone"));
                      auto stored = json::parse(r->text(0, 0), nullptr, false);
                      respond(jsonOk(200, withDefaults(stored)));
                    });
  });
}

void putSettings(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  const Caller c = *req.caller;
  if (auto s = requireUser(c); !s) return respond(jsonError(404, "no_user", s.error().message));
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto settings = checkedSettings(*body);
  if (!settings) return respond(errorResponse(settings.error()));
  withConnection(d.pool, respond, [&d, c, respond, settings = *settings](LeasePtr l) {
    std::vector<TxStep> steps;
    // Merged into what is stored: a PUT of one setting keeps the others.
    steps.push_back(fixedStep({"UPDATE users SET settings = settings || $2::jsonb, "
                               "updated_at = $3 WHERE id = $1 RETURNING settings",
                               {std::to_string(c.userId), settings.dump(), pgTime(d.clock())}}));
    steps.push_back([&d, c, settings](const Results& r) -> Result<SqlStatement> {
      if (r[0].rows() == 0) return Error{"the caller's user is gone", ErrorKind::NotFound};
      auto e = auditEntryAboutCaller(c, "user.settings");
      e.detail["settings"] = settings;
      return d.audit.statement(e);
    });
    runTransaction(l->conn(), std::move(steps), [l, respond](Result<Results> r) {
      if (!r) return respond(errorResponse(r.error()));
      respond(jsonOk(200, withDefaults(json::parse(r->at(0).text(0, 0), nullptr, false))));
    });
  });
}

struct PasswordChange {
  AuthDeps& d;
  ApiRespond respond;
  Caller caller;
  std::string current, next, newHash;
  ~PasswordChange() {
    OPENSSL_cleanse(current.data(), current.size());
    OPENSSL_cleanse(next.data(), next.size());
  }
};

void storeNewPassword(std::shared_ptr<PasswordChange> p) {
  withConnection(p->d.pool, p->respond, [p](LeasePtr l) {
    auto& d = p->d;
    std::string now = pgTime(d.clock());
    std::vector<TxStep> steps;
    steps.push_back(fixedStep(
        {"UPDATE users SET password_hash = $2, must_change_password = false, "
         "failed_attempts = 0, updated_at = $3 WHERE id = $1",
         {std::to_string(p->caller.userId), p->newHash, now}}));
    // Every other session of the user ends: whoever knew the old password
    // is signed out.
    steps.push_back(fixedStep({"DELETE FROM sessions WHERE user_id = $1 AND id <> $2",
                               {std::to_string(p->caller.userId),
                                std::to_string(p->caller.sessionId)}}));
    steps.push_back([p](const Results& r) -> Result<SqlStatement> {
      auto e = auditEntryAboutCaller(p->caller, "user.password");
      e.detail["sessionsEnded"] = r[1].affected();
      return p->d.audit.statement(e);
    });
    runTransaction(l->conn(), std::move(steps), [p, l](Result<Results> r) {
      if (!r) return p->respond(errorResponse(r.error()));
      net::HttpResponse resp;
      resp.status = 204;
      p->respond(std::move(resp));
    });
  });
}

void changePassword(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  const Caller& c = *req.caller;
  if (c.userId == 0)
    return respond(jsonError(400, "not_a_user", "a token of no user has no password"));
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto current = stringField(*body, "currentPassword");
  auto next = stringField(*body, "newPassword");
  if (!current || !next)
    return respond(jsonError(400, "invalid",
                             "give {\"currentPassword\": ..., \"newPassword\": ...}"));
  // A change that keeps the password would lift mustChangePassword and end
  // the other sessions while whoever knew it still does.
  if (*next == *current)
    return respond(jsonError(400, "same_password",
                             "the new password is the current one: choose another"));
  if (auto weak = checkNewPassword(*next, c.name, d.policy); !weak)
    return respond(errorResponse(weak.error()));
  auto p = std::make_shared<PasswordChange>(PasswordChange{d, respond, c, *current, *next, {}});
  checkCallerPassword(d, c, p->current,
                      {"user.password", "wrong current password", "the current password is wrong"},
                      respond, [p] {
                        p->d.hasher.hash(p->next, [p](Result<std::string> h) {
                          if (!h) return p->respond(errorResponse(h.error()));
                          p->newHash = std::move(*h);
                          storeNewPassword(p);
                        });
                      });
}

// ---- users and tokens (admin) -----------------------------------------------

Result<unsigned> permissionsField(const json& body) {
  auto it = body.find("permissions");
  if (it == body.end() || it->is_null()) return kNoPermission;
  if (!it->is_array()) return Error{"`permissions` must be a list", ErrorKind::Invalid};
  std::vector<std::string> names;
  for (auto& v : *it) {
    if (!v.is_string()) return Error{"`permissions` must be a list of names", ErrorKind::Invalid};
    names.push_back(v.get<std::string>());
  }
  auto bits = permissionsFromNames(names);
  if (!bits) return Error{bits.error().message, ErrorKind::Invalid};
  return bits;
}

Result<Role> roleField(const json& body) {
  auto name = stringField(body, "role");
  if (!name) return Error{"`role` is required: viewer, operator or admin", ErrorKind::Invalid};
  auto role = roleFromName(*name);
  if (!role)
    return Error{"unknown role '" + *name + "' (viewer, operator or admin)", ErrorKind::Invalid};
  return *role;
}

// A new user's or token's name, role and permissions from a request body
// (an "invalid" Error, answered 400, otherwise).
struct Grant {
  std::string name;
  Role role;
  unsigned permissions;
};
Result<Grant> grantFields(const json& body) {
  auto name = stringField(body, "name");
  if (!name || !isValidName(*name))
    return Error{"`name`: a letter or digit, then up to 63 letters, digits or ._@-",
                 ErrorKind::Invalid};
  auto role = roleField(body);
  if (!role) return role.error();
  auto perms = permissionsField(body);
  if (!perms) return perms.error();
  return Grant{*name, *role, *perms};
}

// No one grants what they don't hold: a user or token made by the caller
// has at most the caller's role and permissions, on every route that makes
// one. Refused (403 beyond_caller), not cut down, so the answer says what
// the caller may give.
std::optional<net::HttpResponse> beyondCaller(const Caller& c, const Grant& g,
                                              const std::string& what) {
  if (static_cast<int>(g.role) <= static_cast<int>(c.role) && (g.permissions & ~c.permissions) == 0)
    return std::nullopt;
  auto held = permissionNames(c.permissions);
  return jsonError(403, "beyond_caller",
                   what + " can do no more than you: role " + std::string(roleName(c.role)) +
                       ", permissions " + (held.empty() ? std::string("none") : json(held).dump()));
}

void listUsersRoute(AuthDeps& d, const ApiRequest&, ApiRespond respond) {
  withConnection(d.pool, respond, [&d, respond](LeasePtr l) {
    listUsers(l->conn(), d.clock(), [l, respond](Result<std::vector<UserInfo>> r) {
      if (!r) return respond(errorResponse(r.error()));
      json items = json::array();
      for (auto& u : *r) items.push_back(toJson(u));
      respond(jsonOk(200, {{"items", items}}));
    });
  });
}

void createUserRoute(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto grant = grantFields(*body);
  if (!grant) return respond(errorResponse(grant.error()));
  if (auto no = beyondCaller(*req.caller, *grant, "a user you make"))
    return respond(std::move(*no));
  auto password = stringField(*body, "password");
  bool generated = !password;
  if (generated) {
    auto p = newPassword();
    if (!p) return respond(internalError(p.error().message));
    password = *p;
  } else if (auto weak = checkNewPassword(*password, grant->name, d.policy); !weak) {
    return respond(errorResponse(weak.error()));
  }
  NewUser u{grant->name, grant->role, grant->permissions, {}, generated};
  if (auto m = body->find("mustChangePassword"); m != body->end() && m->is_boolean())
    u.mustChangePassword = m->get<bool>();
  auto who = auditEntryFor(*req.caller, "");
  d.hasher.hash(*password, [&d, respond, u, who, generated,
                            password = *password](Result<std::string> h) mutable {
    if (!h) return respond(errorResponse(h.error()));
    u.passwordHash = std::move(*h);
    withConnection(d.pool, respond, [&d, respond, u, who, generated, password](LeasePtr l) {
      createUser(l->conn(), u, who, d.clock(),
                 [l, respond, generated, password](Result<UserInfo> r) {
                   if (!r) return respond(errorResponse(r.error()));
                   json out = {{"user", toJson(*r)}};
                   if (generated) out["password"] = password;  // shown this once
                   respond(jsonOk(201, out));
                 });
    });
  });
}

void disableUserRoute(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  auto name = req.params.at("name");
  auto who = auditEntryFor(*req.caller, "");
  withConnection(d.pool, respond, [&d, respond, name, who](LeasePtr l) {
    disableUser(l->conn(), name, who, d.clock(), [l, respond](Result<UserInfo> r) {
      if (!r) return respond(errorResponse(r.error()));
      respond(jsonOk(200, {{"user", toJson(*r)}}));
    });
  });
}

void enableUserRoute(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  auto name = req.params.at("name");
  auto who = auditEntryFor(*req.caller, "");
  withConnection(d.pool, respond, [&d, respond, name, who](LeasePtr l) {
    enableUser(l->conn(), name, who, d.clock(), [l, respond](Result<UserInfo> r) {
      if (!r) return respond(errorResponse(r.error()));
      respond(jsonOk(200, {{"user", toJson(*r)}}));
    });
  });
}

// The user an admin's change is about, read first: a directory or single
// sign-on user's password and role are not ours to change (409
// directory_user), and no admin acts on a user who holds more than the
// admin (403 beyond_caller): a password reset would let them sign in as
// that user. The change itself checks the row is still as read.
void withChangeableUser(AuthDeps& d, const ApiRequest& req, ApiRespond respond, std::string what,
                        std::function<void(UserInfo)> then) {
  auto name = req.params.at("name");
  const Caller caller = *req.caller;
  withConnection(d.pool, respond, [&d, respond, name, caller, what, then](LeasePtr l) {
    findUser(l->conn(), name, d.clock(), [l, respond, caller, what, then](Result<UserInfo> r) {
      if (!r) return respond(errorResponse(r.error()));
      if (r->source != "local")
        return respond(jsonError(
            409, "directory_user",
            "'" + r->name + "' signs in with " +
                (r->source == "ldap" ? "the directory's password: their password and role are "
                                       "the directory's (its groups), changed there"
                                     : "single sign-on: their role is the provider's (its groups "
                                       "claim), and they have no password here")));
      if (auto no = beyondCaller(caller, Grant{r->name, r->role, r->permissions}, what))
        return respond(std::move(*no));
      then(std::move(*r));
    });
  });
}

// A one-time password for a user who forgot theirs: generated, shown in
// this answer once, to be changed at the next sign-in.
void resetPasswordRoute(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  auto who = auditEntryFor(*req.caller, "");
  withChangeableUser(
      d, req, respond, "a user whose password you reset", [&d, respond, who](UserInfo seen) {
        auto password = newPassword();
        if (!password) return respond(internalError(password.error().message));
        d.hasher.hash(*password, [&d, respond, who, seen,
                                  password = *password](Result<std::string> h) mutable {
          if (!h) return respond(errorResponse(h.error()));
          withConnection(
              d.pool, respond,
              [&d, respond, who, seen, password, hash = std::move(*h)](LeasePtr l) {
                resetPassword(
                    l->conn(), seen, hash, who, d.clock(),
                    [l, respond, password](Result<UserInfo> r) {
                      if (!r) return respond(errorResponse(r.error()));
                      respond(jsonOk(200, {{"user", toJson(*r)}, {"password", password}}));
                    });
              });
        });
      });
}

// A new role, and permissions (kept when left out), both within the
// caller's (403 beyond_caller) as for a user made new: no admin gives
// anyone, itself included, the payloads it does not hold.
void changeRoleRoute(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto role = roleField(*body);
  if (!role) return respond(errorResponse(role.error()));
  std::optional<unsigned> permissions;
  if (body->contains("permissions")) {
    auto p = permissionsField(*body);
    if (!p) return respond(errorResponse(p.error()));
    permissions = *p;
  }
  const Caller caller = *req.caller;
  auto who = auditEntryFor(caller, "");
  withChangeableUser(
      d, req, respond, "a user whose role you change",
      [&d, respond, who, caller, role = *role, permissions](UserInfo seen) {
        unsigned next = permissions.value_or(seen.permissions);
        if (auto no = beyondCaller(caller, Grant{seen.name, role, next}, "a user you give a role"))
          return respond(std::move(*no));
        withConnection(d.pool, respond, [&d, respond, who, seen, role, next](LeasePtr l) {
          changeRole(l->conn(), seen, role, next, who, d.clock(), [l, respond](Result<UserInfo> r) {
            if (!r) return respond(errorResponse(r.error()));
            respond(jsonOk(200, {{"user", toJson(*r)}}));
          });
        });
      });
}

// The tokens routes serve both every token (admins) and a user's own
// (/me/tokens): `owner` set limits them to that user's.
void listTokensOf(AuthDeps& d, const ApiRequest& req, ApiRespond respond,
                  std::optional<int64_t> owner) {
  auto it = req.query.find("revoked");
  bool includeRevoked = it != req.query.end() && (it->second == "true" || it->second == "1");
  withConnection(d.pool, respond, [respond, includeRevoked, owner](LeasePtr l) {
    listTokens(l->conn(), includeRevoked, owner, [l, respond](Result<std::vector<TokenInfo>> r) {
      if (!r) return respond(errorResponse(r.error()));
      json items = json::array();
      for (auto& t : *r) items.push_back(toJson(t));
      respond(jsonOk(200, {{"items", items}}));
    });
  });
}

void createTokenOf(AuthDeps& d, const ApiRequest& req, ApiRespond respond, NewToken t) {
  auto who = auditEntryFor(*req.caller, "");
  withConnection(d.pool, respond, [&d, respond, t, who](LeasePtr l) {
    createToken(l->conn(), t, who, d.clock(), [l, respond](Result<CreatedToken> r) {
      if (!r) return respond(errorResponse(r.error()));
      json out = toJson(r->info);
      out["token"] = r->token;  // shown this once
      respond(jsonOk(201, out));
    });
  });
}

void revokeTokenOf(AuthDeps& d, const ApiRequest& req, ApiRespond respond,
                   std::optional<int64_t> owner) {
  auto id = req.params.at("id");
  auto who = auditEntryFor(*req.caller, "");
  withConnection(d.pool, respond, [&d, respond, id, who, owner](LeasePtr l) {
    revokeToken(l->conn(), id, owner, who, d.clock(), [l, respond](Result<TokenInfo> r) {
      if (!r) return respond(errorResponse(r.error()));
      respond(jsonOk(200, toJson(*r)));
    });
  });
}

void listTokensRoute(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  listTokensOf(d, req, std::move(respond), std::nullopt);
}

void createTokenRoute(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto grant = grantFields(*body);
  if (!grant) return respond(errorResponse(grant.error()));
  if (auto no = beyondCaller(*req.caller, *grant, "a token you make"))
    return respond(std::move(*no));
  createTokenOf(d, req, std::move(respond),
                NewToken{grant->name, grant->role, grant->permissions, stringField(*body, "user")});
}

void revokeTokenRoute(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  revokeTokenOf(d, req, std::move(respond), std::nullopt);
}

// ---- /api/v1/me/tokens: a user's own tokens -----------------------------------

void listMyTokens(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  const Caller& c = *req.caller;
  if (c.userId == 0)
    return respond(jsonError(404, "no_user", "a token of no user owns no tokens"));
  listTokensOf(d, req, std::move(respond), c.userId);
}

// A token of the caller's own acts as them at most, and is made no more
// than that: a role and permissions beyond the caller's are refused, not
// cut down, so the answer says what the token can do.
void createMyToken(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  const Caller& c = *req.caller;
  if (c.userId == 0)
    return respond(jsonError(404, "no_user", "a token of no user cannot make tokens of its own"));
  if (c.source == "oidc")
    return respond(jsonError(400, "sso_user",
                             "single sign-on users have no tokens: the provider decides at each "
                             "sign-on; ask an admin for a token of no user for a script"));
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  if (body->contains("user"))
    return respond(jsonError(400, "invalid", "`user`: a token made here is always the caller's"));
  auto grant = grantFields(*body);
  if (!grant) return respond(errorResponse(grant.error()));
  if (auto no = beyondCaller(c, *grant, "a token of yours")) return respond(std::move(*no));
  createTokenOf(d, req, std::move(respond),
                NewToken{grant->name, grant->role, grant->permissions, c.name});
}

void revokeMyToken(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  const Caller& c = *req.caller;
  if (c.userId == 0)
    return respond(jsonError(404, "no_user", "a token of no user owns no tokens"));
  revokeTokenOf(d, req, std::move(respond), c.userId);
}

// ---- schemas ------------------------------------------------------------------

constexpr const char* kUserSchema = R"({"type":"object","properties":{
"id":{"type":"integer"},"name":{"type":"string"},"role":{"enum":["viewer","operator","admin"]},
"permissions":{"type":"array","items":{"enum":["payloads","audit"]}},
"mustChangePassword":{"type":"boolean"},"disabled":{"type":"boolean"},"totp":{"type":"boolean"},
"lockedUntil":{"type":["string","null"]},"source":{"enum":["local","ldap","oidc"]},
"leftDirectoryAt":{"type":["string","null"]},"createdAt":{"type":"string"}}})";

constexpr const char* kTokenSchema = R"({"type":"object","properties":{
"id":{"type":"integer"},"name":{"type":"string"},"role":{"enum":["viewer","operator","admin"]},
"permissions":{"type":"array","items":{"enum":["payloads","audit"]}},
"user":{"type":["string","null"]},"createdBy":{"type":"string"},"createdAt":{"type":"string"},
"lastUsedAt":{"type":["string","null"]},"revokedAt":{"type":["string","null"]},
"token":{"type":"string","description":"dux_...: in the answer to POST only, shown once"}}})";

std::string listOf(const char* item) {
  return std::string(R"({"type":"object","properties":{"items":{"type":"array","items":)") + item +
         "}}}";
}

}  // namespace

std::vector<Route> authRoutes(AuthDeps* d) {
  // d is null for the document only (`ductus api-spec`): no handler runs.
  auto bind = [d](void (*fn)(AuthDeps&, const ApiRequest&, ApiRespond)) -> ApiHandler {
    return [d, fn](const ApiRequest& req, ApiRespond respond) {
      // The document's routes served anyway (a test serving allRoutes({})):
      // an answer, not a null dereference.
      if (!d) return respond(jsonError(503, "unavailable", "no accounts store behind this API"));
      fn(*d, req, std::move(respond));
    };
  };
  auto route = [](std::string method, std::string path, std::string id, std::string summary,
                  Requirement req, ApiHandler h, std::string in, std::string out,
                  int status = 200, std::map<std::string, std::string> query = {}) {
    Route r{std::move(method), std::move(path), std::move(id), std::move(summary), "auth",
            req, std::move(h), std::move(in), std::move(out), std::move(query)};
    r.successStatus = status;
    return r;
  };
  const std::string userAnswer =
      std::string(R"({"type":"object","properties":{"user":)") + kUserSchema + "}}";
  std::vector<Route> routes;
  routes.push_back(route("POST", "/api/v1/sessions", "createSession",
                         "Sign in with a name and password (a local user's, or the directory's "
                         "with auth.ldap); sets the ductus_session cookie",
                         Requirement::anyone(), bind(signIn),
                         R"({"type":"object","required":["name","password"],"properties":{
"name":{"type":"string"},"password":{"type":"string"},
"code":{"type":"string","description":"the 6 digits of the user's authenticator app, for a user with a second factor"},
"recoveryCode":{"type":"string","description":"one of the user's recovery codes, instead of code"}}})",
                         R"({"type":"object","properties":{"user":{"type":"object","properties":{
"name":{"type":"string"},"role":{"type":"string"},"permissions":{"type":"array","items":{"type":"string"}},
"mustChangePassword":{"type":"boolean"},"totp":{"type":"boolean"},"totpRequired":{"type":"boolean"},
"source":{"enum":["local","ldap","oidc"],"description":"ldap: the directory (auth.ldap) checked the password and gave the role"}}}}})",
                         201));
  routes.push_back(route("DELETE", "/api/v1/sessions/current", "deleteCurrentSession",
                         "Sign out: end this browser session",
                         Requirement::toChange(Role::Viewer), bind(signOut), {}, {}, 204));
  routes.push_back(route("GET", "/api/v1/me", "getMe", "Who the caller is: name, role, permissions",
                         Requirement::toRead(Role::Viewer), bind(me), {},
                         R"({"type":"object","properties":{"name":{"type":"string"},
"kind":{"enum":["user","token"]},"via":{"enum":["session","token"]},
"role":{"type":"string"},"permissions":{"type":"array","items":{"type":"string"}},
"mustChangePassword":{"type":"boolean"},"totp":{"type":"boolean"},
"totpRequired":{"type":"boolean","description":"the role needs a second factor and the user has none yet: only /me/totp may be used"},
"source":{"enum":["local","ldap","oidc"],"description":"where the user signs in: a local password, the directory's password with auth.ldap, or single sign-on with auth.oidc"}}})"));
  routes.push_back(route("POST", "/api/v1/me/password", "changeMyPassword",
                         "Change the caller's password; ends the user's other sessions",
                         Requirement::toChange(Role::Viewer), bind(changePassword),
                         R"({"type":"object","required":["currentPassword","newPassword"],
"properties":{"currentPassword":{"type":"string"},"newPassword":{"type":"string","minLength":12}}})",
                         {}, 204));
  const std::string settingsSchema =
      R"({"type":"object","properties":{"theme":{"enum":["system","light","dark"]}}})";
  routes.push_back(route("GET", "/api/v1/me/settings", "getMySettings",
                         "The caller's console settings (a user's; 404 no_user for a token of none)",
                         Requirement::toRead(Role::Viewer), bind(getSettings), {},
                         settingsSchema));
  routes.push_back(route("PUT", "/api/v1/me/settings", "putMySettings",
                         "Change the caller's console settings; members left out keep their value",
                         Requirement::toChange(Role::Viewer), bind(putSettings), settingsSchema,
                         settingsSchema));
  routes.push_back(route("GET", "/api/v1/me/tokens", "listMyTokens",
                         "The caller's own API tokens (a user's; 404 no_user for a token of none)",
                         Requirement::toRead(Role::Viewer), bind(listMyTokens), {},
                         listOf(kTokenSchema), 200,
                         {{"revoked", "true: include revoked tokens"}}));
  routes.push_back(route("POST", "/api/v1/me/tokens", "createMyToken",
                         "Create a token of the caller's own, with no more role or permissions "
                         "than the caller; the token is in this answer only",
                         Requirement::toChange(Role::Viewer), bind(createMyToken),
                         R"({"type":"object","required":["name","role"],"properties":{
"name":{"type":"string"},"role":{"enum":["viewer","operator","admin"]},
"permissions":{"type":"array","items":{"enum":["payloads","audit"]}}}})",
                         kTokenSchema, 201));
  routes.push_back(route("DELETE", "/api/v1/me/tokens/{id}", "revokeMyToken",
                         "Revoke one of the caller's own tokens (by id, or by name)",
                         Requirement::toChange(Role::Viewer), bind(revokeMyToken), {},
                         kTokenSchema));
  routes.push_back(route("GET", "/api/v1/users", "listUsers", "List the local users",
                         Requirement::toRead(Role::Admin), bind(listUsersRoute), {},
                         listOf(kUserSchema)));
  routes.push_back(route("POST", "/api/v1/users", "createUser",
                         "Create a local user; without a password one is generated and shown once",
                         Requirement::toChange(Role::Admin), bind(createUserRoute),
                         R"({"type":"object","required":["name","role"],"properties":{
"name":{"type":"string"},"role":{"enum":["viewer","operator","admin"]},
"permissions":{"type":"array","items":{"enum":["payloads","audit"]}},
"password":{"type":"string","minLength":12},"mustChangePassword":{"type":"boolean"}}})",
                         std::string(R"({"type":"object","properties":{"user":)") + kUserSchema +
                             R"(,"password":{"type":"string"}}})",
                         201));
  routes.push_back(route("POST", "/api/v1/users/{name}/disable", "disableUser",
                         "Disable a user: their sessions end and their tokens stop working",
                         Requirement::toChange(Role::Admin), bind(disableUserRoute), {},
                         userAnswer));
  routes.push_back(route("POST", "/api/v1/users/{name}/enable", "enableUser",
                         "Enable a disabled user again: they sign in, and their tokens not "
                         "revoked work again",
                         Requirement::toChange(Role::Admin), bind(enableUserRoute), {},
                         userAnswer));
  routes.push_back(route(
      "POST", "/api/v1/users/{name}/password", "resetUserPassword",
      "Give a local user a one-time password, shown in this answer once, to "
      "be changed at their next sign-in; their sessions end and a lockout "
      "is lifted",
      Requirement::toChange(Role::Admin), bind(resetPasswordRoute), {},
      std::string(R"({"type":"object","properties":{"user":)") + kUserSchema +
          R"(,"password":{"type":"string","description":"the one-time password, shown once"}}})"));
  routes.push_back(route("PUT", "/api/v1/users/{name}/role", "changeUserRole",
                         "Change a local user's role and permissions (kept when left out), from "
                         "their next request; never the last enabled admin's",
                         Requirement::toChange(Role::Admin), bind(changeRoleRoute),
                         R"({"type":"object","required":["role"],"properties":{
"role":{"enum":["viewer","operator","admin"]},
"permissions":{"type":"array","items":{"enum":["payloads","audit"]}}}})",
                         userAnswer));
  routes.push_back(route("GET", "/api/v1/tokens", "listTokens", "List the API tokens",
                         Requirement::toRead(Role::Admin), bind(listTokensRoute), {},
                         listOf(kTokenSchema), 200,
                         {{"revoked", "true: include revoked tokens"}}));
  routes.push_back(route("POST", "/api/v1/tokens", "createToken",
                         "Create an API token; the token is in this answer only",
                         Requirement::toChange(Role::Admin), bind(createTokenRoute),
                         R"({"type":"object","required":["name","role"],"properties":{
"name":{"type":"string"},"role":{"enum":["viewer","operator","admin"]},
"permissions":{"type":"array","items":{"enum":["payloads","audit"]}},
"user":{"type":"string","description":"the token acts as this user at most"}}})",
                         kTokenSchema, 201));
  routes.push_back(route("DELETE", "/api/v1/tokens/{id}", "revokeToken",
                         "Revoke a token (by id, or by name): its next call is refused",
                         Requirement::toChange(Role::Admin), bind(revokeTokenRoute), {},
                         kTokenSchema));
  // The second factor (api/auth/totp_routes.h).
  const std::string codeIn = R"({"type":"object","required":["code"],"properties":{
"code":{"type":"string","description":"the 6 digits the authenticator app shows now"}}})";
  const std::string policy = R"({"type":"object","required":["requiredFor"],"properties":{
"requiredFor":{"type":"array","items":{"enum":["viewer","operator","admin"]}}}})";
  routes.push_back(route("POST", "/api/v1/me/totp", "beginMyTotp",
                         "Start setting up a second factor (with the caller's password): a new "
                         "secret and its otpauth:// URI for an authenticator app (on once "
                         "confirmed)",
                         Requirement::toChange(Role::Viewer), bind(beginTotp),
                         R"({"type":"object","required":["password"],"properties":{
"password":{"type":"string","description":"the caller's password, again"}}})",
                         R"({"type":"object","properties":{"secret":{"type":"string"},
"uri":{"type":"string","description":"otpauth://totp/...: for the app, as a link or a QR code"}}})",
                         201));
  routes.push_back(route("POST", "/api/v1/me/totp/confirm", "confirmMyTotp",
                         "Turn the second factor on with a code the app shows; answers the "
                         "recovery codes, shown this once",
                         Requirement::toChange(Role::Viewer), bind(confirmTotp), codeIn,
                         R"({"type":"object","properties":{"recoveryCodes":{"type":"array",
"items":{"type":"string"}}}})"));
  routes.push_back(route("POST", "/api/v1/me/totp/disable", "disableMyTotp",
                         "Turn the caller's second factor off, with a current code (not when "
                         "the role requires one)",
                         Requirement::toChange(Role::Viewer), bind(disableTotp), codeIn, {}, 204));
  routes.push_back(route("DELETE", "/api/v1/users/{name}/totp", "resetUserTotp",
                         "Turn a user's second factor off (a lost phone) and end their sessions",
                         Requirement::toChange(Role::Admin), bind(resetTotpRoute), {}, {}, 204));
  routes.push_back(route("GET", "/api/v1/auth/methods", "getAuthMethods",
                         "How one may sign in here: a password, and single sign-on when "
                         "auth.oidc is set up",
                         Requirement::anyone(), bind(authMethods), {},
                         R"({"type":"object","properties":{"password":{"type":"boolean"},
"oidc":{"type":["object","null"],"properties":{"label":{"type":"string"},"start":{"type":"string"}}}}})"));
  routes.push_back(route("GET", "/api/v1/auth/oidc/start", "startSingleSignOn",
                         "Single sign-on: 302 to the OpenID Connect provider (authorization "
                         "code with PKCE); the flow's state in the ductus_oidc cookie",
                         Requirement::anyone(), bind(startSingleSignOn), {}, {}, 302));
  routes.push_back(route("GET", "/api/v1/auth/oidc/callback", "finishSingleSignOn",
                         "Single sign-on: the provider's answer; sets the ductus_session cookie "
                         "and 302s to the console (with ?signin_error= when refused)",
                         Requirement::anyone(), bind(finishSingleSignOn), {}, {}, 302,
                         {{"code", "the provider's authorization code"},
                          {"state", "the flow's state, as the ductus_oidc cookie holds it"},
                          {"error", "the provider's refusal"},
                          {"error_description", "its words"},
                          {"iss", "the issuer of the answer (RFC 9207): must be auth.oidc.issuer"},
                          {"session_state", "the provider's session (Keycloak); not used"}}));
  routes.push_back(route("GET", "/api/v1/auth/totp", "getTotpPolicy",
                         "The roles whose users must sign in with a second factor",
                         Requirement::toRead(Role::Admin), bind(getTotpPolicy), {}, policy));
  routes.push_back(route("PUT", "/api/v1/auth/totp", "putTotpPolicy",
                         "Choose the roles whose users must sign in with a second factor; "
                         "until they turn one on, they may only do that",
                         Requirement::toChange(Role::Admin), bind(putTotpPolicy), policy, policy));
  return routes;
}

}  // namespace ductus::api
