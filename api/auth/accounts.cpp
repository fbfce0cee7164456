#include "api/auth/accounts.h"

#include <memory>

#include "api/auth/credentials.h"
#include "schema/pg_error.h"

namespace ductus::api {
namespace {

using store::PgResult;
using Results = std::vector<PgResult>;

#define DUCTUS_ISO(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"

// $N in `lockedParam` is the statement's "now" parameter.
std::string userColumns(int nowParam) {
  std::string now = "$" + std::to_string(nowParam) + "::timestamptz";
  return "id, name, role, permissions, must_change_password, disabled, "
         "CASE WHEN locked_until > " +
         now +
         " THEN " DUCTUS_ISO("locked_until") " END, " DUCTUS_ISO(
             "created_at") ", totp_enabled, source, " DUCTUS_ISO("directory_left_at");
}

UserInfo userRow(const PgResult& r, int row) {
  UserInfo u;
  u.id = r.integer(row, 0);
  u.name = std::string(r.text(row, 1));
  u.role = roleFromName(r.text(row, 2)).value_or(Role::Viewer);
  auto bits = permissionsFromNames(parseTextArray(r.text(row, 3)));
  u.permissions = bits ? *bits : kNoPermission;
  u.mustChangePassword = r.text(row, 4) == "t";
  u.disabled = r.text(row, 5) == "t";
  u.lockedUntil = r.optText(row, 6);
  u.createdAt = std::string(r.text(row, 7));
  u.totp = r.text(row, 8) == "t";
  u.source = std::string(r.text(row, 9));
  u.leftDirectoryAt = r.optText(row, 10);
  return u;
}

const char* kTokenColumns =
    "api_tokens.id, api_tokens.name, api_tokens.role, api_tokens.permissions, "
    "(SELECT u.name FROM users u WHERE u.id = api_tokens.user_id), api_tokens.created_by, "
    DUCTUS_ISO("api_tokens.created_at") ", " DUCTUS_ISO("api_tokens.last_used_at") ", "
    DUCTUS_ISO("api_tokens.revoked_at");

TokenInfo tokenRow(const PgResult& r, int row) {
  TokenInfo t;
  t.id = r.integer(row, 0);
  t.name = std::string(r.text(row, 1));
  t.role = roleFromName(r.text(row, 2)).value_or(Role::Viewer);
  auto bits = permissionsFromNames(parseTextArray(r.text(row, 3)));
  t.permissions = bits ? *bits : kNoPermission;
  t.user = r.optText(row, 4);
  t.createdBy = std::string(r.text(row, 5));
  t.createdAt = std::string(r.text(row, 6));
  t.lastUsedAt = r.optText(row, 7);
  t.revokedAt = r.optText(row, 8);
  return t;
}

// A name taken meanwhile (SQLSTATE 23505), in the engine's words. A value
// a table refuses is checked before it is sent, so any other refusal is a
// mistake kept as it is: the API answers it 500 and logs its cause.
Error classify(const Error& e) {
  if (store::pg::uniqueViolation(e)) return Error{"the name is taken", ErrorKind::Exists};
  return e;
}

AuditEntry withTarget(AuditEntry e, std::string action, std::string kind, int64_t id,
                      std::string name) {
  e.action = std::move(action);
  e.targetKind = std::move(kind);
  e.targetId = std::to_string(id);
  e.targetName = std::move(name);
  return e;
}

}  // namespace

nlohmann::json toJson(const UserInfo& u) {
  return {{"id", u.id},
          {"name", u.name},
          {"role", roleName(u.role)},
          {"permissions", permissionNames(u.permissions)},
          {"mustChangePassword", u.mustChangePassword},
          {"disabled", u.disabled},
          {"totp", u.totp},
          {"lockedUntil", u.lockedUntil ? nlohmann::json(*u.lockedUntil) : nlohmann::json()},
          {"source", u.source},
          {"leftDirectoryAt",
           u.leftDirectoryAt ? nlohmann::json(*u.leftDirectoryAt) : nlohmann::json()},
          {"createdAt", u.createdAt}};
}

nlohmann::json toJson(const TokenInfo& t) {
  auto opt = [](const std::optional<std::string>& s) {
    return s ? nlohmann::json(*s) : nlohmann::json();
  };
  return {{"id", t.id},
          {"name", t.name},
          {"role", roleName(t.role)},
          {"permissions", permissionNames(t.permissions)},
          {"user", opt(t.user)},
          {"createdBy", t.createdBy},
          {"createdAt", t.createdAt},
          {"lastUsedAt", opt(t.lastUsedAt)},
          {"revokedAt", opt(t.revokedAt)}};
}

void createUser(store::PgConnection& conn, NewUser user, AuditEntry who, TimePoint now,
                std::function<void(Result<UserInfo>)> done) {
  std::string at = pgTime(now);
  std::vector<TxStep> steps;
  steps.push_back(fixedStep(
      {"INSERT INTO users (name, password_hash, role, permissions, must_change_password, "
       "created_at, updated_at) VALUES ($1, $2, $3, $4::text[], $5, $6, $6) "
       "ON CONFLICT (name) DO NOTHING RETURNING " + userColumns(6),
       {user.name, user.passwordHash, std::string(roleName(user.role)),
        permissionsArray(user.permissions), user.mustChangePassword ? "true" : "false", at}}));
  steps.push_back([who, now, name = user.name](const Results& r) -> Result<SqlStatement> {
    if (r[0].rows() == 0) return Error{"a user named '" + name + "' exists", ErrorKind::Exists};
    auto u = userRow(r[0], 0);
    auto e = withTarget(who, "user.create", "user", u.id, u.name);
    e.detail["role"] = roleName(u.role);
    e.detail["permissions"] = permissionNames(u.permissions);
    return auditInsert(e, now);
  });
  runTransaction(conn, std::move(steps), [done = std::move(done)](Result<Results> r) {
    if (!r) return done(classify(r.error()));
    done(userRow((*r)[0], 0));
  });
}

void listUsers(store::PgConnection& conn, TimePoint now,
               std::function<void(Result<std::vector<UserInfo>>)> done) {
  conn.query("SELECT " + userColumns(1) + " FROM users ORDER BY name", {pgTime(now)},
             [done = std::move(done)](Result<PgResult> r) {
               if (!r) return done(r.error());
               std::vector<UserInfo> out;
               for (int i = 0; i < r->rows(); ++i) out.push_back(userRow(*r, i));
               done(std::move(out));
             });
}

namespace {

// An UPDATE of the user named `name` (`set`: its SET list), their sessions
// ended, and the audit row `action`, in one transaction.
void changeUserEndingSessions(store::PgConnection& conn, std::string name, std::string set,
                              std::string action, AuditEntry who, TimePoint now,
                              std::function<void(Result<UserInfo>)> done) {
  std::vector<TxStep> steps;
  steps.push_back(fixedStep({"UPDATE users SET " + set +
                                 ", updated_at = $2 WHERE name = $1 "
                                 "RETURNING " +
                                 userColumns(2),
                             {name, pgTime(now)}}));
  steps.push_back([name](const Results& r) -> Result<SqlStatement> {
    if (r[0].rows() == 0) return Error{"no user is named '" + name + "'", ErrorKind::NotFound};
    return SqlStatement{"DELETE FROM sessions WHERE user_id = $1",
                        {std::to_string(r[0].integer(0, 0))}};
  });
  steps.push_back([who, now, action](const Results& r) -> Result<SqlStatement> {
    auto u = userRow(r[0], 0);
    auto e = withTarget(who, action, "user", u.id, u.name);
    e.detail["sessionsEnded"] = r[1].affected();
    return auditInsert(e, now);
  });
  runTransaction(conn, std::move(steps), [done = std::move(done)](Result<Results> r) {
    if (!r) return done(classify(r.error()));
    done(userRow((*r)[0], 0));
  });
}

}  // namespace

void disableUser(store::PgConnection& conn, std::string name, AuditEntry who, TimePoint now,
                 std::function<void(Result<UserInfo>)> done) {
  changeUserEndingSessions(conn, std::move(name), "disabled = true", "user.disable", std::move(who),
                           now, std::move(done));
}

void resetTotp(store::PgConnection& conn, std::string name, AuditEntry who, TimePoint now,
               std::function<void(Result<UserInfo>)> done) {
  changeUserEndingSessions(conn, std::move(name),
                           "totp_enabled = false, totp_secret = NULL, totp_last_step = NULL, "
                           "totp_recovery = '{}'",
                           "user.totp.reset", std::move(who), now, std::move(done));
}

void createToken(store::PgConnection& conn, NewToken token, AuditEntry who, TimePoint now,
                 std::function<void(Result<CreatedToken>)> done) {
  auto secret = newToken();
  if (!secret) return done(secret.error());
  std::string at = pgTime(now);
  std::vector<TxStep> steps;
  if (token.user)
    steps.push_back(fixedStep({"SELECT id FROM users WHERE name = $1", {*token.user}}));
  else
    steps.push_back(fixedStep({"SELECT NULL::bigint", {}}));
  steps.push_back([token, who, at, hash = secretHash(*secret)](
                      const Results& r) -> Result<SqlStatement> {
    if (token.user && r[0].rows() == 0)
      return Error{"no user is named '" + *token.user + "'", ErrorKind::NotFound};
    return SqlStatement{
        "INSERT INTO api_tokens (name, token_hash, role, permissions, user_id, created_by, "
        "created_at) VALUES ($1, $2, $3, $4::text[], $5::bigint, $6, $7) "
        "ON CONFLICT DO NOTHING RETURNING " + std::string(kTokenColumns),
        {token.name, hash, std::string(roleName(token.role)), permissionsArray(token.permissions),
         r[0].optText(0, 0), who.actor, at}};
  });
  steps.push_back([who, now, name = token.name](const Results& r) -> Result<SqlStatement> {
    if (r[1].rows() == 0) return Error{"a live token is named '" + name + "'", ErrorKind::Exists};
    auto t = tokenRow(r[1], 0);
    auto e = withTarget(who, "token.create", "token", t.id, t.name);
    e.detail["role"] = roleName(t.role);
    e.detail["permissions"] = permissionNames(t.permissions);
    if (t.user) e.detail["user"] = *t.user;
    return auditInsert(e, now);
  });
  runTransaction(conn, std::move(steps),
                 [done = std::move(done), secret = *secret](Result<Results> r) {
                   if (!r) return done(classify(r.error()));
                   done(CreatedToken{tokenRow((*r)[1], 0), secret});
                 });
}

void listTokens(store::PgConnection& conn, bool includeRevoked, std::optional<int64_t> ownerId,
                std::function<void(Result<std::vector<TokenInfo>>)> done) {
  std::string sql = "SELECT " + std::string(kTokenColumns) + " FROM api_tokens WHERE true";
  if (!includeRevoked) sql += " AND revoked_at IS NULL";
  std::vector<store::Param> params;
  if (ownerId) {
    sql += " AND user_id = $1::bigint";
    params.push_back(std::to_string(*ownerId));
  }
  sql += " ORDER BY id";
  conn.query(std::move(sql), std::move(params), [done = std::move(done)](Result<PgResult> r) {
    if (!r) return done(r.error());
    std::vector<TokenInfo> out;
    for (int i = 0; i < r->rows(); ++i) out.push_back(tokenRow(*r, i));
    done(std::move(out));
  });
}

void revokeToken(store::PgConnection& conn, std::string idOrName, std::optional<int64_t> ownerId,
                 AuditEntry who, TimePoint now, std::function<void(Result<TokenInfo>)> done) {
  bool byId = !idOrName.empty() && idOrName.size() < 19 &&
              idOrName.find_first_not_of("0123456789") == std::string::npos;
  std::string sql = std::string("UPDATE api_tokens SET revoked_at = $2 WHERE revoked_at IS NULL AND ") +
                    (byId ? "id = $1::bigint" : "name = $1");
  std::vector<store::Param> params{idOrName, pgTime(now)};
  if (ownerId) {
    sql += " AND user_id = $3::bigint";
    params.push_back(std::to_string(*ownerId));
  }
  sql += " RETURNING " + std::string(kTokenColumns);
  std::vector<TxStep> steps;
  steps.push_back(fixedStep({std::move(sql), std::move(params)}));
  steps.push_back([who, now, idOrName, mine = ownerId.has_value()](
                      const Results& r) -> Result<SqlStatement> {
    if (r[0].rows() == 0)
      return Error{std::string(mine ? "none of your live tokens" : "no live token") +
                       " has the id or name '" + idOrName + "'",
                   ErrorKind::NotFound};
    auto t = tokenRow(r[0], 0);
    return auditInsert(withTarget(who, "token.revoke", "token", t.id, t.name), now);
  });
  runTransaction(conn, std::move(steps), [done = std::move(done)](Result<Results> r) {
    if (!r) return done(classify(r.error()));
    done(tokenRow((*r)[0], 0));
  });
}

}  // namespace ductus::api
