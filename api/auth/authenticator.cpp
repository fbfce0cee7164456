#include "api/auth/authenticator.h"

#include <algorithm>
#include <cctype>

namespace ductus::api {
namespace {

using Done = std::function<void(Result<std::optional<Caller>>)>;

Error unauthenticated(std::string why) { return Error{std::move(why), ErrorKind::Unauthenticated}; }
Error unavailable(const Error& e) {
  return Error{"the database cannot be asked who is calling: " + e.message, ErrorKind::Unavailable};
}

Role roleOr(std::string_view name, Role fallback) { return roleFromName(name).value_or(fallback); }

unsigned permissionsOf(std::string_view pgArray) {
  auto bits = permissionsFromNames(parseTextArray(pgArray));
  return bits ? *bits : kNoPermission;
}

std::string seconds(std::chrono::seconds s) { return std::to_string(s.count()) + " seconds"; }

// What a user who must change their password may still do.
bool allowedBeforePasswordChange(const std::string& path) {
  return path == "/api/v1/me" || path == "/api/v1/me/password" ||
         path == "/api/v1/sessions/current";
}

// What a user whose role needs a second factor may do before turning one on.
bool allowedBeforeTotp(const std::string& path) {
  return path == "/api/v1/me" || path == "/api/v1/me/totp" || path == "/api/v1/me/totp/confirm" ||
         path == "/api/v1/sessions/current";
}

}  // namespace

StoreAuthenticator::StoreAuthenticator(store::PgPool& pool, Clock clock, AuthPolicy policy)
    : pool_(pool), clock_(std::move(clock)), policy_(policy) {}

StoreAuthenticator::~StoreAuthenticator() { *alive_ = false; }

void StoreAuthenticator::identify(const net::HttpRequest& request, Done done) {
  if (auto auth = request.header("authorization")) {
    std::string_view v = *auth;
    constexpr std::string_view kBearer = "Bearer ";
    if (v.size() < kBearer.size() || !std::equal(kBearer.begin(), kBearer.end(), v.begin(),
                                                 [](char a, char b) {
                                                   return std::tolower(a) == std::tolower(b);
                                                 }))
      return done(unauthenticated("only Bearer tokens are accepted"));
    std::string token(v.substr(kBearer.size()));
    while (!token.empty() && token.back() == ' ') token.pop_back();
    if (!isTokenText(token)) return done(unauthenticated("the token is not a Ductus token"));
    return byToken(std::move(token), request.peer, std::move(done));
  }
  if (auto cookie = request.header("cookie")) {
    std::string secret = sessionCookieValue(*cookie);
    if (!secret.empty()) {
      if (!isSessionSecretText(secret)) return done(unauthenticated("the session is not valid"));
      return bySession(std::move(secret), request.path, request.peer, std::move(done));
    }
  }
  done(std::optional<Caller>{});
}

void StoreAuthenticator::byToken(std::string token, std::string address, Done done) {
  std::string now = pgTime(clock_());
  std::string touchAfter = pgTime(clock_() - policy_.touchEvery);
  pool_.acquire([this, alive = alive_, hash = secretHash(token), now, touchAfter,
                 address = std::move(address),
                 done = std::move(done)](Result<store::PgPool::LeasePtr> lease) mutable {
    if (!lease) return done(unavailable(lease.error()));
    auto l = *lease;
    l->conn().query(
        "SELECT t.id, t.name, t.role, t.permissions, t.user_id, "
        "t.last_used_at IS NULL OR t.last_used_at < $3::timestamptz, "
        "u.name, u.role, u.permissions, u.disabled, "
        "coalesce(u.locked_until > $2::timestamptz, false), u.directory_left_at IS NOT NULL, "
        "u.source "
        "FROM api_tokens t LEFT JOIN users u ON u.id = t.user_id "
        "WHERE t.token_hash = $1 AND t.revoked_at IS NULL",
        {hash, now, touchAfter},
        [this, alive, l, now, touchAfter, address,
         done = std::move(done)](Result<store::PgResult> r) mutable {
          if (!r) return done(unavailable(r.error()));
          if (r->rows() == 0) return done(unauthenticated("the token is unknown or revoked"));
          Caller c;
          c.via = Via::Token;
          c.tokenId = r->integer(0, 0);
          c.name = std::string(r->text(0, 1));
          c.role = roleOr(r->text(0, 2), Role::Viewer);
          c.permissions = permissionsOf(r->text(0, 3));
          c.address = address;
          if (!r->isNull(0, 4)) {
            if (r->text(0, 9) == "t")
              return done(unauthenticated("the token's user is disabled"));
            if (r->text(0, 10) == "t")
              return done(unauthenticated("the token's user is locked"));
            if (r->text(0, 11) == "t")
              return done(unauthenticated("the token's user left the directory"));
            // The provider decides who a single sign-on user is, at each
            // sign-on; a token would outlive the provider's "no".
            if (r->text(0, 12) == "oidc")
              return done(unauthenticated(
                  "the token's user signs in with single sign-on, whose users have no tokens"));
            c.source = std::string(r->text(0, 12));
            c.userId = r->integer(0, 4);
            c.name = std::string(r->text(0, 6));
            c.role = lesserRole(c.role, roleOr(r->text(0, 7), Role::Viewer));
            c.permissions &= permissionsOf(r->text(0, 8));
          }
          bool stale = r->text(0, 5) == "t";
          if (stale && *alive)
            touch("UPDATE api_tokens SET last_used_at = $2 WHERE id = $1 "
                  "AND (last_used_at IS NULL OR last_used_at < $3::timestamptz)",
                  {std::to_string(c.tokenId), now, touchAfter});
          done(std::optional<Caller>(std::move(c)));
        });
  });
}

void StoreAuthenticator::bySession(std::string secret, std::string path, std::string address,
                                   Done done) {
  std::string now = pgTime(clock_());
  std::string touchAfter = pgTime(clock_() - policy_.touchEvery);
  pool_.acquire([this, alive = alive_, hash = secretHash(secret), now, touchAfter,
                 path = std::move(path), address = std::move(address),
                 done = std::move(done)](Result<store::PgPool::LeasePtr> lease) mutable {
    if (!lease) return done(unavailable(lease.error()));
    auto l = *lease;
    l->conn().query(
        "SELECT s.id, u.id, u.name, u.role, u.permissions, u.must_change_password, "
        "s.last_seen_at < $3::timestamptz, "
        "NOT u.totp_enabled AND u.source = 'local' AND EXISTS (SELECT 1 FROM "
        "totp_required_roles t WHERE t.role = u.role), u.source "
        "FROM sessions s JOIN users u ON u.id = s.user_id "
        "WHERE s.secret_hash = $1 AND s.expires_at > $2::timestamptz "
        "AND s.last_seen_at > $2::timestamptz - $4::interval "
        "AND NOT u.disabled AND (u.locked_until IS NULL OR u.locked_until <= $2::timestamptz) "
        "AND u.directory_left_at IS NULL",
        {hash, now, touchAfter, seconds(policy_.sessionIdle)},
        [this, alive, l, now, touchAfter, path, address,
         done = std::move(done)](Result<store::PgResult> r) mutable {
          if (!r) return done(unavailable(r.error()));
          if (r->rows() == 0)
            return done(unauthenticated("the session has ended; sign in again"));
          Caller c;
          c.via = Via::Session;
          c.sessionId = r->integer(0, 0);
          c.userId = r->integer(0, 1);
          c.name = std::string(r->text(0, 2));
          c.role = roleOr(r->text(0, 3), Role::Viewer);
          c.permissions = permissionsOf(r->text(0, 4));
          c.address = address;
          c.source = std::string(r->text(0, 8));
          if (r->text(0, 5) == "t" && !allowedBeforePasswordChange(path))
            return done(Error{"change your password first (POST /api/v1/me/password)",
                              ErrorKind::PasswordChangeRequired});
          if (r->text(0, 7) == "t" && !allowedBeforeTotp(path))
            return done(
                Error{"your role signs in with a second factor: turn yours on first "
                      "(POST /api/v1/me/totp, then /api/v1/me/totp/confirm)",
                      ErrorKind::TotpRequired});
          if (r->text(0, 6) == "t" && *alive)
            touch("UPDATE sessions SET last_seen_at = $2 WHERE id = $1 "
                  "AND last_seen_at < $3::timestamptz",
                  {std::to_string(c.sessionId), now, touchAfter});
          done(std::optional<Caller>(std::move(c)));
        });
  });
}

void StoreAuthenticator::touch(std::string sql, std::vector<store::Param> params) {
  pool_.acquire([sql = std::move(sql),
                 params = std::move(params)](Result<store::PgPool::LeasePtr> lease) mutable {
    if (!lease) return;  // the next call tries again
    auto l = *lease;
    l->conn().query(std::move(sql), std::move(params), [l](Result<store::PgResult>) {});
  });
}

}  // namespace ductus::api
