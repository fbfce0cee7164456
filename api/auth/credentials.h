// The secrets the API hands out and how they are kept: bearer tokens
// `dux_<64 hex>` and session cookies of 64 hex digits, both from OpenSSL's
// RAND_bytes and stored only as their SHA-256 (hex); generated passwords;
// names, roles and permissions as the database spells them; and the rules
// for sign-in (lockout) and sessions (idle and absolute lifetimes).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "api/route.h"
#include "common/result.h"

namespace ductus::api {

struct AuthPolicy {
  int maxFailedSignIns = 5;                           // then locked for:
  std::chrono::seconds lockout = std::chrono::minutes(15);
  std::chrono::seconds sessionIdle = std::chrono::hours(12);
  std::chrono::seconds sessionLifetime = std::chrono::hours(24 * 7);
  // last_used_at / last_seen_at are written at most this often per token
  // or session: a busy script would otherwise write a row per call.
  std::chrono::seconds touchEvery = std::chrono::minutes(1);
  // Sign-ins from one address hashing or waiting to at once; past it 429
  // (api/auth/sign_in_guard.h). The hasher holds 2 running and 32 waiting.
  size_t maxSignInsPerAddress = 4;
  size_t minPasswordLength = 12;
  size_t maxPasswordLength = 1024;
};

inline constexpr std::string_view kTokenPrefix = "dux_";
inline constexpr std::string_view kSessionCookie = "ductus_session";

Result<std::string> newToken();          // "dux_" + 64 lowercase hex
Result<std::string> newSessionSecret();  // 64 lowercase hex
Result<std::string> newPassword();       // 24 letters and digits
bool isTokenText(std::string_view s);          // dux_ + 64 hex
bool isSessionSecretText(std::string_view s);  // 64 hex
// What is kept of a token or a session secret.
std::string secretHash(std::string_view secret);

// Users' and tokens' names: a letter or digit, then up to 63 of letters,
// digits and ._@- (the tables check the same).
bool isValidName(std::string_view name);

// "payloads,audit" (either order, no spaces needed) to bits; an unknown
// word is an Error naming it.
Result<unsigned> permissionsFromList(std::string_view list);
Result<unsigned> permissionsFromNames(const std::vector<std::string>& names);
std::vector<std::string> permissionNames(unsigned bits);
// As a Postgres text[] parameter: "{payloads,audit}".
std::string permissionsArray(unsigned bits);

// A token owned by a user acts as that user at most.
inline Role lesserRole(Role a, Role b) { return static_cast<int>(a) < static_cast<int>(b) ? a : b; }

// The Set-Cookie value that starts a session, and the one that ends it.
// `secure` unless the API listens on loopback only (a browser refuses a
// Secure cookie over plain http://127.0.0.1 in some versions, and loopback
// traffic never leaves the machine).
std::string sessionCookieHeader(std::string_view secret, bool secure, const AuthPolicy& policy);
std::string clearSessionCookieHeader(bool secure);
// The ductus_session cookie's value in a Cookie header, or "" if none.
std::string sessionCookieValue(std::string_view cookieHeader);
// Any cookie's value in a Cookie header, or "" if none.
std::string cookieValue(std::string_view cookieHeader, std::string_view name);

// Whether a listen host is loopback only ("127.0.0.1", "::1", "localhost").
bool isLoopbackHost(std::string_view host);

}  // namespace ductus::api
