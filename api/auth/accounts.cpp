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

void findUser(store::PgConnection& conn, std::string name, TimePoint now,
              std::function<void(Result<UserInfo>)> done) {
  conn.query("SELECT " + userColumns(2) + " FROM users WHERE name = $1", {name, pgTime(now)},
             [name, done = std::move(done)](Result<PgResult> r) {
               if (!r) return done(r.error());
               if (r->rows() == 0)
                 return done(Error{"no user is named '" + name + "'", ErrorKind::NotFound});
               done(userRow(*r, 0));
             });
}

namespace {

// One admin change of the user named `name`, in one transaction: the
// enabled admins locked first when the change could leave none (so two
// admins demoting each other can't both succeed), the user's row locked,
// `check` on it as it is now (an Error refuses), `set` (a SET list; $1 is
// the user's id, $2 now, `params` from $3), their sessions ended when
// `endSessions`, and the audit row `action` (`detail` adds to it).
struct UserChange {
  std::string name;
  std::string action;
  std::string set;
  std::vector<store::Param> params;
  bool guardLastAdmin = false;
  bool endSessions = false;
  std::function<std::optional<Error>(const UserInfo& now)> check;
  std::function<void(AuditEntry&, const UserInfo& before, const UserInfo& after)> detail;
};

bool enabledAdmin(const UserInfo& u) {
  return u.role == Role::Admin && !u.disabled && !u.leftDirectoryAt;
}

void changeUser(store::PgConnection& conn, UserChange c, AuditEntry who, TimePoint now,
                std::function<void(Result<UserInfo>)> done) {
  auto change = std::make_shared<UserChange>(std::move(c));
  std::string at = pgTime(now);
  // Where each statement's result is: the admins (when guarded), the user
  // as locked, the updated row, the sessions deleted (when ended).
  const size_t admins = 0;
  const size_t locked = change->guardLastAdmin ? 1 : 0;
  const size_t updated = locked + 1;
  std::vector<TxStep> steps;
  if (change->guardLastAdmin)
    steps.push_back(
        fixedStep({"SELECT id FROM users WHERE role = 'admin' AND NOT disabled "
                   "AND directory_left_at IS NULL ORDER BY id FOR UPDATE",
                   {}}));
  steps.push_back(fixedStep(
      {"SELECT " + userColumns(2) + " FROM users WHERE name = $1 FOR UPDATE", {change->name, at}}));
  steps.push_back([change, at, locked](const Results& r) -> Result<SqlStatement> {
    if (r[locked].rows() == 0)
      return Error{"no user is named '" + change->name + "'", ErrorKind::NotFound};
    auto before = userRow(r[locked], 0);
    if (change->check)
      if (auto refused = change->check(before)) return *refused;
    std::vector<store::Param> params{std::to_string(before.id), at};
    for (auto& p : change->params) params.push_back(p);
    return SqlStatement{"UPDATE users SET " + change->set +
                            ", updated_at = $2 WHERE id = $1 RETURNING " + userColumns(2),
                        std::move(params)};
  });
  auto audit = [change, who, now, locked, updated](const Results& r) -> Result<SqlStatement> {
    auto before = userRow(r[locked], 0);
    auto after = userRow(r[updated], 0);
    auto e = withTarget(who, change->action, "user", after.id, after.name);
    if (change->endSessions) e.detail["sessionsEnded"] = r[updated + 1].affected();
    if (change->detail) change->detail(e, before, after);
    return auditInsert(e, now);
  };
  steps.push_back([change, audit, locked, updated](const Results& r) -> Result<SqlStatement> {
    auto before = userRow(r[locked], 0);
    auto after = userRow(r[updated], 0);
    if (change->guardLastAdmin && enabledAdmin(before) && !enabledAdmin(after)) {
      int others = 0;
      for (int i = 0; i < r[admins].rows(); ++i)
        if (r[admins].integer(i, 0) != before.id) ++others;
      if (others == 0)
        return Error{"'" + before.name +
                         "' is the last enabled admin: make another user an admin first, or "
                         "no one could manage users",
                     ErrorKind::Conflict};
    }
    if (!change->endSessions) return audit(r);
    return SqlStatement{"DELETE FROM sessions WHERE user_id = $1", {std::to_string(after.id)}};
  });
  if (change->endSessions) steps.push_back(audit);
  runTransaction(conn, std::move(steps), [updated, done = std::move(done)](Result<Results> r) {
    if (!r) return done(classify(r.error()));
    done(userRow((*r)[updated], 0));
  });
}

// A change an admin made on what they saw: refused when the row changed
// since, or is not a local user's.
std::function<std::optional<Error>(const UserInfo&)> stillAsSeen(UserInfo seen) {
  return [seen](const UserInfo& now) -> std::optional<Error> {
    if (now.source != "local")
      return Error{"'" + now.name + "' signs in with " +
                       (now.source == "ldap" ? "the directory" : "single sign-on") +
                       ", which decides their password and role",
                   ErrorKind::Conflict};
    if (now.id != seen.id || now.role != seen.role || now.permissions != seen.permissions)
      return Error{"'" + now.name + "' was changed meanwhile: look again", ErrorKind::Conflict};
    return std::nullopt;
  };
}

}  // namespace

void disableUser(store::PgConnection& conn, std::string name, AuditEntry who, TimePoint now,
                 std::function<void(Result<UserInfo>)> done) {
  UserChange c;
  c.name = std::move(name);
  c.action = "user.disable";
  c.set = "disabled = true";
  c.guardLastAdmin = true;
  c.endSessions = true;
  changeUser(conn, std::move(c), std::move(who), now, std::move(done));
}

void enableUser(store::PgConnection& conn, std::string name, AuditEntry who, TimePoint now,
                std::function<void(Result<UserInfo>)> done) {
  UserChange c;
  c.name = std::move(name);
  c.action = "user.enable";
  c.set = "disabled = false";
  c.check = [](const UserInfo& u) -> std::optional<Error> {
    if (!u.disabled) return Error{"'" + u.name + "' is not disabled", ErrorKind::Conflict};
    return std::nullopt;
  };
  changeUser(conn, std::move(c), std::move(who), now, std::move(done));
}

void resetPassword(store::PgConnection& conn, UserInfo seen, std::string passwordHash,
                   AuditEntry who, TimePoint now, std::function<void(Result<UserInfo>)> done) {
  UserChange c;
  c.name = seen.name;
  c.action = "user.password_reset";
  c.set =
      "password_hash = $3, must_change_password = true, failed_attempts = 0, "
      "locked_until = NULL";
  c.params = {std::move(passwordHash)};
  c.endSessions = true;
  c.check = stillAsSeen(std::move(seen));
  changeUser(conn, std::move(c), std::move(who), now, std::move(done));
}

void changeRole(store::PgConnection& conn, UserInfo seen, Role role, unsigned permissions,
                AuditEntry who, TimePoint now, std::function<void(Result<UserInfo>)> done) {
  UserChange c;
  c.name = seen.name;
  c.action = "user.role";
  c.set = "role = $3, permissions = $4::text[]";
  c.params = {std::string(roleName(role)), permissionsArray(permissions)};
  c.guardLastAdmin = true;
  c.check = stillAsSeen(std::move(seen));
  c.detail = [](AuditEntry& e, const UserInfo& before, const UserInfo& after) {
    // As the directory's refresh writes a user.role row, with permissions.
    e.detail["from"] = std::string(roleName(before.role));
    e.detail["to"] = std::string(roleName(after.role));
    e.detail["permissions"] = {{"from", permissionNames(before.permissions)},
                               {"to", permissionNames(after.permissions)}};
  };
  changeUser(conn, std::move(c), std::move(who), now, std::move(done));
}

void resetTotp(store::PgConnection& conn, std::string name, AuditEntry who, TimePoint now,
               std::function<void(Result<UserInfo>)> done) {
  UserChange c;
  c.name = std::move(name);
  c.action = "user.totp.reset";
  c.set = "totp_enabled = false, totp_secret = NULL, totp_last_step = NULL, totp_recovery = '{}'";
  c.endSessions = true;
  changeUser(conn, std::move(c), std::move(who), now, std::move(done));
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
