// An admin's changes to other users over real HTTP, with the real
// authenticator, PostgreSQL and argon2id: enable again, a one-time
// password, another role; each audited, none beyond the admin's own
// grant, never leaving no enabled admin, and never a directory's or a
// provider's user's password or role.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <regex>

#include "tests/api/auth_fixture.h"

namespace ductus::api::test {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

class UserAdminTest : public AuthFixture {
 protected:
  // A signed-in session of `name`, as a browser holds it.
  std::string session(const std::string& name, const std::string& password) {
    auto r = signIn(name, password);
    EXPECT_EQ(r.status, 201) << r.body;
    return sessionOf(r);
  }
  ductus::test::HttpReply post(const std::string& path, const Headers& who,
                               const std::string& body = {}) {
    return call("POST", path, who, body);
  }
  ductus::test::HttpReply setRole(const std::string& name, const Headers& who,
                                  const std::string& body) {
    return call("PUT", "/api/v1/users/" + name + "/role", who, body);
  }
  std::string row(const std::string& name) {
    return db_.value(
        "SELECT role || ' ' || array_to_string(permissions, ',') || "
        "CASE WHEN disabled THEN ' disabled' ELSE '' END "
        "FROM users WHERE name = $1",
        {name});
  }
};

TEST_F(UserAdminTest, ADisabledUserIsEnabledAgainAndBothAreAudited) {
  makeUser("vera", Role::Viewer, kNoPermission, "vera's long password");
  auto admin = makeToken("root", Role::Admin, kNoPermission);
  auto theirs = makeToken("vera-script", Role::Viewer, kNoPermission, "vera");
  ASSERT_EQ(post("/api/v1/users/vera/disable", bearer(admin.token)).status, 200);
  EXPECT_EQ(signIn("vera", "vera's long password").status, 401);
  EXPECT_EQ(call("GET", "/api/v1/me", bearer(theirs.token)).status, 401);

  auto enabled = post("/api/v1/users/vera/enable", bearer(admin.token));
  ASSERT_EQ(enabled.status, 200) << enabled.body;
  EXPECT_EQ(bodyOf(enabled)["user"]["disabled"], false);
  EXPECT_EQ(signIn("vera", "vera's long password").status, 201);
  EXPECT_EQ(call("GET", "/api/v1/me", bearer(theirs.token)).status, 200);

  auto again = post("/api/v1/users/vera/enable", bearer(admin.token));
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_THAT(bodyOf(again)["message"].get<std::string>(), HasSubstr("not disabled"));
  EXPECT_EQ(post("/api/v1/users/nobody/enable", bearer(admin.token)).status, 404);
  // Admins only.
  makeUser("otto", Role::Operator, kPayloads | kAudit, "otto's long password");
  EXPECT_EQ(post("/api/v1/users/vera/enable", cookie(session("otto", "otto's long password"), true))
                .status,
            403);
  EXPECT_EQ(db_.column("SELECT action || ' ' || target_name || ' ' || actor FROM audit_log "
                       "WHERE action LIKE 'user.%able' ORDER BY id"),
            (std::vector<std::string>{"user.disable vera root", "user.enable vera root"}));
}

TEST_F(UserAdminTest, APasswordResetIsShownOnceAndMustBeChangedAtTheNextSignIn) {
  makeUser("olga", Role::Operator, kNoPermission, "olga's long password");
  auto admin = makeToken("root", Role::Admin, kNoPermission);
  std::string before = session("olga", "olga's long password");
  db_.value("UPDATE users SET locked_until = now() + interval '10 minutes', failed_attempts = 3 "
            "WHERE name = 'olga'");

  auto reset = post("/api/v1/users/olga/password", bearer(admin.token));
  ASSERT_EQ(reset.status, 200) << reset.body;
  std::string password = bodyOf(reset)["password"];
  EXPECT_TRUE(std::regex_match(password, std::regex("[A-Za-z0-9]{24}"))) << password;
  EXPECT_EQ(bodyOf(reset)["user"]["mustChangePassword"], true);
  EXPECT_TRUE(bodyOf(reset)["user"]["lockedUntil"].is_null()) << reset.body;
  // Kept as its hash only; the audit row holds neither.
  EXPECT_THAT(db_.value("SELECT password_hash FROM users WHERE name = 'olga'"),
              HasSubstr("$argon2id$"));
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log WHERE detail::text LIKE $1",
                      {"%" + password + "%"}),
            "0");
  EXPECT_EQ(db_.value("SELECT count(*) FROM sessions"), "0");
  EXPECT_EQ(db_.value("SELECT detail->>'sessionsEnded' FROM audit_log "
                      "WHERE action = 'user.password_reset' AND target_name = 'olga'"),
            "1");

  // Whoever had her old session or password is out; the one-time password
  // opens only the change.
  EXPECT_EQ(call("GET", "/api/v1/me", cookie(before)).status, 401);
  EXPECT_EQ(signIn("olga", "olga's long password").status, 401);
  std::string fresh = session("olga", password);
  auto blocked = call("GET", "/api/v1/me/tokens", cookie(fresh));
  EXPECT_EQ(blocked.status, 403) << blocked.body;
  EXPECT_EQ(bodyOf(blocked)["error"], "password_change_required");
  auto changed = call("POST", "/api/v1/me/password", cookie(fresh, true),
                      json{{"currentPassword", password}, {"newPassword", "a brand new secret of hers"}}
                          .dump());
  ASSERT_EQ(changed.status, 204) << changed.body;
  EXPECT_EQ(signIn("olga", "a brand new secret of hers").status, 201);
  EXPECT_EQ(post("/api/v1/users/nobody/password", bearer(admin.token)).status, 404);
}

// The directory (LDAP) and the provider (single sign-on) decide a user's
// password and role: an admin's change is 409 with the reason, and nothing
// changes. Disabling and enabling them is ours.
TEST_F(UserAdminTest, ADirectoryUsersPasswordAndRoleAreTheDirectorys) {
  auto admin = makeToken("root", Role::Admin, kNoPermission);
  db_.value("INSERT INTO users (name, password_hash, role, source) "
            "VALUES ('dora', '', 'operator', 'ldap')");
  db_.value("INSERT INTO users (name, password_hash, role, source, external_id) "
            "VALUES ('sso', '', 'viewer', 'oidc', 'https://idp|sub-1')");
  for (auto [name, words] : std::vector<std::pair<std::string, std::string>>{
           {"dora", "the directory"}, {"sso", "single sign-on"}}) {
    auto reset = post("/api/v1/users/" + name + "/password", bearer(admin.token));
    EXPECT_EQ(reset.status, 409) << reset.body;
    EXPECT_EQ(bodyOf(reset)["error"], "directory_user");
    EXPECT_THAT(bodyOf(reset)["message"].get<std::string>(), HasSubstr(words));
    EXPECT_FALSE(bodyOf(reset).contains("password"));
    auto role = setRole(name, bearer(admin.token), R"({"role": "admin"})");
    EXPECT_EQ(role.status, 409) << role.body;
    EXPECT_EQ(bodyOf(role)["error"], "directory_user");
  }
  EXPECT_EQ(row("dora"), "operator ");
  EXPECT_EQ(db_.value("SELECT password_hash FROM users WHERE name = 'dora'"), "");
  EXPECT_EQ(post("/api/v1/users/dora/disable", bearer(admin.token)).status, 200);
  EXPECT_EQ(post("/api/v1/users/dora/enable", bearer(admin.token)).status, 200);
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log WHERE action IN "
                      "('user.password_reset', 'user.role')"),
            "0");
}

// Payload rights are given only by someone who holds them (the users and
// tokens routes refuse it as 403 beyond_caller): a role change can't give
// them either, to another user or to the admin itself, and an admin can't
// reset the password of a user who holds more than the admin, which would
// let the admin sign in as them.
TEST_F(UserAdminTest, NoAdminGivesItselfOrAnyoneMoreThanItHolds) {
  makeUser("ada", Role::Admin, kNoPermission, "ada's long password");
  makeUser("pam", Role::Viewer, kPayloads, "pam's long password");
  makeUser("vic", Role::Viewer, kNoPermission, "vic's long password");
  std::string ada = session("ada", "ada's long password");
  auto ownToken = makeToken("ada-script", Role::Admin, kNoPermission, "ada");
  for (auto [who, name, body] : std::vector<std::tuple<Headers, std::string, std::string>>{
           {cookie(ada, true), "ada", R"({"role": "admin", "permissions": ["payloads"]})"},
           {bearer(ownToken.token), "ada", R"({"role": "admin", "permissions": ["payloads"]})"},
           {cookie(ada, true), "ada", R"({"role": "admin", "permissions": ["audit"]})"},
           {cookie(ada, true), "vic", R"({"role": "operator", "permissions": ["payloads"]})"},
           // pam holds payloads: her role isn't ada's to change, even down.
           {cookie(ada, true), "pam", R"({"role": "operator"})"},
           {cookie(ada, true), "pam", R"({"role": "viewer", "permissions": []})"}}) {
    auto r = setRole(name, who, body);
    EXPECT_EQ(r.status, 403) << name << " " << body << ": " << r.body;
    EXPECT_EQ(bodyOf(r)["error"], "beyond_caller") << r.body;
  }
  auto reset = post("/api/v1/users/pam/password", cookie(ada, true));
  EXPECT_EQ(reset.status, 403) << reset.body;
  EXPECT_EQ(bodyOf(reset)["error"], "beyond_caller");
  EXPECT_FALSE(bodyOf(reset).contains("password"));
  EXPECT_EQ(row("ada"), "admin ");
  EXPECT_EQ(row("pam"), "viewer payloads");
  EXPECT_EQ(row("vic"), "viewer ");
  auto me = call("GET", "/api/v1/me", cookie(ada));
  EXPECT_EQ(bodyOf(me)["permissions"], json::array());
  // A payloads read stays refused.
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log WHERE action IN "
                      "('user.role', 'user.password_reset')"),
            "0");

  // Within the admin's grant, the same change is made.
  auto promoted = setRole("vic", cookie(ada, true), R"({"role": "operator"})");
  ASSERT_EQ(promoted.status, 200) << promoted.body;
  EXPECT_EQ(row("vic"), "operator ");
  makeUser("pia", Role::Admin, kPayloads | kAudit, "pia's long password");
  std::string pia = session("pia", "pia's long password");
  ASSERT_EQ(setRole("vic", cookie(pia, true), R"({"role": "viewer", "permissions": ["payloads"]})")
                .status,
            200);
  EXPECT_EQ(row("vic"), "viewer payloads");
  EXPECT_EQ(post("/api/v1/users/pam/password", cookie(pia, true)).status, 200);
}

TEST_F(UserAdminTest, ARoleChangeTakesEffectAtTheUsersNextRequestWithoutEndingTheirSessions) {
  makeUser("ada", Role::Admin, kNoPermission, "ada's long password");
  makeUser("olga", Role::Viewer, kNoPermission, "olga's long password");
  std::string ada = session("ada", "ada's long password");
  std::string olga = session("olga", "olga's long password");
  auto script = makeToken("olga-script", Role::Admin, kNoPermission, "olga");
  EXPECT_EQ(call("GET", "/api/v1/users", cookie(olga)).status, 403);
  EXPECT_EQ(call("GET", "/api/v1/users", bearer(script.token)).status, 403);

  auto up = setRole("olga", cookie(ada, true), R"({"role": "admin"})");
  ASSERT_EQ(up.status, 200) << up.body;
  EXPECT_EQ(bodyOf(up)["user"]["role"], "admin");
  // The same session and token, not signed in again.
  EXPECT_EQ(call("GET", "/api/v1/users", cookie(olga)).status, 200);
  EXPECT_EQ(call("GET", "/api/v1/users", bearer(script.token)).status, 200);
  EXPECT_EQ(bodyOf(call("GET", "/api/v1/me", cookie(olga)))["role"], "admin");

  ASSERT_EQ(setRole("olga", cookie(ada, true), R"({"role": "viewer"})").status, 200);
  EXPECT_EQ(call("GET", "/api/v1/users", cookie(olga)).status, 403);
  EXPECT_EQ(call("GET", "/api/v1/users", bearer(script.token)).status, 403);
  EXPECT_EQ(db_.value("SELECT count(*) FROM sessions WHERE user_id = (SELECT id FROM users "
                      "WHERE name = 'olga')"),
            "1");
  auto audit = db_.column(
      "SELECT actor || ' ' || target_name || ' ' || (detail->>'from') || '>' || "
      "(detail->>'to') FROM audit_log WHERE action = 'user.role' ORDER BY id");
  EXPECT_EQ(audit, (std::vector<std::string>{"ada olga viewer>admin", "ada olga admin>viewer"}));

  // The body is checked first.
  for (auto body : {R"({})", R"({"role": "king"})", R"({"role": "viewer", "permissions": "all"})",
                    R"({"role": "viewer", "permissions": ["root"]})"}) {
    auto r = setRole("olga", cookie(ada, true), body);
    EXPECT_EQ(r.status, 400) << body << ": " << r.body;
  }
  EXPECT_EQ(setRole("nobody", cookie(ada, true), R"({"role": "viewer"})").status, 404);
  EXPECT_EQ(setRole("olga", cookie(olga, true), R"({"role": "admin"})").status, 403);
}

TEST_F(UserAdminTest, TheLastEnabledAdminIsNeitherDemotedNorDisabled) {
  makeUser("ada", Role::Admin, kNoPermission, "ada's long password");
  makeUser("bob", Role::Operator, kNoPermission, "bob's long password");
  // A disabled admin is no admin anyone can sign in as.
  makeUser("old", Role::Admin, kNoPermission, "old's long password");
  auto root = makeToken("root", Role::Admin, kNoPermission);
  ASSERT_EQ(post("/api/v1/users/old/disable", bearer(root.token)).status, 200);
  std::string ada = session("ada", "ada's long password");

  for (auto r : {setRole("ada", cookie(ada, true), R"({"role": "operator"})"),
                 post("/api/v1/users/ada/disable", cookie(ada, true)),
                 post("/api/v1/users/ada/disable", bearer(root.token))}) {
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_THAT(bodyOf(r)["message"].get<std::string>(), HasSubstr("last enabled admin"));
  }
  EXPECT_EQ(row("ada"), "admin ");
  EXPECT_EQ(call("GET", "/api/v1/users", cookie(ada)).status, 200);

  // With a second admin, either may step down; then the other is the last.
  ASSERT_EQ(setRole("bob", cookie(ada, true), R"({"role": "admin"})").status, 200);
  ASSERT_EQ(setRole("ada", cookie(ada, true), R"({"role": "operator"})").status, 200);
  EXPECT_EQ(call("GET", "/api/v1/users", cookie(ada)).status, 403);
  EXPECT_EQ(post("/api/v1/users/bob/disable", bearer(root.token)).status, 409);
  EXPECT_EQ(row("bob"), "admin ");
}

// Two admins demoting each other at once: the admins' rows are locked
// before either looks, so one wins and the other is refused.
TEST_F(UserAdminTest, TwoAdminsDemotingEachOtherAtOnceLeaveOneAdmin) {
  auto root = makeToken("root", Role::Admin, kNoPermission);
  for (int round = 0; round < 5; ++round) {
    std::string a = "a" + std::to_string(round), b = "b" + std::to_string(round);
    makeUser(a, Role::Admin, kNoPermission, "a long password of a's");
    makeUser(b, Role::Admin, kNoPermission, "a long password of b's");
    // Only these two are enabled admins this round.
    db_.value("UPDATE users SET disabled = true WHERE role = 'admin' AND name NOT IN ($1, $2)",
              {a, b});
    auto demote = [&](const std::string& who) {
      return std::async(std::launch::async, [this, who, token = root.token] {
        return call("PUT", "/api/v1/users/" + who + "/role", bearer(token),
                    R"({"role": "viewer"})")
            .status;
      });
    };
    auto first = demote(a), second = demote(b);
    std::vector<int> statuses{first.get(), second.get()};
    std::sort(statuses.begin(), statuses.end());
    EXPECT_EQ(statuses, (std::vector<int>{200, 409})) << "round " << round;
    EXPECT_EQ(db_.value("SELECT count(*) FROM users WHERE role = 'admin' AND NOT disabled"), "1");
  }
}

}  // namespace
}  // namespace ductus::api::test
