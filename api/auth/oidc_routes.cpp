#include "api/auth/oidc_routes.h"

#include <memory>

#include "api/auth/credentials.h"
#include "api/auth/handler_support.h"
#include "common/log.h"

namespace ductus::api {
namespace {

using json = nlohmann::json;
using store::PgResult;
using LeasePtr = store::PgPool::LeasePtr;
using Results = std::vector<PgResult>;

constexpr const char* kFlowCookie = "ductus_oidc";

std::string flowCookie(const std::string& state, bool secure, int maxAge) {
  // Lax, not Strict: the provider's answer is a top-level navigation from
  // its site, and the cookie must come with it.
  return std::string(kFlowCookie) + "=" + state +
         "; Path=/api/v1/auth/oidc; HttpOnly; SameSite=Lax; Max-Age=" + std::to_string(maxAge) +
         (secure ? "; Secure" : "");
}

net::HttpResponse redirect(const std::string& location) {
  net::HttpResponse r;
  r.status = 302;
  r.headers.emplace_back("Location", location);
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

struct SignOn {
  AuthDeps& d;
  ApiRespond respond;
  std::string address;
  OidcIdentity who = {};
  int64_t userId = 0;

  AuditEntry entry(std::string outcome, std::string reason) const {
    AuditEntry e;
    e.actor = who.name.empty() ? "(single sign-on)" : who.name.substr(0, 64);
    e.actorKind = ActorKind::User;
    e.via = "session";
    e.address = address;
    e.action = AuditAction("session.create").str();
    e.targetKind = "session";
    e.outcome = std::move(outcome);
    if (!reason.empty()) e.detail["reason"] = std::move(reason);
    e.detail["oidc"] = {{"issuer", d.oidc->settings().issuer}};
    if (!who.subject.empty()) e.detail["oidc"]["subject"] = who.subject;
    if (!who.groups.empty()) e.detail["oidc"]["groups"] = who.groups;
    return e;
  }

  // Back to the console, which says what went wrong; the flow cookie gone.
  void refuse(std::string code, std::string reason) {
    auto e = entry("denied", std::move(reason));
    d.audit.write(e, [code, secure = d.secureCookies, respond = respond](Status) {
      auto r = redirect("/?signin_error=" + code);
      r.headers.emplace_back("Set-Cookie", flowCookie("", secure, 0));
      respond(std::move(r));
    });
  }
};

void openSession(std::shared_ptr<SignOn> s) {
  auto secret = newSessionSecret();
  if (!secret) return s->respond(internalError(secret.error().message));
  std::string now = pgTime(s->d.clock());
  withConnection(s->d.pool, s->respond, [s, now, secret = *secret](LeasePtr l) {
    std::vector<TxStep> steps;
    steps.push_back(fixedStep(
        {"INSERT INTO sessions (secret_hash, user_id, address, created_at, last_seen_at, "
         "expires_at) SELECT $1, id, $3, $4, $4, $4::timestamptz + $5::interval FROM users "
         "WHERE id = $2 AND NOT disabled RETURNING id",
         {secretHash(secret), std::to_string(s->userId), s->address, now,
          std::to_string(s->d.policy.sessionLifetime.count()) + " seconds"}}));
    steps.push_back([s](const Results& r) -> Result<SqlStatement> {
      if (r[0].rows() == 0) return Error{"disabled meanwhile", ErrorKind::Denied};
      auto e = s->entry("ok", "");
      e.targetId = std::string(r[0].text(0, 0));
      return s->d.audit.statement(e);
    });
    runTransaction(l->conn(), std::move(steps), [s, l, secret](Result<Results> r) {
      if (!r && r.error().kind == ErrorKind::Denied)
        return s->refuse("sso_failed", "the user is disabled");
      if (!r) return s->respond(errorResponse(r.error()));
      auto resp = redirect("/");
      resp.headers.emplace_back("Set-Cookie",
                                sessionCookieHeader(secret, s->d.secureCookies, s->d.policy));
      resp.headers.emplace_back("Set-Cookie", flowCookie("", s->d.secureCookies, 0));
      s->respond(std::move(resp));
    });
  });
}

// The provider vouched for them: their row made or brought up to date. A
// local or directory user of the same name, a disabled row, or a row of
// another subject (the provider gave the name to someone else) is refused.
void storeUser(std::shared_ptr<SignOn> s) {
  std::string now = pgTime(s->d.clock());
  withConnection(s->d.pool, s->respond, [s, now](LeasePtr l) {
    l->conn().query(
        "INSERT INTO users (name, password_hash, role, source, external_id, "
        "directory_checked_at) VALUES ($1, '', $2, 'oidc', $3, $4) "
        "ON CONFLICT (name) DO UPDATE SET role = EXCLUDED.role, "
        "directory_checked_at = EXCLUDED.directory_checked_at, "
        "updated_at = EXCLUDED.directory_checked_at "
        "WHERE users.source = 'oidc' AND NOT users.disabled "
        "AND users.external_id = EXCLUDED.external_id RETURNING id",
        {s->who.name, std::string(roleName(*s->who.role)),
         s->d.oidc->settings().issuer + " " + s->who.subject, now},
        [s, l](Result<PgResult> r) {
          if (!r && r.error().kind == ErrorKind::Database)
            return s->refuse("sso_failed",
                             "`" + s->who.name + "` is not a name a user may have here");
          if (!r) return s->respond(errorResponse(r.error()));
          if (r->rows() == 0)
            return s->refuse("sso_failed",
                             "the name belongs to a local, directory, disabled or other "
                             "provider user");
          s->userId = r->integer(0, 0);
          openSession(s);
        });
  });
}

}  // namespace

void authMethods(AuthDeps& d, const ApiRequest&, ApiRespond respond) {
  json oidc = nullptr;
  if (d.oidc) oidc = {{"label", d.oidc->settings().label}, {"start", "/api/v1/auth/oidc/start"}};
  respond(jsonOk(200, {{"password", true}, {"oidc", oidc}}));
}

void startSingleSignOn(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  if (!d.oidc)
    return respond(jsonError(404, "not_configured", "single sign-on is not set up (auth.oidc)"));
  d.oidc->begin(SignInGuard::addressOf(req.http.peer), [&d, respond](Result<OidcStart> r) {
    if (!r) {
      if (r.error().kind == ErrorKind::Unavailable)
        spdlog::warn("single sign-on: {}", r.error().message);
      if (r.error().kind == ErrorKind::Busy) return respond(errorResponse(r.error()));
      return respond(redirect("/?signin_error=sso_unavailable"));
    }
    auto resp = redirect(r->url);
    resp.headers.emplace_back(
        "Set-Cookie",
        flowCookie(r->state, d.secureCookies,
                   static_cast<int>(std::chrono::seconds(OidcClient::kFlowLife).count())));
    respond(std::move(resp));
  });
}

void finishSingleSignOn(AuthDeps& d, const ApiRequest& req, ApiRespond respond) {
  if (!d.oidc)
    return respond(jsonError(404, "not_configured", "single sign-on is not set up (auth.oidc)"));
  auto s = std::make_shared<SignOn>(SignOn{d, respond, req.http.peer});
  auto at = [&](const char* name) {
    auto it = req.query.find(name);
    return it == req.query.end() ? std::string() : it->second;
  };
  // The provider says no (the user cancelled, or may not use this client).
  if (!at("error").empty())
    return s->refuse("sso_failed", "the provider answered " + at("error").substr(0, 100) + ": " +
                                       at("error_description").substr(0, 200));
  // RFC 9207: an answer naming another issuer is another provider's (a
  // mix-up attack), whatever its code.
  if (req.query.count("iss") && at("iss") != d.oidc->settings().issuer)
    return s->refuse("sso_failed",
                     "the answer's iss `" + at("iss").substr(0, 200) + "` is not the issuer");
  std::string browserState;
  if (auto cookie = req.http.header("cookie")) browserState = cookieValue(*cookie, kFlowCookie);
  d.oidc->finish(at("code"), at("state"), browserState, [s](Result<OidcIdentity> r) {
    if (!r) {
      if (r.error().kind == ErrorKind::Unavailable) {
        spdlog::warn("single sign-on: {}", r.error().message);
        return s->refuse("sso_unavailable", "provider unavailable: " + r.error().message);
      }
      return s->refuse("sso_failed", r.error().message);
    }
    s->who = std::move(*r);
    if (!s->who.role) return s->refuse("no_role", "in no group that has a role here");
    if (!isValidName(s->who.name))
      return s->refuse("sso_failed",
                       "`" + s->who.name.substr(0, 64) + "` is not a name a user may have here");
    storeUser(s);
  });
}

}  // namespace ductus::api
