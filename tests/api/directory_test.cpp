// Directory sign-in (api/auth/directory.h, api/auth/directory_refresh.h)
// against Debian's slapd started by the test in a throwaway folder (base
// dc=hospital,dc=test), over real HTTP with the real authenticator and
// PostgreSQL: the directory's password, the role from the highest mapped
// group, no mapped group refused, the refresh round that ends the access of
// someone removed from her group, the directory down (directory users
// refused, local ones not), TLS (ldaps://, StartTLS) against a CA of the
// test's, and a server that never answers bounded by the timeout.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "api/auth/directory.h"
#include "api/auth/directory_refresh.h"
#include "tests/api/auth_fixture.h"
#include "tests/support/ports.h"
#include "tests/support/slapd_server.h"
#include "tests/support/test_ca.h"

namespace ductus::api::test {
namespace {

using json = nlohmann::json;
using ductus::test::SlapdServer;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

TEST(DirectoryFilter, EscapesWhatCouldWidenOrEndTheFilter) {
  EXPECT_EQ(escapeFilterValue("ann"), "ann");
  EXPECT_EQ(escapeFilterValue("*"), "\\2a");
  EXPECT_EQ(escapeFilterValue("a)(uid=*"), "a\\29\\28uid=\\2a");
  EXPECT_EQ(escapeFilterValue(std::string("x\\y\0z", 5)), "x\\5cy\\00z");
  EXPECT_EQ(fillFilter("(&(uid={name})(objectClass=person))", "a*", ""),
            "(&(uid=a\\2a)(objectClass=person))");
  EXPECT_EQ(fillFilter("(|(member={dn})(memberUid={name}))", "ann", "uid=ann,ou=p(1)"),
            "(|(member=uid=ann,ou=p\\281\\29)(memberUid=ann))");
}

TEST(DirectoryFilter, TheHighestMappedGroupGivesTheRoleComparedWithoutCase) {
  ldap::DirectorySettings s;
  s.roles = {{"ductus-operators", "operator"},
             {"ductus-admins", "admin"},
             {"cn=viewers,ou=groups,dc=h", "viewer"}};
  EXPECT_EQ(roleOfGroups(s.roles, {"Ductus-Operators"}, {}), Role::Operator);
  EXPECT_EQ(roleOfGroups(s.roles, {"ductus-operators", "DUCTUS-ADMINS"}, {}), Role::Admin);
  EXPECT_EQ(roleOfGroups(s.roles, {"nurses"}, {"CN=Viewers,OU=Groups,DC=H"}), Role::Viewer);
  EXPECT_EQ(roleOfGroups(s.roles, {"nurses"}, {"cn=nurses,ou=groups,dc=h"}), std::nullopt);
}

constexpr const char* kAlicePassword = "alice-Directory-Pw1";
constexpr const char* kBobPassword = "bob-Directory-Pw1";
constexpr const char* kCarolPassword = "carol-Directory-Pw1";

class DirectoryTest : public AuthFixture {
 protected:
  void SetUp() override {
    AuthFixture::SetUp();
    if (HasFatalFailure()) return;
    std::string ldif =
        SlapdServer::person("alice", kAlicePassword) + SlapdServer::person("bob", kBobPassword) +
        SlapdServer::person("carol", kCarolPassword) +
        SlapdServer::group("ductus-operators", {"alice", "carol"}) +
        SlapdServer::group("ductus-admins", {"carol"}) + SlapdServer::group("nurses", {"bob"});
    auto started = slapd_.start(ldif, &ca_);
    ASSERT_TRUE(started.ok()) << started.error().message;
    useDirectory(settings());
  }

  void TearDown() override {
    loop_.run([&] {
      if (deps_) deps_->directory = nullptr;
      refresh_.reset();
      directory_.reset();
    });
    AuthFixture::TearDown();
  }

  ldap::DirectorySettings settings() const {
    ldap::DirectorySettings s;
    s.url = slapd_.url();
    s.bindDn = SlapdServer::kServiceDn;
    s.bindPassword = SlapdServer::kServicePassword;
    s.usersBase = std::string("ou=people,") + SlapdServer::kBase;
    s.groupsBase = std::string("ou=groups,") + SlapdServer::kBase;
    s.roles = {{"ductus-operators", "operator"}, {"ductus-admins", "admin"}};
    s.timeout = 5s;
    s.at = "the test";
    return s;
  }

  void useDirectory(ldap::DirectorySettings s, std::filesystem::path caFile = {}) {
    loop_.run([&] {
      deps_->directory = nullptr;
      refresh_.reset();
      directory_ = std::make_unique<Directory>(loop_.loop(), std::move(s), caFile);
      refresh_ = std::make_unique<DirectoryRefresh>(loop_.loop(), *pool_, *directory_, *audit_);
      deps_->directory = directory_.get();
    });
  }

  Result<DirectoryRefreshReport> refreshNow() {
    return onLoop<DirectoryRefreshReport>([&](auto done) { refresh_->run(done); });
  }

  std::vector<std::string> auditRows(const std::string& like) {
    return db_.column(
        "SELECT action || ' ' || outcome || coalesce(' ' || (detail->>'reason'), '') "
        "FROM audit_log WHERE action LIKE $1 ORDER BY id",
        {like});
  }

  ductus::test::HttpReply me(const std::string& session) {
    return call("GET", "/api/v1/me", cookie(session));
  }

  SlapdServer slapd_;
  ductus::test::TestCa ca_{std::filesystem::temp_directory_path() /
                           ("ductus-ldap-ca-" + std::to_string(getpid()) + "-" +
                            std::to_string(reinterpret_cast<uintptr_t>(this)))};
  std::unique_ptr<Directory> directory_;
  std::unique_ptr<DirectoryRefresh> refresh_;
};

TEST_F(DirectoryTest, AGroupMemberSignsInWithTheDirectoryPasswordAsOperator) {
  auto r = signIn("alice", kAlicePassword);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(bodyOf(r)["user"]["role"], "operator");
  EXPECT_EQ(bodyOf(r)["user"]["source"], "ldap");
  auto m = me(sessionOf(r));
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_EQ(bodyOf(m)["role"], "operator");
  EXPECT_EQ(bodyOf(m)["source"], "ldap");
  // The row the sign-in made: a directory user, no password kept here.
  EXPECT_EQ(db_.column("SELECT source || ' ' || role || ' ' || external_id || ' ' || "
                       "(password_hash = '') FROM users WHERE name = 'alice'"),
            std::vector<std::string>{"ldap operator " + SlapdServer::personDn("alice") + " true"});
  // Admins see her in /users, marked as the directory's.
  auto admin = makeToken("admin-token", Role::Admin, kNoPermission);
  auto users = call("GET", "/api/v1/users", bearer(admin.token));
  ASSERT_EQ(users.status, 200) << users.body;
  bool found = false;
  json list = bodyOf(users);
  for (auto& u : list["items"])
    if (u["name"] == "alice") {
      found = true;
      EXPECT_EQ(u["source"], "ldap");
      EXPECT_TRUE(u["leftDirectoryAt"].is_null());
    }
  EXPECT_TRUE(found) << users.body;
  // Names are the directory's, compared without case: one user, one row.
  auto again = signIn("Alice", kAlicePassword);
  EXPECT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(db_.column("SELECT count(*) FROM users WHERE lower(name) = 'alice'"),
            std::vector<std::string>{"1"});
  EXPECT_THAT(auditRows("session.create"),
              ::testing::ElementsAre("session.create ok", "session.create ok"));
}

TEST_F(DirectoryTest, AWrongPasswordIs401AndCountsTowardsTheLockout) {
  auto r = signIn("alice", "not-her-Password-1");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(bodyOf(r)["error"], "invalid_credentials");
  auto unknown = signIn("mallory", "whatever-Password-1");
  EXPECT_EQ(unknown.status, 401) << unknown.body;
  EXPECT_EQ(bodyOf(unknown)["error"], "invalid_credentials") << "tells no one which names exist";
  EXPECT_THAT(auditRows("session.create"),
              ::testing::ElementsAre("session.create denied the directory refused the password",
                                     "session.create denied no entry in the directory"));
  // Five failures lock the name, as for local users: the sixth sign-in,
  // with the right password, is 429 without asking the directory.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(signIn("mallory", "whatever-Password-1").status, 401);
  EXPECT_EQ(signIn("mallory", "whatever-Password-1").status, 429);
}

TEST_F(DirectoryTest, AnEmptyPasswordIsRefusedWithoutAnyBind) {
  auto r = signIn("alice", "");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_THAT(
      auditRows("session.create"),
      ::testing::ElementsAre("session.create denied an empty password is refused before any bind"));
  // slapd logs each bind (-d 256): none as alice, none at all.
  EXPECT_THAT(slapd_.log(), ::testing::Not(HasSubstr("BIND")));
}

TEST_F(DirectoryTest, SomeoneInNoMappedGroupIsRefusedAndTheHighestGroupGivesTheRole) {
  auto bob = signIn("bob", kBobPassword);
  EXPECT_EQ(bob.status, 403) << bob.body;
  EXPECT_EQ(bodyOf(bob)["error"], "no_role");
  EXPECT_TRUE(db_.column("SELECT name FROM users WHERE name = 'bob'").empty());
  EXPECT_THAT(auditRows("session.create"),
              ::testing::ElementsAre("session.create denied in no group that has a role here"));
  auto carol = signIn("carol", kCarolPassword);
  ASSERT_EQ(carol.status, 201) << carol.body;
  EXPECT_EQ(bodyOf(carol)["user"]["role"], "admin");
}

TEST_F(DirectoryTest, RemovingHerFromTheGroupEndsHerSessionAndTokensAtTheNextRefresh) {
  auto r = signIn("alice", kAlicePassword);
  ASSERT_EQ(r.status, 201) << r.body;
  std::string session = sessionOf(r);
  auto token = call("POST", "/api/v1/me/tokens", cookie(session, true),
                    json{{"name", "alice-script"}, {"role", "operator"}}.dump());
  ASSERT_EQ(token.status, 201) << token.body;
  std::string secret = bodyOf(token)["token"];
  ASSERT_EQ(call("GET", "/api/v1/me", bearer(secret)).status, 200);

  // A round with nothing changed changes nothing.
  auto quiet = refreshNow();
  ASSERT_TRUE(quiet.ok()) << quiet.error().message;
  EXPECT_EQ(quiet->checked, 1);
  EXPECT_EQ(quiet->left, 0);
  EXPECT_EQ(me(session).status, 200);

  ASSERT_TRUE(slapd_
                  .modify("dn: cn=ductus-operators,ou=groups," + std::string(SlapdServer::kBase) +
                          "\nchangetype: modify\ndelete: member\nmember: " +
                          SlapdServer::personDn("alice") + "\n")
                  .ok());
  EXPECT_EQ(me(session).status, 200) << "until the round";
  auto round = refreshNow();
  ASSERT_TRUE(round.ok()) << round.error().message;
  EXPECT_EQ(round->left, 1);
  EXPECT_EQ(me(session).status, 401);
  EXPECT_EQ(call("GET", "/api/v1/me", bearer(secret)).status, 401);
  EXPECT_EQ(db_.column("SELECT count(*) FROM sessions s JOIN users u ON u.id = s.user_id "
                       "WHERE u.name = 'alice'"),
            std::vector<std::string>{"0"});
  EXPECT_EQ(db_.column("SELECT count(*) FROM api_tokens WHERE name = 'alice-script' AND "
                       "revoked_at IS NOT NULL"),
            std::vector<std::string>{"1"});
  EXPECT_THAT(auditRows("user.directory_left"),
              ::testing::ElementsAre("user.directory_left ok in no group that has a role here"));
  EXPECT_EQ(signIn("alice", kAlicePassword).status, 403) << "no mapped group: no way back in";

  // Back in the group: she signs in again, and the row is no longer "left".
  ASSERT_TRUE(slapd_
                  .modify("dn: cn=ductus-operators,ou=groups," + std::string(SlapdServer::kBase) +
                          "\nchangetype: modify\nadd: member\nmember: " +
                          SlapdServer::personDn("alice") + "\n")
                  .ok());
  auto back = signIn("alice", kAlicePassword);
  ASSERT_EQ(back.status, 201) << back.body;
  EXPECT_EQ(me(sessionOf(back)).status, 200);
  EXPECT_EQ(db_.column("SELECT count(*) FROM users WHERE name = 'alice' AND "
                       "directory_left_at IS NULL"),
            std::vector<std::string>{"1"});
}

TEST_F(DirectoryTest, SomeoneDeletedFromTheDirectoryLosesAccessAndANewGroupChangesTheRole) {
  ASSERT_EQ(signIn("alice", kAlicePassword).status, 201);
  auto carol = signIn("carol", kCarolPassword);
  ASSERT_EQ(carol.status, 201);
  std::string base = SlapdServer::kBase;
  ASSERT_TRUE(
      slapd_.modify("dn: " + SlapdServer::personDn("alice") + "\nchangetype: delete\n").ok());
  ASSERT_TRUE(
      slapd_
          .modify("dn: cn=ductus-admins,ou=groups," + base +
                  "\nchangetype: modify\nadd: member\nmember: " + SlapdServer::personDn("bob") +
                  "\n-\ndelete: member\nmember: " + SlapdServer::personDn("carol") + "\n")
          .ok());
  auto round = refreshNow();
  ASSERT_TRUE(round.ok()) << round.error().message;
  EXPECT_EQ(round->checked, 2);
  EXPECT_EQ(round->left, 1);
  EXPECT_EQ(round->roleChanged, 1);
  EXPECT_THAT(auditRows("user.%"),
              ::testing::IsSupersetOf(
                  {"user.directory_left ok no longer in the directory", "user.role ok"}));
  // Carol's session goes on, as an operator now.
  auto m = me(sessionOf(carol));
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(bodyOf(m)["role"], "operator");
}

TEST_F(DirectoryTest, TheDirectoryDownRefusesDirectoryUsersOnlyAndTheRoundChangesNothing) {
  auto alice = signIn("alice", kAlicePassword);
  ASSERT_EQ(alice.status, 201);
  makeUser("localadmin", Role::Admin, kNoPermission, "local-Admin-Password-1");
  slapd_.stop();
  auto refused = signIn("carol", kCarolPassword);
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(bodyOf(refused)["error"], "directory_unavailable");
  EXPECT_EQ(signIn("localadmin", "local-Admin-Password-1").status, 201);
  auto round = refreshNow();
  EXPECT_FALSE(round.ok());
  EXPECT_EQ(me(sessionOf(alice)).status, 200) << "not knowing is no reason to end a session";
  // Not counted: the directory's absence is no one's wrong password.
  EXPECT_EQ(db_.column("SELECT failed_attempts FROM users WHERE name = 'alice'"),
            std::vector<std::string>{"0"});
  ASSERT_TRUE(slapd_.restart().ok());
  EXPECT_EQ(signIn("carol", kCarolPassword).status, 201);
}

TEST_F(DirectoryTest,
       ALocalUserOfTheSameNameIsCheckedLocallyAndDirectoryUsersKeepTheirPasswordThere) {
  makeUser("carol", Role::Viewer, kNoPermission, "local-Carol-Password-1");
  EXPECT_EQ(signIn("carol", kCarolPassword).status, 401) << "the local user's password decides";
  auto local = signIn("carol", "local-Carol-Password-1");
  ASSERT_EQ(local.status, 201);
  EXPECT_EQ(bodyOf(local)["user"]["source"], "local");

  auto alice = signIn("alice", kAlicePassword);
  ASSERT_EQ(alice.status, 201);
  auto change = call(
      "POST", "/api/v1/me/password", cookie(sessionOf(alice), true),
      json{{"currentPassword", kAlicePassword}, {"newPassword", "another-Long-Password-9"}}.dump());
  EXPECT_EQ(change.status, 400) << change.body;
  EXPECT_EQ(bodyOf(change)["error"], "directory_user");
  auto totp = call("POST", "/api/v1/me/totp", cookie(sessionOf(alice), true),
                   json{{"password", kAlicePassword}}.dump());
  EXPECT_EQ(totp.status, 400) << totp.body;
}

TEST_F(DirectoryTest, AWrongServiceBindIsTheDirectoryUnavailableNotTheUsersFault) {
  auto s = settings();
  s.bindPassword = "wrong";
  useDirectory(s);
  auto r = signIn("alice", kAlicePassword);
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_THAT(auditRows("session.create"),
              ::testing::ElementsAre(HasSubstr("the service account's bind (auth.ldap.bind)")));
}

TEST_F(DirectoryTest, LdapsAndStartTlsVerifyTheServerAgainstTheCa) {
  auto s = settings();
  s.url = slapd_.tlsUrl();
  s.tls.enabled = true;
  useDirectory(s, ca_.cert());
  auto r = signIn("alice", kAlicePassword);
  EXPECT_EQ(r.status, 201) << r.body;

  auto start = settings();
  start.url = slapd_.url();
  start.startTls = true;
  start.tls.enabled = true;
  useDirectory(start, ca_.cert());
  EXPECT_EQ(signIn("alice", kAlicePassword).status, 201);

  // A CA that did not sign the server's certificate: no password is sent.
  ductus::test::TestCa other(ca_.dir() / "other", "Another CA");
  useDirectory(s, other.cert());
  auto refused = signIn("carol", kCarolPassword);
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_THAT(auditRows("session.create").back(), HasSubstr("directory unavailable"));
}

TEST_F(DirectoryTest, AServerThatNeverAnswersCostsTheTimeoutAndTheLoopGoesOn) {
  // Connections complete in the kernel's backlog, and nothing ever reads.
  uint16_t port = 0;
  Fd silent = ductus::test::closedPort(&port);
  ASSERT_EQ(::listen(silent.get(), 16), 0);
  auto s = settings();
  s.url = "ldap://127.0.0.1:" + std::to_string(port);
  s.timeout = 1500ms;
  useDirectory(s);
  auto admin = makeToken("admin-token", Role::Admin, kNoPermission);
  auto signing = std::async(std::launch::async, [&] { return signIn("alice", kAlicePassword); });
  std::this_thread::sleep_for(200ms);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(call("GET", "/api/v1/me", bearer(admin.token)).status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s) << "the loop did not wait for the directory";
  auto r = signing.get();
  EXPECT_EQ(r.status, 503) << r.body;
}

}  // namespace
}  // namespace ductus::api::test
