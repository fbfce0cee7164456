// The console's single sign-on through an OpenID Connect provider
// (api/auth/oidc.h), as three anonymous routes:
//
//   GET /api/v1/auth/methods          how one may sign in here (the console's
//                                     sign-in page asks, to show the button)
//   GET /api/v1/auth/oidc/start       302 to the provider, with the flow's
//                                     state in the ductus_oidc cookie
//   GET /api/v1/auth/oidc/callback    the provider's answer: the user's row
//                                     made or brought up to date (source
//                                     'oidc', role from the groups claim), a
//                                     session, 302 to the console
//
// Every refusal is audited (session.create, denied, with the check that
// failed) and sends the browser back to the console with ?signin_error=
// (no_role, sso_failed, sso_unavailable), whose words it shows.
#pragma once

#include "api/auth/auth_routes.h"
#include "api/route.h"

namespace ductus::api {

void authMethods(AuthDeps& d, const ApiRequest& req, ApiRespond respond);
void startSingleSignOn(AuthDeps& d, const ApiRequest& req, ApiRespond respond);
void finishSingleSignOn(AuthDeps& d, const ApiRequest& req, ApiRespond respond);

}  // namespace ductus::api
