// The API's routes for who calls: signing in and out (browser sessions),
// the caller's own account (/me), and, for admins, users and tokens. Each
// change writes its audit row in its own transaction; sign-in failures are
// audited too.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "api/audit/audit_log.h"
#include "api/auth/credentials.h"
#include "api/auth/directory.h"
#include "api/auth/oidc.h"
#include "api/auth/password_hasher.h"
#include "api/auth/sign_in_guard.h"
#include "api/route.h"
#include "schema/pg_pool.h"

namespace ductus::api {

// What the routes use; must outlive them (the engine owns it).
struct AuthDeps {
  store::PgPool& pool;
  PasswordHasher& hasher;
  AuditLog& audit;
  Clock clock = systemClock();
  AuthPolicy policy = {};
  // The session cookie's Secure attribute: on unless the API listens on
  // loopback only (isLoopbackHost of api.listen's host).
  bool secureCookies = true;
  // Sign-ins in flight per address and unknown names' failures.
  SignInGuard signIns = {};
  // auth: { ldap: }: names no local user has are asked of the directory.
  Directory* directory = nullptr;
  // auth: { oidc: }: the console's single sign-on (api/auth/oidc_routes.h).
  OidcClient* oidc = nullptr;
};

// Counts a wrong password or code of user `userId` towards their lockout
// (AuthPolicy::maxFailedSignIns) and writes `e`, the refusal's audit row,
// in one transaction; done(locked now?).
void recordFailure(AuthDeps& d, int64_t userId, AuditEntry e,
                   std::function<void(Result<bool>)> done);

// An audit row's actor and target for a caller acting on their own user.
AuditEntry auditEntryAboutCaller(const Caller& c, AuditAction action);

// What a wrong password in checkCallerPassword writes and answers.
struct WrongPassword {
  AuditAction action;  // the audit row's action ("user.password")
  std::string reason;  // its detail.reason
  std::string answer;  // the 403 wrong_password's message
};
// The caller's password asked again, before a change an open session alone
// must not make: `then` when it is right; when wrong, it counts towards the
// lockout (recordFailure), is audited and answered 403 wrong_password.
void checkCallerPassword(AuthDeps& d, const Caller& c, std::string password, WrongPassword wrong,
                         ApiRespond respond, std::function<void()> then);

// POST /api/v1/sessions, DELETE /api/v1/sessions/current, GET /api/v1/me,
// POST /api/v1/me/password, GET/POST /api/v1/users,
// POST /api/v1/users/{name}/disable, GET/POST /api/v1/tokens,
// DELETE /api/v1/tokens/{id}, and the second factor's (api/auth/totp_routes.h:
// /api/v1/me/totp..., /api/v1/users/{name}/totp, /api/v1/auth/totp). deps null: the routes for the
// OpenAPI document only (`ductus api-spec`), whose handlers never run.
std::vector<Route> authRoutes(AuthDeps* deps);

}  // namespace ductus::api
