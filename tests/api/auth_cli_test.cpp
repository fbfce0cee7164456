// `ductus user ...` and `ductus token ...`, the real binary against a
// TestDatabase it migrates itself: what they print, what they store, the
// audit rows they write (the OS user, via cli), and that a token made on
// the command line is one the authenticator accepts (auth_test checks
// that over HTTP; here the stored hash is compared).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <regex>
#include <string>
#include <vector>

#include "api/auth/credentials.h"
#include "tests/support/exit_status.h"
#include "tests/support/test_database.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

using ::testing::HasSubstr;

struct Run {
  int exit = -1;
  std::string out;  // stdout
  std::string all;  // stdout then stderr
};

// `ductus ARGS...` with `input` on stdin (none: /dev/null), under timeout(1).
Run ductus(const std::vector<std::string>& args, const std::string& input = {}) {
  std::string quoted;
  for (auto& a : args) quoted += " '" + a + "'";
  std::string errFile = "/tmp/ductus-auth-cli-" + std::to_string(::getpid()) + ".err";
  std::string script = "unset DUCTUS_DATABASE_URL; exec timeout 60 \"$0\"" + quoted + " 2>" + errFile;
  std::vector<std::string> argv{"/bin/sh", "-c"};
  if (input.empty()) {
    argv.push_back(script + " </dev/null");
  } else {
    argv.push_back("printf '%s' \"$1\" | (" + script + ")");
  }
  argv.push_back(ductusBinary());
  if (!input.empty()) argv.push_back(input);
  auto r = runChild(argv);
  Run out;
  out.exit = ::ductus::test::exitCode(r.exitStatus);
  out.out = r.out;
  std::string err;
  if (FILE* f = std::fopen(errFile.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) err.append(buf, n);
    std::fclose(f);
    std::remove(errFile.c_str());
  }
  out.all = r.out + err;
  return out;
}

std::string osUser() {
  passwd* pw = getpwuid(geteuid());
  return pw ? pw->pw_name : "";
}

TEST(AuthCli, UsersAreCreatedListedAndDisabledWithAnAuditRowEach) {
  TestDatabase db;
  auto created = ductus({"user", "create", "alice", "--role", "admin", "--permission",
                         "payloads,audit", "--database", db.url()},
                        "a long password of hers\n");
  ASSERT_EQ(created.exit, 0) << created.all;
  EXPECT_THAT(created.all, HasSubstr("applied migration 0003_api_auth"));
  EXPECT_THAT(created.out, HasSubstr("created user alice (admin, permissions payloads,audit)"));
  EXPECT_THAT(created.out, ::testing::Not(HasSubstr("password:")));
  EXPECT_EQ(db.value("SELECT must_change_password FROM users WHERE name = 'alice'"), "f");
  EXPECT_THAT(db.value("SELECT password_hash FROM users WHERE name = 'alice'"),
              HasSubstr("$argon2id$"));

  // No password on stdin: one is generated, printed once, to be changed.
  auto generated = ductus({"user", "create", "bob", "--role", "viewer", "--database", db.url()});
  ASSERT_EQ(generated.exit, 0) << generated.all;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(generated.out, m, std::regex("password: ([A-Za-z0-9]{24})\n")))
      << generated.out;
  EXPECT_EQ(db.value("SELECT must_change_password FROM users WHERE name = 'bob'"), "t");

  auto again = ductus({"user", "create", "alice", "--role", "admin", "--database", db.url()},
                      "another long password");
  EXPECT_EQ(again.exit, 1) << again.all;
  EXPECT_THAT(again.all, HasSubstr("a user named 'alice' exists"));
  EXPECT_EQ(ductus({"user", "create", "carl", "--role", "king", "--database", db.url()}).exit, 2);
  EXPECT_EQ(ductus({"user", "create", "carl", "--role", "admin", "--database", db.url()},
                   "short")
                .exit,
            2);
  // The API's password rules, each named: the name, one character, the
  // most used.
  for (auto [password, rule] : std::vector<std::pair<std::string, std::string>>{
           {"Carl-the-admin-2026", "name"},
           {"cccccccccccccc", "repeated"},
           {"1qaz2wsx3edc", "most used"}}) {
    auto weak = ductus({"user", "create", "carl", "--role", "admin", "--database", db.url()},
                       password);
    EXPECT_EQ(weak.exit, 2) << password << ": " << weak.all;
    EXPECT_THAT(weak.all, HasSubstr(rule)) << password;
  }

  auto list = ductus({"user", "list", "--database", db.url()});
  ASSERT_EQ(list.exit, 0) << list.all;
  EXPECT_THAT(list.out, HasSubstr("alice"));
  EXPECT_THAT(list.out, HasSubstr("must change password"));

  auto disabled = ductus({"user", "disable", "bob", "--database", db.url()});
  ASSERT_EQ(disabled.exit, 0) << disabled.all;
  EXPECT_EQ(db.value("SELECT disabled FROM users WHERE name = 'bob'"), "t");
  EXPECT_EQ(ductus({"user", "disable", "nobody", "--database", db.url()}).exit, 1);
  // alice is the only admin: disabled, no one could manage users through
  // the API (`ductus user create --role admin` makes another first).
  auto last = ductus({"user", "disable", "alice", "--database", db.url()});
  EXPECT_EQ(last.exit, 1) << last.all;
  EXPECT_THAT(last.all, HasSubstr("last enabled admin"));
  EXPECT_EQ(db.value("SELECT disabled FROM users WHERE name = 'alice'"), "f");

  EXPECT_EQ(db.column("SELECT action || ' ' || target_name || ' ' || actor || ' ' || "
                      "actor_kind || ' ' || via FROM audit_log ORDER BY id"),
            (std::vector<std::string>{"user.create alice " + osUser() + " system cli",
                                      "user.create bob " + osUser() + " system cli",
                                      "user.disable bob " + osUser() + " system cli"}));
}

// The break-glass for a lost phone when no other admin can sign in: the
// server's CLI turns a user's second factor off and ends their sessions.
TEST(AuthCli, ResetTotpTurnsAUsersSecondFactorOffAndEndsTheirSessions) {
  TestDatabase db;
  ASSERT_EQ(ductus({"user", "create", "alice", "--role", "admin", "--database", db.url()},
                   "a long password of hers")
                .exit,
            0);
  db.value(
      "UPDATE users SET totp_secret = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ', "
      "totp_enabled = true, totp_last_step = 1, totp_recovery = '{ab}' WHERE name = 'alice'");
  db.value(
      "INSERT INTO sessions (secret_hash, user_id, address, created_at, last_seen_at, "
      "expires_at) SELECT repeat('a', 64), id, '', now(), now(), now() + interval '1 day' "
      "FROM users WHERE name = 'alice'");
  auto list = ductus({"user", "list", "--database", db.url()});
  EXPECT_THAT(list.out, HasSubstr("active, totp"));
  auto reset = ductus({"user", "reset-totp", "alice", "--database", db.url()});
  ASSERT_EQ(reset.exit, 0) << reset.all;
  EXPECT_THAT(reset.out, HasSubstr("reset the second factor of user alice"));
  EXPECT_EQ(db.value("SELECT totp_enabled::text || coalesce(totp_secret, '-') || "
                     "cardinality(totp_recovery) FROM users WHERE name = 'alice'"),
            "false-0");
  EXPECT_EQ(db.value("SELECT count(*) FROM sessions"), "0");
  EXPECT_EQ(db.value("SELECT action || ' ' || (detail->>'sessionsEnded') FROM audit_log "
                     "WHERE action = 'user.totp.reset'"),
            "user.totp.reset 1");
  auto nobody = ductus({"user", "reset-totp", "nobody", "--database", db.url()});
  EXPECT_EQ(nobody.exit, 1);
  EXPECT_THAT(nobody.all, HasSubstr("no user is named 'nobody'"));
}

TEST(AuthCli, ATokenIsPrintedOnceAloneAndRevokedByIdOrName) {
  TestDatabase db;
  ASSERT_EQ(ductus({"user", "create", "alice", "--role", "operator", "--database", db.url()},
                   "a long password of hers")
                .exit,
            0);
  auto created = ductus({"token", "create", "ci", "--role", "admin", "--user", "alice",
                         "--database", db.url()});
  ASSERT_EQ(created.exit, 0) << created.all;
  ASSERT_TRUE(std::regex_match(created.out, std::regex("dux_[0-9a-f]{64}\n"))) << created.out;
  std::string token = created.out.substr(0, created.out.size() - 1);
  EXPECT_EQ(db.value("SELECT name FROM api_tokens WHERE token_hash = $1",
                     {api::secretHash(token)}),
            "ci");
  EXPECT_EQ(db.value("SELECT u.name FROM api_tokens t JOIN users u ON u.id = t.user_id"),
            "alice");
  EXPECT_EQ(ductus({"token", "create", "ci", "--role", "viewer", "--database", db.url()}).exit, 1);
  EXPECT_EQ(ductus({"token", "create", "x", "--role", "viewer", "--user", "nobody", "--database",
                    db.url()})
                .exit,
            1);
  auto second = ductus({"token", "create", "nightly", "--role", "viewer", "--database", db.url()});
  ASSERT_EQ(second.exit, 0) << second.all;

  auto list = ductus({"token", "list", "--database", db.url()});
  ASSERT_EQ(list.exit, 0) << list.all;
  EXPECT_THAT(list.out, HasSubstr("ci"));
  EXPECT_THAT(list.out, HasSubstr("nightly"));
  EXPECT_THAT(list.out, ::testing::Not(HasSubstr("dux_")));

  auto byName = ductus({"token", "revoke", "ci", "--database", db.url()});
  ASSERT_EQ(byName.exit, 0) << byName.all;
  std::string id = db.value("SELECT id FROM api_tokens WHERE name = 'nightly'");
  auto byId = ductus({"token", "revoke", id, "--database", db.url()});
  ASSERT_EQ(byId.exit, 0) << byId.all;
  EXPECT_EQ(db.value("SELECT count(*) FROM api_tokens WHERE revoked_at IS NULL"), "0");
  EXPECT_EQ(ductus({"token", "revoke", "ci", "--database", db.url()}).exit, 1);
  auto all = ductus({"token", "list", "--all", "--database", db.url()});
  EXPECT_THAT(all.out, HasSubstr("nightly"));
  EXPECT_THAT(ductus({"token", "list", "--database", db.url()}).out,
              ::testing::Not(HasSubstr("nightly")));

  EXPECT_EQ(db.column("SELECT action || ' ' || target_name || ' ' || via FROM audit_log "
                      "WHERE target_kind = 'token' ORDER BY id"),
            (std::vector<std::string>{"token.create ci cli", "token.create nightly cli",
                                      "token.revoke ci cli", "token.revoke nightly cli"}));
}

TEST(AuthCli, WithoutADatabaseTheCommandsSaySo) {
  auto r = ductus({"user", "list", "/nonexistent-project"});
  EXPECT_EQ(r.exit, 2) << r.all;
  EXPECT_THAT(r.all, HasSubstr("no database"));
}

}  // namespace
}  // namespace ductus::test
