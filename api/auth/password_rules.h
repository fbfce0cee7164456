// What a password must be before it is set, wherever it is set (the API's
// POST /users and POST /me/password, `ductus user create`): long enough,
// not one character over and over or only spaces, not the user's name nor
// holding it, and not one of the 100,000 most used passwords (the
// published list in api/auth/data/, inside the binary).
#pragma once

#include <string_view>

#include "api/auth/credentials.h"
#include "common/result.h"

namespace ductus::api {

// {} when `password` may be the password of the user `userName`; otherwise
// an Error of kind WeakPassword whose message names the rule it breaks.
Status checkNewPassword(std::string_view password, std::string_view userName,
                        const AuthPolicy& policy = {});

// Whether the list holds `password`, compared in lower case.
bool isCommonPassword(std::string_view password);

// The list as built in: one password a line.
std::string_view commonPasswordList();

}  // namespace ductus::api
