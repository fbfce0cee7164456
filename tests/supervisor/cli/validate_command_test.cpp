// `ductus validate` and `ductus secret` as an operator runs them: the real
// binary on the example projects and on a broken copy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/common/config/project_dir.h"
#include "tests/support/exit_status.h"
#include "tests/support/test_ca.h"
#include "tests/support/test_env.h"

namespace ductus::config::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

int exitCode(const ductus::test::ChildOutput& r) {
  return ::ductus::test::exitCode(r.exitStatus);
}

// Runs a shell line with stderr folded into stdout (runChild keeps only stdout).
ductus::test::ChildOutput sh(const std::string& line) {
  return ductus::test::runChild({"/bin/sh", "-c", line + " 2>&1"});
}

std::string quoted(const fs::path& p) {
  std::string s = "'";
  s.append(p.string()).append("'");
  return s;
}

const std::vector<std::string> kExamples = {"adt-feed",          "lab-results-http", "http-respond",
                                            "route-to-internal", "file-split-records", "schedule"};

TEST(ValidateCommand, EveryExampleProjectValidates) {
  for (auto& name : kExamples) {
    fs::path dir = fs::path(DUCTUS_SOURCE_DIR) / "examples" / name;
    auto r = ductus::test::runChild({ductus::test::ductusBinary(), "validate", dir.string()});
    EXPECT_EQ(exitCode(r), 0) << name << ":\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr(", valid")) << name;
  }
}

TEST(ValidateCommand, TheDemoPrintsOneLinePerInterface) {
  fs::path dir = fs::path(DUCTUS_SOURCE_DIR) / "examples/route-to-internal";
  auto r = ductus::test::runChild({ductus::test::ductusBinary(), "validate", dir.string()});
  EXPECT_THAT(r.out, HasSubstr("adt-in: mllp 127.0.0.1:2578, hl7v2 \u2192 default: route to adt-json (json)\n"));
  EXPECT_THAT(r.out, HasSubstr("adt-json: internal, json \u2192 default: file out/ (json)\n"));
}

// A copy of an example with several mistakes: every one is listed, exit 1.
class BrokenCopy : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::copy(fs::path(DUCTUS_SOURCE_DIR) / "examples/route-to-internal", dir_.root(),
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    dir_.write("interfaces/adt-in/interface.yaml",
               "source:\n"
               "  mllp: { listen: 127.0.0.1:2578 }\n"
               "timeout: 5 seconds\n"
               "destinaton:\n"
               "  interface: adt-json\n");
    dir_.write("interfaces/adt-json/interface.yaml",
               "source:\n"
               "  internal: {}\n"
               "format: json\n"
               "retention: 2w\n"
               "destination:\n"
               "  interface: adt-in\n");
  }
  ProjectDir dir_;
};

TEST_F(BrokenCopy, ExitsOneListingEveryError) {
  auto r = ductus::test::runChild({ductus::test::ductusBinary(), "validate", dir_.root().string()});
  EXPECT_EQ(exitCode(r), 1) << r.out;
  std::string in = (dir_.root() / "interfaces/adt-in/interface.yaml").string();
  std::string json = (dir_.root() / "interfaces/adt-json/interface.yaml").string();
  EXPECT_THAT(r.out, HasSubstr(in + ":3:10: timeout: expected a duration"));
  EXPECT_THAT(r.out, HasSubstr(in + ":4:1: destinaton: unknown key `destinaton` \u2014 did you mean `destination`?"));
  EXPECT_THAT(r.out, HasSubstr(in + ":1:1: destination: `destination` (or `destinations`) is required"));
  EXPECT_THAT(r.out, HasSubstr(json + ":4:12: retention: expected 1w | 3w | 7w, got `2w`"));
  EXPECT_THAT(r.out, HasSubstr(json + ":6:3: destination.interface: route target `adt-in` must have `source: internal`"));
  EXPECT_THAT(r.out, HasSubstr(": 5 errors\n"));
}

TEST_F(BrokenCopy, JsonListsTheSameErrorsForEditors) {
  auto r = ductus::test::runChild({ductus::test::ductusBinary(), "validate", dir_.root().string(), "--json"});
  EXPECT_EQ(exitCode(r), 1);
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_FALSE(doc["ok"].get<bool>());
  ASSERT_EQ(doc["errors"].size(), 5u) << r.out;
  EXPECT_EQ(doc["errors"][0]["line"], 1);
  EXPECT_EQ(doc["errors"][0]["key"], "destination");
}

TEST(ValidateCommand, JsonSummarisesAValidProject) {
  fs::path dir = fs::path(DUCTUS_SOURCE_DIR) / "examples/adt-feed";
  auto r = ductus::test::runChild({ductus::test::ductusBinary(), "validate", dir.string(), "--json"});
  EXPECT_EQ(exitCode(r), 0);
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_TRUE(doc["ok"].get<bool>());
  EXPECT_EQ(doc["interfaces"][0]["name"], "adt-feed");
  EXPECT_EQ(doc["interfaces"][0]["source"], "mllp");
  EXPECT_EQ(doc["interfaces"][0]["partitions"], 16);
  EXPECT_EQ(doc["interfaces"][0]["destinations"][0]["kind"], "file");
}

constexpr const char* kKey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

// "Valid" means "will start": what the files say is checked against the
// code, loaded in a real worker, and against what the engine can run.
class WillStart : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::copy(fs::path(DUCTUS_SOURCE_DIR) / "examples/lab-results-http", dir_.root(),
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  }
  ductus::test::ChildOutput validate(std::vector<std::string> more = {}) {
    std::vector<std::string> argv = {ductus::test::ductusBinary(), "validate", dir_.root().string()};
    argv.insert(argv.end(), more.begin(), more.end());
    return ductus::test::runChild(argv);
  }
  std::string path(const std::string& rel) const { return (dir_.root() / rel).string(); }
  ProjectDir dir_;
};

TEST_F(WillStart, ASyntaxErrorNamesTheModulesLineAndColumn) {
  dir_.write("interfaces/lab-results/transform.js",
             "// The receiver wants JSON.\n"
             "export function toJson(msg) {\n"
             "  let x = ;\n"
             "  return msg;\n"
             "}\n"
             "export function transform(msg) { return msg; }\n");
  auto r = validate();
  EXPECT_EQ(exitCode(r), 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr(path("interfaces/lab-results/transform.js") +
                               ":3:11: SyntaxError: Unexpected token ';'\n"));
  EXPECT_THAT(r.out, HasSubstr(": 1 error\n"));
}

TEST_F(WillStart, ATopLevelThrowAndAMissingImportArePlacedToo) {
  dir_.write("interfaces/lab-results/transform.js",
             "import { helper } from \"./helpers.js\";\n"
             "export function toJson(msg) { return helper(msg); }\n"
             "export function transform(msg) { return msg; }\n");
  auto r = validate();
  EXPECT_EQ(exitCode(r), 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr(path("interfaces/lab-results/transform.js") +
                               ":1:24: cannot import \"./helpers.js\""));

  dir_.write("interfaces/lab-results/transform.js",
             "export function toJson(msg) { return msg; }\n"
             "  throw new Error(\"not configured\");\n"
             "export function transform(msg) { return msg; }\n");
  r = validate();
  EXPECT_EQ(exitCode(r), 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr(path("interfaces/lab-results/transform.js") +
                               ":2:9: Error: not configured\n"));
}

TEST_F(WillStart, AMisspeltFunctionIsNamedAtItsReferenceWithWhatTheModuleExports) {
  std::string yaml = path("interfaces/lab-results/interface.yaml");
  std::ifstream in(yaml);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  s.replace(s.find("transform: toJson"), 17, "transform: toJSON");
  dir_.write("interfaces/lab-results/interface.yaml", s);
  auto r = validate();
  EXPECT_EQ(exitCode(r), 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr(yaml + ":10:16: destinations.receiver.transform: " +
                               path("interfaces/lab-results/transform.js") +
                               " does not export a function named \"toJSON\" (it exports toJson, "
                               "transform)\n"));
  // The other destination names `transform` (by default), which is there.
  EXPECT_THAT(r.out, HasSubstr(": 1 error\n"));

  auto j = validate({"--json"});
  auto doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["errors"].size(), 1u) << j.out;
  EXPECT_EQ(doc["errors"][0]["line"], 10);
  EXPECT_EQ(doc["errors"][0]["key"], "destinations.receiver.transform");
}

// SFTP settings are checked (an unpinned server at its line, with the
// command that gets its key); a pinned one is valid, source and
// destination alike.
TEST_F(WillStart, AnSftpServerWithItsKeyPinnedIsValidAndAnUnpinnedOneIsNamed) {
  const std::string key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAkUt5CgstUNshcz4pink7vlO2LXNGaqbB//9HWYoX6I";
  dir_.write("interfaces/pickup/interface.yaml",
             "source:\n"
             "  sftp: { host: files.example.org, user: u, password: p, path: in/, delete: true,\n"
             "          host_key: \"" + key + "\" }\n"
             "destination:\n"
             "  sftp: { host: files.example.org, user: u, password: p, path: out/,\n"
             "          host_key: \"" + key + "\" }\n");
  dir_.write("interfaces/pickup/transform.js", "export function transform(m) { return m; }\n");
  auto r = validate();
  EXPECT_EQ(exitCode(r), 0) << r.out;

  dir_.write("interfaces/pickup/interface.yaml",
             "source:\n"
             "  sftp: { host: files.example.org, user: u, password: p, path: in/, delete: true }\n"
             "destination:\n  file: { path: out/ }\n");
  r = validate();
  EXPECT_EQ(exitCode(r), 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr(path("interfaces/pickup/interface.yaml") +
                               ":2:9: source.sftp: the server's key is not pinned: add host_key: "
                               "\"<type> <base64>\" (get it with `ssh-keyscan -p 22 files.example.org`"));
}

// Every certificates: entry is loaded as the engine loads it before the
// database: an expired certificate makes validate exit 1 naming the entry
// and its line; a current one, a matching key, passes.
TEST_F(WillStart, AnExpiredCertificateIsAnErrorNamingItsEntry) {
  ductus::test::TestCa ca(dir_.root() / "tls");
  ca.issue("server", "/CN=localhost");
  ca.issue("old", "/CN=localhost", {"localhost"}, {"127.0.0.1"}, -2);
  ca.issue("other", "/CN=other");
  // The example's own apis: stay; the entries come after its 6 lines.
  std::ifstream in(dir_.root() / "resources.yaml");
  std::string resources((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  resources += "certificates:\n"
               "  server: { cert_file: tls/server.pem, key_file: tls/server.key }\n"
               "  analyzers: { ca_file: tls/ca.pem }\n";
  dir_.write("resources.yaml", resources);
  auto r = validate();
  EXPECT_EQ(exitCode(r), 0) << r.out;

  dir_.write("resources.yaml",
             resources +
                 "  old: { cert_file: tls/old.pem, key_file: tls/old.key }\n"
                 "  mixed: { cert_file: tls/server.pem, key_file: tls/other.key }\n"
                 "  gone: { ca_file: tls/missing.pem }\n");
  r = validate();
  EXPECT_EQ(exitCode(r), 1) << r.out;
  std::string yaml = path("resources.yaml");
  EXPECT_THAT(r.out, HasSubstr(yaml + ":10: certificates.old: "));
  EXPECT_THAT(r.out, HasSubstr("expired"));
  EXPECT_THAT(r.out, HasSubstr(yaml + ":11: certificates.mixed: "));
  EXPECT_THAT(r.out, HasSubstr(yaml + ":12: certificates.gone: "));
  EXPECT_THAT(r.out, Not(HasSubstr("certificates.server:")));

  // run refuses the same before any database (this one does not exist).
  r = sh(std::string(ductus::test::ductusBinary()) + " run " + quoted(dir_.root()) +
         " --database 'host=/nonexistent-ductus-h1 dbname=x connect_timeout=1'");
  EXPECT_EQ(exitCode(r), 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr(yaml + ":10: certificates.old: ")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("certificates that do not load; nothing was started")) << r.out;
}

// CI validates without the production key: a secret must exist by name.
TEST_F(WillStart, SecretsAreCheckedByNameWithoutTheKey) {
  std::string ductus = ductus::test::ductusBinary();
  ASSERT_EQ(exitCode(sh("printf tok | DUCTUS_SECRETS_KEY=" + std::string(kKey) + " " + ductus +
                        " secret set LAB_TOKEN " + quoted(dir_.root()))),
            0);
  dir_.write("resources.yaml",
             "apis:\n"
             "  lab-receiver:\n"
             "    url: http://127.0.0.1:8090\n"
             "    headers: { Authorization: \"Bearer ${secret:LAB_TOKEN}\" }\n");
  std::string noKey = "env -u DUCTUS_SECRETS_KEY " + ductus + " validate " + quoted(dir_.root());
  auto r = sh(noKey);
  EXPECT_EQ(exitCode(r), 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("secrets were checked by name only"));
  EXPECT_THAT(r.out, Not(HasSubstr("tok")));

  dir_.write("resources.yaml",
             "apis:\n"
             "  lab-receiver:\n"
             "    url: http://127.0.0.1:8090\n"
             "    headers: { Authorization: \"Bearer ${secret:LAB_TOKN}\" }\n");
  r = sh(noKey);
  EXPECT_EQ(exitCode(r), 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("secret `LAB_TOKN` is not in"));

  // With the key, values are opened as before.
  r = sh("DUCTUS_SECRETS_KEY=" + std::string(kKey) + " " + ductus + " validate " + quoted(dir_.root()));
  EXPECT_EQ(exitCode(r), 1) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("by name only")));
}

// CI validates a production project in a shell without production's
// environment: an unset variable is a warning naming it and where it is
// used (an error with --strict); `ductus run` still refuses to start.
TEST_F(WillStart, AnUnsetVariableIsAWarningWithItsPlaceAndAnErrorWithStrict) {
  dir_.write("ductus.yaml",
             "api: { listen: 127.0.0.1:7701 }\n"
             "database: ${env:DUCTUS_H5_UNSET_DB}\n");
  dir_.write("resources.yaml",
             "apis:\n"
             "  lab-receiver:\n"
             "    url: http://127.0.0.1:8090\n"
             "    headers: { Authorization: \"Bearer ${env:DUCTUS_H5_UNSET_TOKEN}\" }\n");
  std::string unset = "env -u DUCTUS_H5_UNSET_DB -u DUCTUS_H5_UNSET_TOKEN ";
  std::string ductus = ductus::test::ductusBinary();
  std::string validate = unset + ductus + " validate " + quoted(dir_.root());
  auto r = sh(validate);
  EXPECT_EQ(exitCode(r), 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("warning: " + path("ductus.yaml") +
                               ":2:11: database: environment variable `DUCTUS_H5_UNSET_DB` is not "
                               "set here (`ductus run` refuses to start without it)\n"));
  EXPECT_THAT(r.out, HasSubstr("warning: " + path("resources.yaml") +
                               ":4:31: apis.lab-receiver.headers.Authorization: environment "
                               "variable `DUCTUS_H5_UNSET_TOKEN` is not set here"));
  EXPECT_THAT(r.out, HasSubstr(": 1 interface, valid\n"));

  auto j = sh(validate + " --json");
  EXPECT_EQ(exitCode(j), 0) << j.out;
  auto doc = nlohmann::json::parse(j.out.substr(j.out.find('{')));
  EXPECT_TRUE(doc["ok"].get<bool>());
  ASSERT_EQ(doc["warnings"].size(), 2u) << j.out;
  EXPECT_EQ(doc["warnings"][0]["line"], 2);
  EXPECT_EQ(doc["warnings"][0]["key"], "database");

  auto strict = sh(validate + " --strict");
  EXPECT_EQ(exitCode(strict), 1) << strict.out;
  EXPECT_THAT(strict.out, HasSubstr(path("ductus.yaml") + ":2:11: database: environment variable "
                                                          "`DUCTUS_H5_UNSET_DB` is not set\n"));
  EXPECT_THAT(strict.out, HasSubstr(": 2 errors\n"));

  // Set, nothing to warn of.
  auto set = sh("DUCTUS_H5_UNSET_DB=postgresql://db/x DUCTUS_H5_UNSET_TOKEN=t " + ductus +
                " validate --strict " + quoted(dir_.root()));
  EXPECT_EQ(exitCode(set), 0) << set.out;
  EXPECT_THAT(set.out, Not(HasSubstr("warning")));

  // The engine does not start without it, and says which and where.
  auto run = sh(unset + "timeout 30 " + ductus + " run " + quoted(dir_.root()) +
                " --database postgresql://127.0.0.1:1/none");
  EXPECT_EQ(exitCode(run), 1) << run.out;
  EXPECT_THAT(run.out, HasSubstr(path("ductus.yaml") + ":2:11: database: environment variable "
                                                       "`DUCTUS_H5_UNSET_DB` is not set\n"));
  EXPECT_THAT(run.out, HasSubstr("nothing was started"));
}

TEST(SecretCommand, SetListAndRemoveWithoutEverPrintingAValue) {
  ProjectDir p;
  std::string ductus = ductus::test::ductusBinary();
  std::string env = "DUCTUS_SECRETS_KEY=" + std::string(kKey) + " ";
  std::string proj = " " + quoted(p.root());
  auto set = sh("printf 'tok-123\\n' | " + env + ductus + " secret set LAB_TOKEN" + proj);
  EXPECT_EQ(exitCode(set), 0) << set.out;
  EXPECT_THAT(set.out, Not(HasSubstr("tok-123")));
  auto set2 = sh("printf 'pw' | " + env + ductus + " secret set DB_PASSWORD" + proj + " --env test");
  EXPECT_EQ(exitCode(set2), 0) << set2.out;
  EXPECT_TRUE(fs::exists(p.root() / "secrets/test.json"));

  auto list = sh(env + ductus + " secret list" + proj);
  EXPECT_EQ(exitCode(list), 0);
  EXPECT_EQ(list.out, "LAB_TOKEN\n");

  auto store = SecretsFile::open(p.root() / "secrets/prod.json", *parseSecretsKey(kKey));
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->find("LAB_TOKEN"), "tok-123");  // the newline echo adds is not the value's

  auto rm = sh(env + ductus + " secret rm LAB_TOKEN" + proj);
  EXPECT_EQ(exitCode(rm), 0) << rm.out;
  EXPECT_EQ(sh(env + ductus + " secret list" + proj).out, "");
  EXPECT_EQ(exitCode(sh(env + ductus + " secret rm LAB_TOKEN" + proj)), 1);
}

TEST(SecretCommand, AWrongKeyIsRefusedAndTheFileIsLeftAlone) {
  ProjectDir p;
  std::string ductus = ductus::test::ductusBinary();
  std::string proj = " " + quoted(p.root());
  ASSERT_EQ(exitCode(sh("printf v | DUCTUS_SECRETS_KEY=" + std::string(kKey) + " " + ductus +
                        " secret set A" + proj)),
            0);
  std::ifstream in(p.root() / "secrets/prod.json");
  std::stringstream before;
  before << in.rdbuf();
  std::string wrong = "DUCTUS_SECRETS_KEY=" + std::string(64, 'e') + " ";
  auto list = sh(wrong + ductus + " secret list" + proj);
  EXPECT_EQ(exitCode(list), 1);
  EXPECT_THAT(list.out, HasSubstr("this key does not open secret `A`"));
  auto set = sh("printf x | " + wrong + ductus + " secret set B" + proj);
  EXPECT_EQ(exitCode(set), 1);
  std::ifstream after(p.root() / "secrets/prod.json");
  std::stringstream now;
  now << after.rdbuf();
  EXPECT_EQ(before.str(), now.str());
  auto none = sh("env -u DUCTUS_SECRETS_KEY " + ductus + " secret list" + proj);
  EXPECT_EQ(exitCode(none), 1);
  EXPECT_THAT(none.out, HasSubstr("no secrets key"));
}

}  // namespace
}  // namespace ductus::config::test
