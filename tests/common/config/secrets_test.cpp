// secrets/<env>.json: AES-256-GCM with a fresh nonce per write; a wrong key
// or a tampered file is an error, never garbage.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/config/secrets.h"
#include "tests/common/config/project_dir.h"

namespace ductus::config::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kKeyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
// The same 32 bytes in base64.
constexpr const char* kKeyBase64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Secrets, KeysAreReadAsHexOrBase64AndNothingElse) {
  auto hex = parseSecretsKey(kKeyHex);
  auto b64 = parseSecretsKey(std::string(kKeyBase64) + "\n");
  ASSERT_TRUE(hex);
  ASSERT_TRUE(b64);
  EXPECT_EQ(hex->bytes, b64->bytes);
  EXPECT_EQ(hex->bytes[31], 0x1f);
  EXPECT_FALSE(parseSecretsKey("00ff"));
  EXPECT_FALSE(parseSecretsKey(std::string(64, 'g')));
  EXPECT_FALSE(parseSecretsKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd"));  // 30 bytes
}

TEST(Secrets, ValuesRoundTripAndAreNotStoredInTheClear) {
  ProjectDir p;
  auto file = p.root() / "secrets/prod.json";
  auto key = parseSecretsKey(kKeyHex);
  {
    auto store = SecretsFile::open(file, *key);
    ASSERT_TRUE(store);
    store->set("LAB_TOKEN", "very-secret-token");
    store->set("DB_PASSWORD", "pa\nss");
    ASSERT_TRUE(store->save());
  }
  EXPECT_THAT(slurp(file), Not(HasSubstr("very-secret-token")));
  EXPECT_THAT(slurp(file), HasSubstr("\"LAB_TOKEN\""));
  EXPECT_EQ(std::filesystem::status(file).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  auto again = SecretsFile::open(file, *key);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again->find("LAB_TOKEN"), "very-secret-token");
  EXPECT_EQ(*again->find("DB_PASSWORD"), "pa\nss");
  EXPECT_EQ(again->names(), (std::vector<std::string>{"DB_PASSWORD", "LAB_TOKEN"}));
  EXPECT_TRUE(again->remove("DB_PASSWORD"));
  ASSERT_TRUE(again->save());
  auto third = SecretsFile::open(file, *key);
  EXPECT_EQ(third->names(), (std::vector<std::string>{"LAB_TOKEN"}));
}

TEST(Secrets, EveryWriteSealsWithAFreshNonce) {
  ProjectDir p;
  auto file = p.root() / "secrets/prod.json";
  auto key = parseSecretsKey(kKeyHex);
  auto store = SecretsFile::open(file, *key);
  store->set("A", "same value");
  ASSERT_TRUE(store->save());
  std::string first = slurp(file);
  ASSERT_TRUE(store->save());
  EXPECT_NE(first, slurp(file));
}

TEST(Secrets, AWrongKeyIsRefusedWithAClearError) {
  ProjectDir p;
  auto file = p.root() / "secrets/prod.json";
  {
    auto store = SecretsFile::open(file, *parseSecretsKey(kKeyHex));
    store->set("A", "value");
    ASSERT_TRUE(store->save());
  }
  auto wrong = SecretsFile::open(file, *parseSecretsKey(std::string(64, 'e')));
  ASSERT_FALSE(wrong);
  EXPECT_THAT(wrong.error().message, HasSubstr("this key does not open secret `A`"));
  EXPECT_THAT(wrong.error().message, HasSubstr("wrong DUCTUS_SECRETS_KEY or key file"));
}

TEST(Secrets, AValueMovedUnderAnotherNameDoesNotOpen) {
  ProjectDir p;
  auto file = p.root() / "secrets/prod.json";
  auto key = parseSecretsKey(kKeyHex);
  {
    auto store = SecretsFile::open(file, *key);
    store->set("A", "value");
    ASSERT_TRUE(store->save());
  }
  std::string text = slurp(file);
  text.replace(text.find("\"A\""), 3, "\"B\"");
  std::ofstream(file, std::ios::trunc) << text;
  auto moved = SecretsFile::open(file, *key);
  ASSERT_FALSE(moved);
  EXPECT_THAT(moved.error().message, HasSubstr("does not open secret `B`"));
}

TEST(Secrets, NoKeyAnywhereSaysWhereOneCanComeFrom) {
  auto k = findSecretsKey(nullptr, {});
  ASSERT_FALSE(k);
  EXPECT_THAT(k.error().message, HasSubstr("DUCTUS_SECRETS_KEY"));
  EXPECT_THAT(k.error().message, HasSubstr("key_file"));
  auto bad = findSecretsKey("short", {});
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message, HasSubstr("DUCTUS_SECRETS_KEY: the secrets key must be 32 bytes"));
}

}  // namespace
}  // namespace ductus::config::test
