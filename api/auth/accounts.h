// Users and tokens, as the API's admin routes and the server's CLI
// (`ductus user ...`, `ductus token ...`) change them: each change and its
// audit row in one transaction on the caller's connection (a pool lease, or
// the CLI's own connection), which must outlive the callback.
//
// Error kinds: Exists (the name is taken), NotFound, Invalid (a value the
// tables refuse).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/audit/audit_log.h"
#include "api/route.h"
#include "schema/pg_connection.h"

namespace ductus::api {

struct UserInfo {
  int64_t id = 0;
  std::string name;
  Role role = Role::Viewer;
  unsigned permissions = kNoPermission;
  bool mustChangePassword = false;
  bool disabled = false;
  bool totp = false;  // signs in with a code beside the password (api/auth/totp.h)
  // Where they sign in: "local", "ldap" (the directory's password,
  // api/auth/directory.h) or "oidc" (single sign-on, api/auth/oidc.h); and
  // since when the refresh round found them gone from the directory, or in
  // no mapped group.
  std::string source = "local";
  std::optional<std::string> leftDirectoryAt;  // ISO 8601, UTC
  std::optional<std::string> lockedUntil;  // ISO 8601, UTC; set while locked
  std::string createdAt;
};

struct TokenInfo {
  int64_t id = 0;
  std::string name;
  Role role = Role::Viewer;
  unsigned permissions = kNoPermission;
  std::optional<std::string> user;  // the owner's name
  std::string createdBy;
  std::string createdAt;
  std::optional<std::string> lastUsedAt;
  std::optional<std::string> revokedAt;
};

struct NewUser {
  std::string name;
  Role role = Role::Viewer;
  unsigned permissions = kNoPermission;
  std::string passwordHash;  // argon2id, encoded
  bool mustChangePassword = false;
};

struct NewToken {
  std::string name;
  Role role = Role::Viewer;
  unsigned permissions = kNoPermission;
  std::optional<std::string> user;  // acts as this user at most
};

struct CreatedToken {
  TokenInfo info;
  std::string token;  // dux_...: shown once, never stored
};

nlohmann::json toJson(const UserInfo& u);
nlohmann::json toJson(const TokenInfo& t);

// `who`: the actor fields of the audit row (action and target are set here).
void createUser(store::PgConnection& conn, NewUser user, AuditEntry who, TimePoint now,
                std::function<void(Result<UserInfo>)> done);
void listUsers(store::PgConnection& conn, TimePoint now,
               std::function<void(Result<std::vector<UserInfo>>)> done);
// The user named `name` (NotFound when none).
void findUser(store::PgConnection& conn, std::string name, TimePoint now,
              std::function<void(Result<UserInfo>)> done);
// Disables the user and ends their sessions; their tokens stop working.
// Never the last enabled admin (Conflict): no one could manage users then.
void disableUser(store::PgConnection& conn, std::string name, AuditEntry who, TimePoint now,
                 std::function<void(Result<UserInfo>)> done);
// Enables a disabled user again: they sign in, and their tokens not
// revoked work again.
void enableUser(store::PgConnection& conn, std::string name, AuditEntry who, TimePoint now,
                std::function<void(Result<UserInfo>)> done);
// An admin's changes to the user `seen` (as findUser read it, and checked
// against the caller's grant): refused (Conflict) when the row's role or
// permissions are no longer `seen`'s when the transaction locks it, or
// when the user does not sign in with a local password (the directory or
// the provider decides their password and role).
//
// resetPassword: `passwordHash` (a one-time password the admin hands
// over) replaces theirs, to be changed at their next sign-in; the lockout
// lifted and their sessions ended (tokens stay).
void resetPassword(store::PgConnection& conn, UserInfo seen, std::string passwordHash,
                   AuditEntry who, TimePoint now, std::function<void(Result<UserInfo>)> done);
// changeRole: the user's role and permissions become `role` and
// `permissions`, from their next request (sessions and tokens read them
// on every call). Never leaves no enabled admin (Conflict).
void changeRole(store::PgConnection& conn, UserInfo seen, Role role, unsigned permissions,
                AuditEntry who, TimePoint now, std::function<void(Result<UserInfo>)> done);
// Turns the user's second factor off (a lost phone) and ends their
// sessions: the password alone signs them in until they set one up again.
void resetTotp(store::PgConnection& conn, std::string name, AuditEntry who, TimePoint now,
               std::function<void(Result<UserInfo>)> done);

void createToken(store::PgConnection& conn, NewToken token, AuditEntry who, TimePoint now,
                 std::function<void(Result<CreatedToken>)> done);
// `ownerId`: only the tokens of this user (a user's own tokens).
void listTokens(store::PgConnection& conn, bool includeRevoked, std::optional<int64_t> ownerId,
                std::function<void(Result<std::vector<TokenInfo>>)> done);
// `idOrName`: a token's id (digits) or its live name; `ownerId`: only if
// it is this user's (else not found).
void revokeToken(store::PgConnection& conn, std::string idOrName, std::optional<int64_t> ownerId,
                 AuditEntry who, TimePoint now, std::function<void(Result<TokenInfo>)> done);

}  // namespace ductus::api
