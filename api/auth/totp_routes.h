// The handlers of local users' second factor (api/auth/totp.h), routed by
// authRoutes (api/auth/auth_routes.h): a user turns theirs on (POST
// /me/totp, then /me/totp/confirm with a code the app shows) or off
// (/me/totp/disable, with a current code); an admin resets a user's (DELETE
// /users/{name}/totp, a lost phone) and chooses the roles that must have
// one (GET/PUT /auth/totp). Each change writes its audit row in its own
// transaction. Sign-in with a code is POST /sessions.
#pragma once

#include "api/auth/auth_routes.h"
#include "api/route.h"

namespace ductus::api {

void beginTotp(AuthDeps& d, const ApiRequest& req, ApiRespond respond);
void confirmTotp(AuthDeps& d, const ApiRequest& req, ApiRespond respond);
void disableTotp(AuthDeps& d, const ApiRequest& req, ApiRespond respond);
void resetTotpRoute(AuthDeps& d, const ApiRequest& req, ApiRespond respond);
void getTotpPolicy(AuthDeps& d, const ApiRequest& req, ApiRespond respond);
void putTotpPolicy(AuthDeps& d, const ApiRequest& req, ApiRespond respond);

}  // namespace ductus::api
