// StoreAuthenticator: who is calling, from the database, on every call.
//
// `Authorization: Bearer dux_...` is looked up by its SHA-256 in api_tokens
// (so a revoked token fails on its next call); a token owned by a user acts
// as that user at most (the lesser role, the permissions both have), and
// stops working while that user is disabled or locked. Otherwise the
// ductus_session cookie is looked up by its SHA-256 in sessions, alive
// while used within the idle time and younger than its lifetime. A user
// who must change their password may, through a session, only read /me,
// change the password and sign out (an Error of kind PasswordChangeRequired).
//
// Error kinds of identify(): Unauthenticated (wrong, revoked, expired:
// 401), PasswordChangeRequired (403), Unavailable (the database could not
// be asked: 503).
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "api/audit/sql.h"
#include "api/auth/credentials.h"
#include "api/route.h"
#include "schema/pg_pool.h"

namespace ductus::api {

class StoreAuthenticator : public Authenticator {
 public:
  StoreAuthenticator(store::PgPool& pool, Clock clock = systemClock(), AuthPolicy policy = {});
  ~StoreAuthenticator() override;

  void identify(const net::HttpRequest& request,
                std::function<void(Result<std::optional<Caller>>)> done) override;

 private:
  void byToken(std::string token, std::string address,
               std::function<void(Result<std::optional<Caller>>)> done);
  void bySession(std::string secret, std::string path, std::string address,
                 std::function<void(Result<std::optional<Caller>>)> done);
  // Writes a last-used time, answering no one.
  void touch(std::string sql, std::vector<store::Param> params);

  store::PgPool& pool_;
  Clock clock_;
  AuthPolicy policy_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::api
