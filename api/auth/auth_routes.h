// The API's routes for who calls: signing in and out (browser sessions),
// the caller's own account (/me), and, for admins, users and tokens. Each
// change writes its audit row in its own transaction; sign-in failures are
// audited too.
#pragma once

#include <vector>

#include "api/audit/audit_log.h"
#include "api/auth/credentials.h"
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
};

// Counts a wrong password or code of user `userId` towards their lockout
// (AuthPolicy::maxFailedSignIns) and writes `e`, the refusal's audit row,
// in one transaction; done(locked now?).
void recordFailure(AuthDeps& d, int64_t userId, AuditEntry e,
                   std::function<void(Result<bool>)> done);

// POST /api/v1/sessions, DELETE /api/v1/sessions/current, GET /api/v1/me,
// POST /api/v1/me/password, GET/POST /api/v1/users,
// POST /api/v1/users/{name}/disable, GET/POST /api/v1/tokens,
// DELETE /api/v1/tokens/{id}, and the second factor's (api/auth/totp_routes.h:
// /api/v1/me/totp..., /api/v1/users/{name}/totp, /api/v1/auth/totp). deps null: the routes for the
// OpenAPI document only (`ductus api-spec`), whose handlers never run.
std::vector<Route> authRoutes(AuthDeps* deps);

}  // namespace ductus::api
