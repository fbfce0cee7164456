// Who calls, over real HTTP with the real authenticator, PostgreSQL and
// argon2id: tokens (revoking is immediate), password sign-in and its
// cookie, lockout, must_change_password, session expiry, and the audit
// rows each of those writes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <thread>
#include <tuple>

#include "api/auth/credentials.h"
#include "api/auth/sign_in_guard.h"
#include "tests/api/auth_fixture.h"

namespace ductus::api::test {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

class AuthTest : public AuthFixture {
 protected:
  // The audit rows so far: "action outcome actor via", oldest first.
  std::vector<std::string> auditRows() {
    return db_.column(
        "SELECT action || ' ' || outcome || ' ' || actor || ' ' || via FROM audit_log ORDER BY id");
  }
  // Waits until the session's last_seen_at is `at` or later (its touch is
  // written after the answer, on a connection of its own).
  void waitSeen(const std::string& sessionId) {
    auto want = pgTime(clock_() - 5s);
    for (int i = 0; i < 500; ++i) {
      if (db_.value("SELECT last_seen_at >= $2::timestamptz FROM sessions WHERE id = $1",
                    {sessionId, want}) == "t")
        return;
      std::this_thread::sleep_for(10ms);
    }
    ADD_FAILURE() << "session " << sessionId << " was not touched";
  }
};

TEST_F(AuthTest, ATokenWorksUntilRevokedAndTheNextCallIsRefused) {
  auto admin = makeToken("root", Role::Admin, kNoPermission);
  auto me = call("GET", "/api/v1/me", bearer(admin.token));
  ASSERT_EQ(me.status, 200) << me.body;
  EXPECT_EQ(bodyOf(me)["name"], "root");
  EXPECT_EQ(bodyOf(me)["role"], "admin");

  auto created = call("POST", "/api/v1/tokens", bearer(admin.token),
                      R"({"name": "ci", "role": "viewer"})");
  ASSERT_EQ(created.status, 201) << created.body;
  std::string token = bodyOf(created)["token"];
  EXPECT_TRUE(isTokenText(token)) << token;
  std::string id = std::to_string(bodyOf(created)["id"].get<int64_t>());
  // Only its hash is kept.
  EXPECT_EQ(db_.value("SELECT count(*) FROM api_tokens WHERE token_hash = $1", {token}), "0");
  EXPECT_EQ(db_.value("SELECT token_hash FROM api_tokens WHERE id = $1", {id}),
            secretHash(token));

  auto asCi = call("GET", "/api/v1/me", bearer(token));
  ASSERT_EQ(asCi.status, 200) << asCi.body;
  EXPECT_EQ(bodyOf(asCi)["role"], "viewer");
  // A viewer may not manage tokens.
  EXPECT_EQ(call("GET", "/api/v1/tokens", bearer(token)).status, 403);

  auto revoked = call("DELETE", "/api/v1/tokens/" + id, bearer(admin.token));
  ASSERT_EQ(revoked.status, 200) << revoked.body;
  EXPECT_FALSE(bodyOf(revoked)["revokedAt"].is_null());
  auto after = call("GET", "/api/v1/me", bearer(token));
  EXPECT_EQ(after.status, 401) << after.body;
  EXPECT_EQ(bodyOf(after)["error"], "unauthenticated");
  // Revoking twice finds nothing live.
  EXPECT_EQ(call("DELETE", "/api/v1/tokens/" + id, bearer(admin.token)).status, 404);
  // A token that was never made, and one that is not a Ductus token.
  EXPECT_EQ(call("GET", "/api/v1/me", bearer("dux_" + std::string(64, 'a'))).status, 401);
  EXPECT_EQ(call("GET", "/api/v1/me", bearer("nope")).status, 401);

  EXPECT_THAT(auditRows(), ::testing::ElementsAre("token.create ok tester cli",
                                                  "token.create ok root token",
                                                  "token.revoke ok root token"));
  EXPECT_EQ(db_.value("SELECT target_name FROM audit_log WHERE action = 'token.revoke'"), "ci");
}

TEST_F(AuthTest, ATokenOfAUserActsAsThatUserAtMostAndStopsWhenTheUserIsDisabled) {
  makeUser("vera", Role::Viewer, kPayloads, "vera's long password");
  auto admin = makeToken("root", Role::Admin, kNoPermission);
  auto t = makeToken("vera-script", Role::Admin, kPayloads | kAudit, "vera");
  auto me = call("GET", "/api/v1/me", bearer(t.token));
  ASSERT_EQ(me.status, 200) << me.body;
  EXPECT_EQ(bodyOf(me)["name"], "vera");
  EXPECT_EQ(bodyOf(me)["role"], "viewer");
  EXPECT_EQ(bodyOf(me)["permissions"], json::array({"payloads"}));
  EXPECT_EQ(call("GET", "/api/v1/users", bearer(t.token)).status, 403);
  EXPECT_EQ(call("GET", "/api/v1/audit", bearer(t.token)).status, 403);

  auto disabled = call("POST", "/api/v1/users/vera/disable", bearer(admin.token));
  ASSERT_EQ(disabled.status, 200) << disabled.body;
  EXPECT_EQ(call("GET", "/api/v1/me", bearer(t.token)).status, 401);
  EXPECT_EQ(call("POST", "/api/v1/users/nobody/disable", bearer(admin.token)).status, 404);
}

TEST_F(AuthTest, PasswordSignInSetsTheSessionCookieAndSignOutEndsIt) {
  makeUser("alice", Role::Operator, kNoPermission, "correct horse battery");
  auto r = signIn("alice", "correct horse battery");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(bodyOf(r)["user"]["role"], "operator");
  std::string cookieLine = r.header("set-cookie");
  EXPECT_TRUE(std::regex_search(cookieLine, std::regex("^ductus_session=[0-9a-f]{64}; ")))
      << cookieLine;
  EXPECT_THAT(cookieLine, HasSubstr("; HttpOnly"));
  EXPECT_THAT(cookieLine, HasSubstr("; SameSite=Strict"));
  EXPECT_THAT(cookieLine, HasSubstr("; Path=/api"));
  EXPECT_THAT(cookieLine, HasSubstr("; Max-Age=604800"));
  // The server listens on loopback: no Secure (browsers would drop it on http).
  EXPECT_THAT(cookieLine, Not(HasSubstr("Secure")));
  EXPECT_THAT(sessionCookieHeader("x", true, AuthPolicy{}), HasSubstr("; Secure"));
  std::string session = sessionOf(r);
  EXPECT_EQ(db_.value("SELECT count(*) FROM sessions WHERE secret_hash = $1",
                      {secretHash(session)}),
            "1");

  auto me = call("GET", "/api/v1/me", cookie(session));
  ASSERT_EQ(me.status, 200) << me.body;
  EXPECT_EQ(bodyOf(me)["name"], "alice");
  EXPECT_EQ(bodyOf(me)["via"], "session");

  // Without X-Ductus: 1 a session changes nothing (the router's rule).
  EXPECT_EQ(call("DELETE", "/api/v1/sessions/current", cookie(session)).status, 403);
  auto out = call("DELETE", "/api/v1/sessions/current", cookie(session, true));
  ASSERT_EQ(out.status, 204) << out.body;
  EXPECT_THAT(out.header("set-cookie"), HasSubstr("ductus_session=; "));
  EXPECT_THAT(out.header("set-cookie"), HasSubstr("Max-Age=0"));
  EXPECT_EQ(call("GET", "/api/v1/me", cookie(session)).status, 401);

  // Wrong password, unknown user: the same answer.
  auto wrong = signIn("alice", "not the password");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(bodyOf(wrong)["error"], "invalid_credentials");
  auto unknown = signIn("mallory", "whatever it is");
  EXPECT_EQ(unknown.status, 401);
  EXPECT_EQ(bodyOf(unknown)["error"], "invalid_credentials");

  EXPECT_THAT(auditRows(), ::testing::ElementsAre(
                               "user.create ok tester cli", "session.create ok alice session",
                               "session.delete ok alice session",
                               "session.create denied alice session",
                               "session.create denied mallory session"));
  EXPECT_EQ(db_.value("SELECT detail->>'reason' FROM audit_log WHERE actor = 'mallory'"),
            "unknown user");
  EXPECT_THAT(db_.value("SELECT address FROM audit_log WHERE actor = 'mallory'"),
              HasSubstr("127.0.0.1:"));
}

TEST_F(AuthTest, FiveWrongPasswordsLockTheUserForFifteenMinutes) {
  makeUser("bob", Role::Viewer, kNoPermission, "bob's real password");
  auto t = makeToken("bob-script", Role::Viewer, kNoPermission, "bob");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(signIn("bob", "a wrong password").status, 401) << i;
  // Locked: even the right password is refused, and bob's token stops.
  auto locked = signIn("bob", "bob's real password");
  EXPECT_EQ(locked.status, 429) << locked.body;
  EXPECT_EQ(bodyOf(locked)["error"], "locked");
  EXPECT_FALSE(locked.header("retry-after").empty());
  EXPECT_EQ(call("GET", "/api/v1/me", bearer(t.token)).status, 401);
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log WHERE action = 'session.create' AND "
                      "outcome = 'denied' AND detail->>'reason' = 'wrong password'"),
            "5");
  EXPECT_EQ(db_.value("SELECT detail->>'locked' FROM audit_log WHERE "
                      "detail->>'reason' = 'wrong password' ORDER BY id DESC LIMIT 1"),
            "true");
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log WHERE detail->>'reason' = 'locked'"), "1");

  advance(14min);
  EXPECT_EQ(signIn("bob", "bob's real password").status, 429);
  advance(2min);
  auto in = signIn("bob", "bob's real password");
  EXPECT_EQ(in.status, 201) << in.body;
  EXPECT_EQ(call("GET", "/api/v1/me", bearer(t.token)).status, 200);
  EXPECT_EQ(db_.value("SELECT failed_attempts FROM users WHERE name = 'bob'"), "0");
}

TEST_F(AuthTest, ASessionEndsAfterTwelveIdleHoursOrSevenDays) {
  makeUser("carol", Role::Viewer, kNoPermission, "carol's long password");
  auto r = signIn("carol", "carol's long password");
  ASSERT_EQ(r.status, 201);
  std::string session = sessionOf(r);
  std::string id = db_.value("SELECT id FROM sessions");

  // Used every 11 hours, it lives on...
  for (int i = 0; i < 3; ++i) {
    advance(11h);
    ASSERT_EQ(call("GET", "/api/v1/me", cookie(session)).status, 200) << i;
    waitSeen(id);
  }
  // ...until 12 idle hours pass.
  advance(12h + 1min);
  EXPECT_EQ(call("GET", "/api/v1/me", cookie(session)).status, 401);

  // And never past 7 days, however busy.
  auto again = signIn("carol", "carol's long password");
  ASSERT_EQ(again.status, 201);
  std::string second = sessionOf(again);
  std::string secondId =
      db_.value("SELECT id FROM sessions WHERE secret_hash = $1", {secretHash(second)});
  for (int h = 10; h < 7 * 24; h += 10) {
    advance(10h);
    ASSERT_EQ(call("GET", "/api/v1/me", cookie(second)).status, 200) << h;
    waitSeen(secondId);
  }
  advance(10h);  // 170 h
  EXPECT_EQ(call("GET", "/api/v1/me", cookie(second)).status, 401);
}

TEST_F(AuthTest, AUserWhoMustChangeTheirPasswordMayDoNothingElseFirst) {
  makeUser("dave", Role::Operator, kAudit, "dave's first password", true);
  auto r = signIn("dave", "dave's first password");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(bodyOf(r)["user"]["mustChangePassword"], true);
  std::string session = sessionOf(r);
  auto me = call("GET", "/api/v1/me", cookie(session));
  ASSERT_EQ(me.status, 200);
  EXPECT_EQ(bodyOf(me)["mustChangePassword"], true);
  auto before = call("GET", "/api/v1/me/activity", cookie(session));
  EXPECT_EQ(before.status, 403);
  EXPECT_EQ(bodyOf(before)["error"], "password_change_required") << before.body;

  auto change = [&](const std::string& current, const std::string& next) {
    return call("POST", "/api/v1/me/password", cookie(session, true),
                json{{"currentPassword", current}, {"newPassword", next}}.dump());
  };
  EXPECT_EQ(change("dave's first password", "short").status, 400);
  EXPECT_EQ(change("not dave's password", "my second password").status, 403);
  ASSERT_EQ(change("dave's first password", "my second password").status, 204);
  auto activity = call("GET", "/api/v1/me/activity", cookie(session));
  ASSERT_EQ(activity.status, 200) << activity.body;
  auto items = bodyOf(activity)["items"];
  ASSERT_GE(items.size(), 3u);
  EXPECT_EQ(items[0]["action"], "user.password");
  EXPECT_EQ(items[0]["outcome"], "ok");
  EXPECT_EQ(items[1]["outcome"], "denied");
  EXPECT_EQ(signIn("dave", "dave's first password").status, 401);
  EXPECT_EQ(signIn("dave", "my second password").status, 201);
}

// The console's theme is kept with the user: system until they choose,
// each member checked, a PUT of one setting keeps the others, audited.
TEST_F(AuthTest, AUsersConsoleSettingsAreKeptCheckedAndAudited) {
  makeUser("erin", Role::Viewer, kNoPermission, "erin's long password");
  std::string session = sessionOf(signIn("erin", "erin's long password"));
  auto first = call("GET", "/api/v1/me/settings", cookie(session));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(bodyOf(first), json({{"theme", "system"}}));

  auto put = [&](const std::string& body, bool xDuctus = true) {
    return call("PUT", "/api/v1/me/settings", cookie(session, xDuctus), body);
  };
  EXPECT_EQ(put(R"({"theme": "dark"})", false).status, 403);  // a session needs X-Ductus
  auto dark = put(R"({"theme": "dark"})");
  ASSERT_EQ(dark.status, 200) << dark.body;
  EXPECT_EQ(bodyOf(dark)["theme"], "dark");
  EXPECT_EQ(bodyOf(call("GET", "/api/v1/me/settings", cookie(session)))["theme"], "dark");
  EXPECT_EQ(put("{}").status, 200);  // nothing named, nothing changed
  EXPECT_EQ(bodyOf(call("GET", "/api/v1/me/settings", cookie(session)))["theme"], "dark");

  auto bad = put(R"({"theme": "neon"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bodyOf(bad)["message"].get<std::string>(), HasSubstr("\"light\""));
  auto unknown = put(R"({"theme": "light", "fontSize": 3})");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_THAT(bodyOf(unknown)["message"].get<std::string>(), HasSubstr("fontSize"));
  EXPECT_EQ(put("[1]").status, 400);
  EXPECT_EQ(bodyOf(call("GET", "/api/v1/me/settings", cookie(session)))["theme"], "dark");
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log WHERE action = 'user.settings' AND "
                      "actor = 'erin' AND detail->'settings'->>'theme' = 'dark'"),
            "1");

  // A token of no user has nowhere to keep them.
  auto ci = makeToken("ci", Role::Viewer, kNoPermission);
  auto none = call("GET", "/api/v1/me/settings", bearer(ci.token));
  EXPECT_EQ(none.status, 404);
  EXPECT_EQ(bodyOf(none)["error"], "no_user");
  EXPECT_EQ(call("PUT", "/api/v1/me/settings", bearer(ci.token), R"({"theme":"dark"})").status,
            404);
}

// A user who isn't an admin manages tokens of their own: made with no more
// than the user may do, listed and revoked only by them.
TEST_F(AuthTest, AUserMakesListsAndRevokesTokensOfTheirOwnAndNoOneElses) {
  makeUser("olga", Role::Operator, kPayloads, "olga's long password");
  makeUser("piet", Role::Operator, kNoPermission, "piet's long password");
  auto admin = makeToken("root", Role::Admin, kNoPermission);
  auto theirs = call("POST", "/api/v1/tokens", bearer(admin.token),
                     R"({"name": "piet-ci", "role": "viewer", "user": "piet"})");
  ASSERT_EQ(theirs.status, 201) << theirs.body;
  std::string session = sessionOf(signIn("olga", "olga's long password"));
  auto post = [&](const std::string& body) {
    return call("POST", "/api/v1/me/tokens", cookie(session, true), body);
  };

  auto none = call("GET", "/api/v1/me/tokens", cookie(session));
  ASSERT_EQ(none.status, 200) << none.body;
  EXPECT_TRUE(bodyOf(none)["items"].empty()) << none.body;
  EXPECT_EQ(post(R"({"name": "olga-admin", "role": "admin"})").status, 403);
  auto beyond = post(R"({"name": "olga-audit", "role": "viewer", "permissions": ["audit"]})");
  EXPECT_EQ(beyond.status, 403);
  EXPECT_EQ(bodyOf(beyond)["error"], "beyond_caller") << beyond.body;
  EXPECT_EQ(post(R"({"name": "x", "role": "viewer", "user": "piet"})").status, 400);

  auto made = post(R"({"name": "olga-laptop", "role": "operator", "permissions": ["payloads"]})");
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(bodyOf(made)["user"], "olga");
  std::string token = bodyOf(made)["token"];
  std::string id = std::to_string(bodyOf(made)["id"].get<int64_t>());
  auto me = call("GET", "/api/v1/me", bearer(token));
  ASSERT_EQ(me.status, 200) << me.body;
  EXPECT_EQ(bodyOf(me)["name"], "olga");
  // Made with the token itself, a token of the same user is hers too.
  auto listed = call("GET", "/api/v1/me/tokens", bearer(token));
  ASSERT_EQ(listed.status, 200) << listed.body;
  ASSERT_EQ(bodyOf(listed)["items"].size(), 1u) << listed.body;
  EXPECT_EQ(bodyOf(listed)["items"][0]["name"], "olga-laptop");

  // Piet's token is not hers to revoke, by id or by name.
  std::string piets = std::to_string(bodyOf(theirs)["id"].get<int64_t>());
  EXPECT_EQ(call("DELETE", "/api/v1/me/tokens/" + piets, cookie(session, true)).status, 404);
  EXPECT_EQ(call("DELETE", "/api/v1/me/tokens/piet-ci", cookie(session, true)).status, 404);
  EXPECT_EQ(db_.value("SELECT count(*) FROM api_tokens WHERE name = 'piet-ci' AND "
                      "revoked_at IS NULL"),
            "1");
  auto revoked = call("DELETE", "/api/v1/me/tokens/" + id, cookie(session, true));
  ASSERT_EQ(revoked.status, 200) << revoked.body;
  EXPECT_EQ(call("GET", "/api/v1/me", bearer(token)).status, 401);
  EXPECT_EQ(db_.value("SELECT count(*) FROM audit_log WHERE actor = 'olga' AND "
                      "action IN ('token.create', 'token.revoke') AND outcome = 'ok'"),
            "2");

  auto ci = makeToken("ci", Role::Operator, kNoPermission);
  EXPECT_EQ(call("GET", "/api/v1/me/tokens", bearer(ci.token)).status, 404);
  EXPECT_EQ(call("POST", "/api/v1/me/tokens", bearer(ci.token),
                 R"({"name": "y", "role": "viewer"})")
                .status,
            404);
}

TEST_F(AuthTest, AdminsCreateUsersWithAGeneratedPasswordShownOnce) {
  auto admin = makeToken("root", Role::Admin, kPayloads);
  auto r = call("POST", "/api/v1/users", bearer(admin.token),
                R"({"name": "erin", "role": "viewer", "permissions": ["payloads"]})");
  ASSERT_EQ(r.status, 201) << r.body;
  std::string password = bodyOf(r)["password"];
  EXPECT_EQ(password.size(), 24u);
  EXPECT_EQ(bodyOf(r)["user"]["mustChangePassword"], true);
  EXPECT_THAT(db_.value("SELECT password_hash FROM users WHERE name = 'erin'"),
              HasSubstr("$argon2id$"));
  EXPECT_EQ(call("POST", "/api/v1/users", bearer(admin.token),
                 R"({"name": "erin", "role": "viewer"})").status,
            409);
  EXPECT_EQ(call("POST", "/api/v1/users", bearer(admin.token),
                 R"({"name": "frank", "role": "king"})").status,
            400);
  EXPECT_EQ(call("POST", "/api/v1/users", bearer(admin.token),
                 R"({"name": "frank", "role": "viewer", "permissions": ["all"]})").status,
            400);
  auto list = call("GET", "/api/v1/users", bearer(admin.token));
  ASSERT_EQ(list.status, 200);
  ASSERT_EQ(bodyOf(list)["items"].size(), 1u);
  EXPECT_EQ(bodyOf(list)["items"][0]["permissions"], json::array({"payloads"}));
  EXPECT_EQ(signIn("erin", password).status, 201);
}

// What an answer must never carry: PostgreSQL's own words.
void expectNoDatabaseText(const ductus::test::HttpReply& r, const std::string& what) {
  for (const char* mark : {"ERROR:", "CONTEXT", "HINT", "portal", "SELECT", "INSERT", "UPDATE",
                           "timestamptz", "SQLSTATE", "$1"})
    EXPECT_THAT(r.body, Not(HasSubstr(mark))) << what;
}

// An admin makes no user or token with more than the admin holds, as
// /me/tokens already refused: a role above theirs or a permission they
// lack is 403 beyond_caller, and nothing is made.
TEST_F(AuthTest, NoAdminGrantsARoleOrPermissionItDoesNotHold) {
  auto admin = makeToken("root", Role::Admin, kNoPermission);
  for (auto [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/api/v1/tokens", R"({"name": "reader", "role": "viewer", "permissions": ["payloads"]})"},
           {"/api/v1/tokens", R"({"name": "auditor", "role": "admin", "permissions": ["audit"]})"},
           {"/api/v1/users", R"({"name": "mallory", "role": "viewer", "permissions": ["payloads", "audit"]})"},
           {"/api/v1/users", R"({"name": "mallory", "role": "admin", "permissions": ["audit"],
                                 "password": "a long and unusual one"})"}}) {
    auto r = call("POST", path, bearer(admin.token), body);
    EXPECT_EQ(r.status, 403) << path << " " << body << ": " << r.body;
    EXPECT_EQ(bodyOf(r)["error"], "beyond_caller") << r.body;
  }
  EXPECT_EQ(db_.value("SELECT count(*) FROM api_tokens"), "1");
  EXPECT_EQ(db_.value("SELECT count(*) FROM users"), "0");

  // An operator's own token can't be made an admin's by an admin of less.
  auto payloadAdmin = makeToken("root-payloads", Role::Admin, kPayloads);
  auto ok = call("POST", "/api/v1/tokens", bearer(payloadAdmin.token),
                 R"({"name": "reader", "role": "operator", "permissions": ["payloads"]})");
  EXPECT_EQ(ok.status, 201) << ok.body;
  auto user = call("POST", "/api/v1/users", bearer(payloadAdmin.token),
                   R"({"name": "vic", "role": "admin", "permissions": ["payloads"]})");
  EXPECT_EQ(user.status, 201) << user.body;
  auto more = call("POST", "/api/v1/users", bearer(payloadAdmin.token),
                   R"({"name": "wim", "role": "viewer", "permissions": ["audit"]})");
  EXPECT_EQ(more.status, 403) << more.body;
}

// A forced change must change: the same password again is 400, and the
// user is still held to changing it.
TEST_F(AuthTest, APasswordChangeToTheSamePasswordIsRefused) {
  makeUser("gus", Role::Viewer, kNoPermission, "the first password of his", true);
  std::string session = sessionOf(signIn("gus", "the first password of his"));
  auto r = call("POST", "/api/v1/me/password", cookie(session, true),
                json{{"currentPassword", "the first password of his"},
                     {"newPassword", "the first password of his"}}
                    .dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(bodyOf(r)["error"], "same_password");
  EXPECT_EQ(db_.value("SELECT must_change_password FROM users WHERE name = 'gus'"), "t");
  EXPECT_EQ(call("GET", "/api/v1/me/activity", cookie(session)).status, 403);
}

// Wherever a password is set: not the name nor holding it, not one
// character (or spaces) over and over, not on the list of the most used;
// the 400 says which rule.
TEST_F(AuthTest, APasswordIsCheckedAgainstTheNameRepeatsAndTheMostUsed) {
  auto admin = makeToken("root", Role::Admin, kNoPermission);
  auto create = [&](const std::string& name, const std::string& password) {
    return call("POST", "/api/v1/users", bearer(admin.token),
                json{{"name", name}, {"role", "viewer"}, {"password", password}}.dump());
  };
  for (auto [name, password, rule] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"harriet-long", "harriet-long", "name"},
           {"harriet", "I am HARRIET, 2026!", "name"},
           {"harriet", "aaaaaaaaaaaa", "repeated"},
           {"harriet", "  zzzzzzzzzzzzzz ", "repeated"},
           {"harriet", "            ", "spaces"},
           {"harriet", "1q2w3e4r5t6y", "most used"},
           {"harriet", "QWERTYQWERTY", "most used"},
           {"harriet", "short", "at least 12"}}) {
    auto r = create(name, password);
    EXPECT_EQ(r.status, 400) << password << ": " << r.body;
    EXPECT_EQ(bodyOf(r)["error"], "weak_password") << r.body;
    EXPECT_THAT(bodyOf(r)["message"].get<std::string>(), HasSubstr(rule)) << password;
  }
  EXPECT_EQ(db_.value("SELECT count(*) FROM users"), "0");
  EXPECT_EQ(create("harriet", "violet tram at noon").status, 201);

  // The same rules for a change of one's own.
  std::string session = sessionOf(signIn("harriet", "violet tram at noon"));
  auto change = [&](const std::string& next) {
    return call("POST", "/api/v1/me/password", cookie(session, true),
                json{{"currentPassword", "violet tram at noon"}, {"newPassword", next}}.dump());
  };
  for (std::string weak : {"harriet's new one", "xxxxxxxxxxxxxxx", "qazwsxedcrfv"}) {
    auto r = change(weak);
    EXPECT_EQ(r.status, 400) << weak << ": " << r.body;
    EXPECT_EQ(bodyOf(r)["error"], "weak_password") << r.body;
  }
  EXPECT_EQ(change("amber lamps by the river").status, 204);
}

// Five failures lock a name that is no user's as they lock a user's: the
// sixth try answers 429 locked alike, so the lockout tells no one which
// names exist.
TEST_F(AuthTest, TheLockoutAnswersAlikeForNamesThatAreNoUsers) {
  makeUser("ines", Role::Viewer, kNoPermission, "ines's real password");
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(signIn("ines", "a wrong password").status, 401) << i;
    EXPECT_EQ(signIn("nobody-here", "a wrong password").status, 401) << i;
  }
  auto real = signIn("ines", "a wrong password");
  auto unknown = signIn("nobody-here", "a wrong password");
  EXPECT_EQ(real.status, 429) << real.body;
  EXPECT_EQ(unknown.status, 429) << unknown.body;
  EXPECT_EQ(bodyOf(unknown)["error"], bodyOf(real)["error"]);
  EXPECT_EQ(bodyOf(unknown)["message"], bodyOf(real)["message"]);
  EXPECT_EQ(unknown.header("retry-after"), real.header("retry-after"));
  advance(16min);
  EXPECT_EQ(signIn("nobody-here", "a wrong password").status, 401);
}

TEST(SignInGuard, KeepsAtMostItsBoundOfNamesAndAShareOfSignInsPerAddress) {
  SignInGuard g;
  AuthPolicy p;
  auto now = std::chrono::system_clock::now();
  for (size_t i = 0; i < SignInGuard::kMaxNames + 50; ++i)
    g.fail("name" + std::to_string(i), now + std::chrono::milliseconds(i), p);
  EXPECT_EQ(g.namesKept(), SignInGuard::kMaxNames);
  EXPECT_EQ(SignInGuard::addressOf("10.0.0.1:5431"), "10.0.0.1");
  EXPECT_EQ(SignInGuard::addressOf("[::1]:5431"), "::1");
  for (size_t i = 0; i < p.maxSignInsPerAddress; ++i)
    EXPECT_TRUE(g.enter("10.0.0.1:" + std::to_string(1000 + i), p));
  EXPECT_FALSE(g.enter("10.0.0.1:2000", p));
  EXPECT_TRUE(g.enter("10.0.0.2:2000", p));
  g.leave("10.0.0.1:1000");
  EXPECT_TRUE(g.enter("10.0.0.1:2001", p));
}

// Many sign-ins at once from one address: past its share (4) the rest are
// told 429 with Retry-After at once, never 503, and the hasher's queue
// stays open to every other address.
TEST_F(AuthTest, OneAddressGetsItsShareOfSignInsAndNoMore) {
  constexpr int kAtOnce = 24;
  std::vector<ductus::test::HttpReply> replies(kAtOnce);
  std::vector<std::thread> threads;
  for (int i = 0; i < kAtOnce; ++i)
    threads.emplace_back([&, i] { replies[i] = signIn("guess" + std::to_string(i), "a guess"); });
  for (auto& t : threads) t.join();
  int throttled = 0;
  for (auto& r : replies) {
    EXPECT_NE(r.status, 503) << r.body;
    if (r.status == 429) {
      ++throttled;
      EXPECT_EQ(bodyOf(r)["error"], "too_many_sign_ins") << r.body;
      EXPECT_EQ(r.header("retry-after"), "1");
    } else {
      EXPECT_EQ(r.status, 401) << r.body;
    }
  }
  EXPECT_GE(throttled, 1);
  // Once answered, the address signs in again.
  EXPECT_EQ(signIn("guess0", "a guess").status, 401);
}

// Times are read by the engine before any reaches SQL: a bad one is 400 in
// the engine's words, never PostgreSQL's.
TEST_F(AuthTest, ABadTimeInAQueryIsRefusedInTheEnginesWords) {
  auto auditor = makeToken("auditor", Role::Viewer, kAudit);
  makeUser("jan", Role::Viewer, kNoPermission, "jan's long password");
  std::string session = sessionOf(signIn("jan", "jan's long password"));
  // Each named in the answer (`since=yesterday` was once ignored with a
  // 200, as if no filter had been asked for).
  for (auto [path, headers, name] : std::vector<std::tuple<std::string, Headers, std::string>>{
           {"/api/v1/audit?since=yesterday", bearer(auditor.token), "since"},
           {"/api/v1/audit?since=x", bearer(auditor.token), "since"},
           {"/api/v1/audit?until=2026-99-99", bearer(auditor.token), "until"},
           {"/api/v1/audit?until=yesterday", bearer(auditor.token), "until"},
           {"/api/v1/audit?since=0000-01-01T00:00:00Z", bearer(auditor.token), "since"},
           {"/api/v1/audit?format=ndjson&until=1969-12-31T23:59:59Z", bearer(auditor.token),
            "until"},
           {"/api/v1/audit?format=ndjson&since=yesterday", bearer(auditor.token), "since"},
           {"/api/v1/me/activity?since=x", cookie(session), "since"},
           {"/api/v1/me/activity?until=10000-01-01T00:00:00Z", cookie(session), "until"}}) {
    auto r = call("GET", path, headers);
    EXPECT_EQ(r.status, 400) << path << ": " << r.body;
    EXPECT_EQ(bodyOf(r)["error"], "invalid") << r.body;
    EXPECT_THAT(bodyOf(r)["message"].get<std::string>(), HasSubstr("RFC 3339")) << path;
    EXPECT_THAT(bodyOf(r)["message"].get<std::string>(), HasSubstr("`" + name + "`")) << path;
    expectNoDatabaseText(r, path);
  }
  auto fine = call("GET", "/api/v1/audit?since=2026-01-01T00:00:00Z&until=9999-12-31T23:59:59Z",
                   bearer(auditor.token));
  EXPECT_EQ(fine.status, 200) << fine.body;
}

// A NUL in any text of a body is refused before it reaches SQL.
TEST_F(AuthTest, ANulInABodysTextIsRefusedInTheEnginesWords) {
  makeUser("kim", Role::Viewer, kNoPermission, "kim's long password");
  auto r = call("POST", "/api/v1/sessions", {},
                json{{"name", std::string("kim\0x", 5)}, {"password", "kim's long password"}}
                    .dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(bodyOf(r)["message"].get<std::string>(), HasSubstr("NUL")) << r.body;
  expectNoDatabaseText(r, "sign-in");
  std::string session = sessionOf(signIn("kim", "kim's long password"));
  r = call("PUT", "/api/v1/me/settings", cookie(session, true),
           json{{std::string("the\0me", 6), "dark"}}.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  expectNoDatabaseText(r, "settings");
}

// What the database says when something unforeseen fails stays in the
// log: the caller gets 500 and a request id to quote, which the log names
// with the real cause.
TEST_F(AuthTest, AnUnexpectedDatabaseErrorIs500WithARequestIdAndNoDatabaseText) {
  makeUser("lou", Role::Viewer, kNoPermission, "lou's long password");
  std::string session = sessionOf(signIn("lou", "lou's long password"));
  db_.value("ALTER TABLE users RENAME COLUMN settings TO settings_moved");
  auto r = call("GET", "/api/v1/me/settings", cookie(session));
  EXPECT_EQ(r.status, 500) << r.body;
  auto b = bodyOf(r);
  EXPECT_EQ(b["error"], "internal") << r.body;
  ASSERT_TRUE(b["requestId"].is_string()) << r.body;
  std::string id = b["requestId"];
  EXPECT_EQ(id.size(), 16u);
  EXPECT_THAT(b["message"].get<std::string>(), HasSubstr(id));
  EXPECT_EQ(r.header("x-request-id"), id);
  expectNoDatabaseText(r, "settings");
  EXPECT_THAT(r.body, Not(HasSubstr("settings_moved")));
  EXPECT_THAT(r.body, Not(HasSubstr("column")));
}

// Every answer says its type is the one it names: the router's, a
// handler's, an error's.
TEST_F(AuthTest, EveryAnswerCarriesNosniff) {
  auto t = makeToken("viewer", Role::Viewer, kNoPermission);
  for (auto [method, path, headers, status] :
       std::vector<std::tuple<std::string, std::string, Headers, int>>{
           {"GET", "/api/v1/no-such-thing", {}, 404},
           {"GET", "/api/v1/me", {}, 401},
           {"GET", "/api/v1/me", bearer(t.token), 200},
           {"PUT", "/api/v1/me", bearer(t.token), 405},
           {"GET", "/api/v1/users", bearer(t.token), 403},
           {"GET", "/api", {}, 404}}) {
    auto r = call(method, path, headers);
    EXPECT_EQ(r.status, status) << method << " " << path << ": " << r.body;
    EXPECT_EQ(r.header("x-content-type-options"), "nosniff") << method << " " << path;
  }
}

TEST(PasswordHasherLimits, PastTheQueueARequestIsRefusedAsBusy) {
  ductus::test::LoopThread loop;
  std::unique_ptr<PasswordHasher> hasher;
  std::atomic<int> ok{0}, busy{0}, answered{0};
  loop.run([&] {
    hasher = std::make_unique<PasswordHasher>(loop.loop(), HashLimits{1, 1});
    for (int i = 0; i < 4; ++i)
      hasher->hash("a password", [&](Result<std::string> r) {
        if (r) ++ok;
        else if (r.error().kind == ErrorKind::Busy)
          ++busy;
        ++answered;
      });
    // One runs, one waits, two are refused at once.
    EXPECT_EQ(hasher->running(), 1u);
    EXPECT_EQ(hasher->waiting(), 1u);
  });
  for (int i = 0; i < 1000 && answered < 4; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(ok, 2);
  EXPECT_EQ(busy, 2);
  loop.run([&] { hasher.reset(); });
}

TEST(PasswordHashing, Argon2idVerifiesTheRightPasswordOnly) {
  auto h = hashPasswordNow("the password");
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_THAT(*h, HasSubstr("$argon2id$v=19$m=19456,t=2,p=1$"));
  EXPECT_TRUE(*verifyPasswordNow(*h, "the password"));
  EXPECT_FALSE(*verifyPasswordNow(*h, "the Password"));
  EXPECT_FALSE(verifyPasswordNow("plain", "plain").ok());
  EXPECT_NE(*hashPasswordNow("the password"), *h);  // salted
}

}  // namespace
}  // namespace ductus::api::test
