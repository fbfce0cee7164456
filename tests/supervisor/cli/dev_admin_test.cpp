// `ductus dev` makes an administrator so its API can be used at once, and
// the same one on every later start over the same folder: the password and
// token it prints must keep working, and nobody else may read them.
#include "supervisor/cli/dev_admin.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "api/auth/credentials.h"
#include "api/auth/password_hasher.h"
#include "tests/support/test_database.h"

namespace ductus::supervisor {
namespace {

namespace fs = std::filesystem;

class DevAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ductus-dev-admin.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  test::TestDatabase db_;
  fs::path dir_;
};

TEST_F(DevAdminTest, MadeOnceWithAWorkingPasswordAndTokenThenReadBack) {
  auto first = ensureDevAdmin(dir_, db_.url());
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->user, "admin");
  ASSERT_TRUE(api::isTokenText(first->token)) << first->token;

  EXPECT_EQ(db_.value("SELECT role || ' ' || array_to_string(permissions, ',') || ' ' || "
                      "must_change_password FROM users WHERE name = 'admin'"),
            "admin payloads,audit false");
  auto hash = db_.value("SELECT password_hash FROM users WHERE name = 'admin'");
  auto ok = api::verifyPasswordNow(hash, first->password);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_TRUE(*ok) << "the printed password signs in";
  EXPECT_EQ(db_.value("SELECT t.role || ' ' || u.name FROM api_tokens t JOIN users u ON u.id = "
                      "t.user_id WHERE t.token_hash = $1 AND t.revoked_at IS NULL",
                      {api::secretHash(first->token)}),
            "admin admin")
      << "the printed token is the admin's";

  struct stat st {};
  ASSERT_EQ(stat((dir_ / "dev-admin.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "only the developer reads the password";

  auto again = ensureDevAdmin(dir_, db_.url());
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->password, first->password);
  EXPECT_EQ(again->token, first->token);
  EXPECT_EQ(db_.value("SELECT count(*) FROM users"), "1");
  EXPECT_EQ(db_.value("SELECT count(*) FROM api_tokens"), "1");
}

TEST_F(DevAdminTest, AFileThatIsNotOursIsRefusedWithWhatToDo) {
  std::ofstream(dir_ / "dev-admin.json") << "{\"user\": 3}";
  auto r = ensureDevAdmin(dir_, db_.url());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("--fresh"), std::string::npos) << r.error().message;
}

TEST_F(DevAdminTest, AnAdminWhoseFileIsGoneIsSaidNotReplaced) {
  ASSERT_TRUE(ensureDevAdmin(dir_, db_.url()));
  fs::remove(dir_ / "dev-admin.json");
  auto r = ensureDevAdmin(dir_, db_.url());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("is gone"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace ductus::supervisor
