// ${env:NAME} and ${secret:NAME}: where they are allowed, what a missing one says.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/config/secrets.h"
#include "tests/common/config/project_dir.h"

namespace ductus::config::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kKeyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

TEST(Substitution, EnvReferencesFillTheDatabaseUrlAndDestinationFields) {
  ProjectDir p;
  p.write("ductus.yaml", "database: ${env:DB_URL}\n");
  p.iface("a",
          "source:\n  mllp: { listen: 127.0.0.1:2575 }\n"
          "destination:\n"
          "  http: { url: \"https://${env:LAB_HOST}/in\", headers: { X-Site: \"${env:SITE}\" } }\n");
  auto o = p.load(withEnv({{"DB_URL", "postgresql://u@db/x"}, {"LAB_HOST", "lab.example"}, {"SITE", "north"}}));
  ASSERT_TRUE(o.project);
  EXPECT_EQ(o.project->engine.database, "postgresql://u@db/x");
  auto& h = std::get<HttpDestination>(o.project->interfaces[0].destinations[0].target);
  EXPECT_EQ(h.url, "https://lab.example/in");
  EXPECT_EQ(h.headers.at("X-Site"), "north");
  // The summary text keeps what was written.
  EXPECT_THAT(o.project->interfaces[0].destinations[0].describe, HasSubstr("${env:LAB_HOST}"));
}

TEST(Substitution, AMissingEnvironmentVariableIsAnErrorNamingIt) {
  ProjectDir p;
  p.write("ductus.yaml", "database: ${env:DB_URL}\n");
  p.iface("a", "source:\n  mllp: { listen: 127.0.0.1:2575 }\ndestination:\n  file: { path: out/ }\n");
  EXPECT_THAT(p.errors(), HasSubstr("ductus.yaml:1:11: database: environment variable `DB_URL` is not set"));
}

// For `ductus validate` and `ductus try`: the unset variable is a warning
// at its place, its value left out; a set one is substituted as ever.
TEST(Substitution, AnUnsetVariableCanBeAWarningAtItsPlaceInstead) {
  ProjectDir p;
  p.write("ductus.yaml", "database: ${env:DB_URL}\n");
  p.iface("a",
          "source:\n  mllp: { listen: 127.0.0.1:2575 }\n"
          "destination:\n"
          "  http: { url: \"https://${env:LAB_HOST}/in\", headers: { X-Site: \"${env:SITE}\" } }\n");
  auto options = withEnv({{"SITE", "north"}});
  options.unsetEnvIsWarning = true;
  auto o = p.load(options);
  ASSERT_TRUE(o.project) << (o.diagnostics.empty() ? "" : o.diagnostics[0].toString());
  EXPECT_EQ(o.project->engine.database, "");
  auto& h = std::get<HttpDestination>(o.project->interfaces[0].destinations[0].target);
  EXPECT_EQ(h.headers.at("X-Site"), "north");
  ASSERT_EQ(o.warnings.size(), 2u);
  EXPECT_THAT(o.warnings[0].toString(),
              HasSubstr("ductus.yaml:1:11: database: environment variable `DB_URL` is not set here"));
  EXPECT_THAT(o.warnings[1].toString(),
              HasSubstr("interface.yaml:4:16: destination.http.url: environment variable "
                        "`LAB_HOST` is not set here"));
  // Not asked for: an error, as `ductus run` finds it.
  EXPECT_THAT(p.errors(withEnv({{"SITE", "north"}})),
              HasSubstr("environment variable `LAB_HOST` is not set"));
}

// From 64 interfaces up, the files are read on two threads, each with its
// own substituter: every value, warning and error still lands at its place,
// in folder order, whichever half it came from.
TEST(Substitution, ManyInterfacesReadOnTwoThreadsKeepEveryValueWarningAndErrorInOrder) {
  ProjectDir p;
  auto name = [](int i) { return "i" + std::string(i < 10 ? "0" : "") + std::to_string(i); };
  for (int i = 0; i < 80; ++i)
    p.iface(name(i),
            "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(20000 + i) +
                " }\ndestination:\n  http: { url: \"https://lab/in\", headers: { X-Site: \"" +
                (i == 5 || i == 70 ? "${env:UNSET}" : "${env:SITE}") + "\" } }\n");
  auto options = withEnv({{"SITE", "north"}});
  options.unsetEnvIsWarning = true;
  auto o = p.load(options);
  ASSERT_TRUE(o.project) << (o.diagnostics.empty() ? "" : o.diagnostics[0].toString());
  ASSERT_EQ(o.project->interfaces.size(), 80u);
  for (int i = 0; i < 80; ++i) {
    auto& f = o.project->interfaces[static_cast<size_t>(i)];
    EXPECT_EQ(f.name, name(i));
    auto& h = std::get<HttpDestination>(f.destinations[0].target);
    if (i != 5 && i != 70) {
      EXPECT_EQ(h.headers.at("X-Site"), "north") << f.name;
    }
  }
  ASSERT_EQ(o.warnings.size(), 2u);
  EXPECT_THAT(o.warnings[0].toString(), HasSubstr("interfaces/i05/interface.yaml:4:"));
  EXPECT_THAT(o.warnings[1].toString(), HasSubstr("interfaces/i70/interface.yaml:4:"));
  // Not asked for: an error in each half, both said, in order.
  auto errors = p.errors(withEnv({{"SITE", "north"}}));
  auto first = errors.find("interfaces/i05/interface.yaml:4:");
  auto second = errors.find("interfaces/i70/interface.yaml:4:");
  EXPECT_NE(first, std::string::npos) << errors;
  EXPECT_NE(second, std::string::npos) << errors;
  EXPECT_LT(first, second) << errors;
}

TEST(Substitution, AReferenceWhereNoneIsAllowedIsRefused) {
  ProjectDir p;
  p.iface("a", "source:\n  mllp: { listen: 127.0.0.1:2575 }\ndestination:\n  file: { path: \"${env:OUT}\" }\n");
  EXPECT_THAT(p.errors(withEnv({{"OUT", "/tmp"}})),
              HasSubstr("interfaces/a/interface.yaml:4:17: destination.file.path: ${...} is not allowed here"));
}

TEST(Substitution, SecretsFillResourcesAndAMissingSecretIsNamed) {
  ProjectDir p;
  auto key = parseSecretsKey(kKeyHex);
  ASSERT_TRUE(key);
  {
    auto store = SecretsFile::open(p.root() / "secrets/prod.json", *key);
    ASSERT_TRUE(store);
    store->set("LAB_TOKEN", "s3cr3t-value");
    ASSERT_TRUE(store->save());
  }
  p.write("resources.yaml",
          "apis:\n  lab:\n    url: \"https://lab.example\"\n"
          "    headers: { Authorization: \"Bearer ${secret:LAB_TOKEN}\" }\n"
          "databases:\n  p: { url: \"postgresql://u:${secret:DB_PASSWORD}@db/p\" }\n");
  p.iface("a", "source:\n  mllp: { listen: 127.0.0.1:2575 }\ndestination:\n  http: { api: lab }\n");
  LoadOptions o;
  o.secretsKey = kKeyHex;
  std::string e = p.errors(o);
  EXPECT_THAT(e, HasSubstr("resources.yaml:6:13: databases.p.url: secret `DB_PASSWORD` is not in"));
  EXPECT_THAT(e, Not(HasSubstr("s3cr3t-value")));

  p.write("resources.yaml",
          "apis:\n  lab:\n    url: \"https://lab.example\"\n"
          "    headers: { Authorization: \"Bearer ${secret:LAB_TOKEN}\" }\n");
  auto loaded = p.load(o);
  ASSERT_TRUE(loaded.project) << p.errors(o);
  EXPECT_EQ(loaded.project->resources.apis.at("lab").headers.at("Authorization"), "Bearer s3cr3t-value");
}

TEST(Substitution, ASecretWithoutAKeyOrWithTheWrongKeyIsAClearError) {
  ProjectDir p;
  auto key = parseSecretsKey(kKeyHex);
  {
    auto store = SecretsFile::open(p.root() / "secrets/prod.json", *key);
    store->set("T", "v");
    ASSERT_TRUE(store->save());
  }
  p.iface("a", "source:\n  mllp: { listen: 127.0.0.1:2575 }\n"
               "destination:\n  mllp: { host: \"${secret:T}\", port: 2576 }\n");
  LoadOptions wrong;
  wrong.secretsKey = std::string(64, 'f');
  EXPECT_THAT(p.errors(wrong), HasSubstr("interfaces/a/interface.yaml:4:17: destination.mllp.host: secret `T` "
                                         "cannot be read: "));
  EXPECT_THAT(p.errors(wrong), HasSubstr("this key does not open secret `T`"));
}

TEST(Substitution, TheKeyFileNamedInDuctusYamlIsUsed) {
  ProjectDir p;
  auto key = parseSecretsKey(kKeyHex);
  {
    auto store = SecretsFile::open(p.root() / "secrets/test.json", *key);
    store->set("HOST", "lab.example");
    ASSERT_TRUE(store->save());
  }
  p.write("keys/secrets.key", std::string(kKeyHex) + "\n");
  p.write("ductus.yaml", "secrets: { key_file: keys/secrets.key }\n");
  p.iface("a", "source:\n  mllp: { listen: 127.0.0.1:2575 }\n"
               "destination:\n  mllp: { host: \"${secret:HOST}\", port: 2576 }\n");
  LoadOptions o;
  o.environment = "test";
  o.secretsKey = "";  // no key text: as if DUCTUS_SECRETS_KEY were unset
  auto loaded = p.load(o);
  ASSERT_TRUE(loaded.project) << p.errors(o);
  auto& m = std::get<MllpDestination>(loaded.project->interfaces[0].destinations[0].target);
  EXPECT_EQ(m.address.host, "lab.example");
}

}  // namespace
}  // namespace ductus::config::test
