// `ductus reference docs|man` and `ductus types` as CI and a packager run
// them: the real binary writing into a throwaway folder, --check failing on
// a copy that differs, and the JSON Schemas judged by Ajv (tests/api/node),
// a validator that isn't ours, against every example and an unknown key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/config/format.h"
#include "common/monitor/settings.h"
#include "tests/common/config/project_dir.h"
#include "tests/support/exit_status.h"
#include "tests/support/test_env.h"

namespace ductus::supervisor::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

int exitCode(const ductus::test::ChildOutput& r) { return ::ductus::test::exitCode(r.exitStatus); }

// Runs argv with stderr folded into stdout.
ductus::test::ChildOutput run(std::vector<std::string> argv) {
  std::vector<std::string> sh = {"/bin/sh", "-c", "exec \"$@\" 2>&1", "sh"};
  sh.insert(sh.end(), argv.begin(), argv.end());
  return ductus::test::runChild(sh);
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/ductus-reference.XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Reference, DocsAreWrittenThenCheckedAndAChangedOneIsNamed) {
  TempDir dir;
  auto wrote = run({ductus::test::ductusBinary(), "reference", "docs", dir.path.string()});
  ASSERT_EQ(exitCode(wrote), 0) << wrote.out;
  for (const char* f : {"cli.md", "api.md", "configuration.md", "metrics.md", "audit.md"})
    EXPECT_TRUE(fs::exists(dir.path / f)) << f;
  std::string cli = read(dir.path / "cli.md");
  EXPECT_THAT(cli, HasSubstr("### ductus run"));
  EXPECT_THAT(cli, HasSubstr("--stop-timeout"));
  EXPECT_THAT(cli, HasSubstr("### ductusctl status"));
  EXPECT_THAT(read(dir.path / "configuration.md"), HasSubstr("| `max_attempts` |"));
  EXPECT_THAT(read(dir.path / "metrics.md"), HasSubstr("`ductus_deliveries_total`"));
  EXPECT_THAT(read(dir.path / "audit.md"), HasSubstr("`message.resend`"));
  EXPECT_THAT(read(dir.path / "api.md"), HasSubstr("`POST /api/v1/"));

  auto same =
      run({ductus::test::ductusBinary(), "reference", "docs", "--check", dir.path.string()});
  EXPECT_EQ(exitCode(same), 0) << same.out;
  EXPECT_EQ(same.out, "");

  // An option the committed cli.md doesn't have (as when a flag is added
  // and the docs are not written again), and a file gone.
  std::string without = cli;
  auto at = without.find("  --stop-timeout");
  ASSERT_NE(at, std::string::npos);
  without.erase(at, without.find('\n', at) + 1 - at);
  std::ofstream(dir.path / "cli.md", std::ios::trunc) << without;
  fs::remove(dir.path / "audit.md");
  auto differ =
      run({ductus::test::ductusBinary(), "reference", "docs", "--check", dir.path.string()});
  EXPECT_EQ(exitCode(differ), 1) << differ.out;
  EXPECT_THAT(differ.out, HasSubstr((dir.path / "cli.md").string() + ": differs"));
  EXPECT_THAT(differ.out, HasSubstr((dir.path / "audit.md").string() + ": missing"));
  EXPECT_THAT(differ.out, Not(HasSubstr("api.md")));
  EXPECT_THAT(differ.out, HasSubstr("run `ductus reference docs " + dir.path.string() + "`"));
}

TEST(Reference, DocsDoNotDependOnWhoWritesThem) {
  TempDir a, b;
  auto first = run({ductus::test::ductusBinary(), "reference", "docs", a.path.string()});
  ASSERT_EQ(exitCode(first), 0) << first.out;
  // Another user's runtime folder, another environment, one core.
  auto second =
      run({"env", "XDG_RUNTIME_DIR=/tmp/elsewhere", "RUNTIME_DIRECTORY=/tmp/other",
           "DUCTUS_ENV=test", "DUCTUS_LOG_LEVEL=debug", "taskset", "-c", "0",
           ductus::test::ductusBinary(), "reference", "docs", "--check", a.path.string()});
  EXPECT_EQ(exitCode(second), 0) << second.out;
}

TEST(Reference, ManPagesForBothProgramsAndEachCommandRenderWithoutWarnings) {
  TempDir dir;
  auto wrote = run({ductus::test::ductusBinary(), "reference", "man", dir.path.string()});
  ASSERT_EQ(exitCode(wrote), 0) << wrote.out;
  for (const char* page : {"ductus.1", "ductusctl.1", "ductus-run.1", "ductus-secret-set.1",
                           "ductusctl-status.1", "ductus-reference-docs.1"})
    EXPECT_TRUE(fs::exists(dir.path / page)) << page;
  EXPECT_THAT(read(dir.path / "ductus-run.1"), HasSubstr("\\-\\-stop\\-timeout"));
  // groff as man runs it, every warning on: a page with a roff mistake
  // says so on stderr.
  for (auto& entry : fs::directory_iterator(dir.path)) {
    auto r = run({"groff", "-man", "-Tutf8", "-ww", "-z", entry.path().string()});
    EXPECT_EQ(exitCode(r), 0) << entry.path() << ": " << r.out;
    EXPECT_EQ(r.out, "") << entry.path();
  }
}

// Every example's files are valid to the schemas, and an interface with a
// key validate refuses (`retrys: 3`) is refused by them too.
TEST(Reference, SchemasAcceptEveryExampleAndRefuseAnUnknownKey) {
  fs::path node = fs::path(DUCTUS_SOURCE_DIR) / "tests/api/node";
  ASSERT_TRUE(fs::exists(node / "node_modules/ajv") && fs::exists(node / "node_modules/yaml"))
      << "the validator is not installed: run scripts/install-deps.sh (npm ci in " << node << ")";
  TempDir dir;
  auto wrote = run({ductus::test::ductusBinary(), "types", "--out", dir.path.string()});
  ASSERT_EQ(exitCode(wrote), 0) << wrote.out;

  std::vector<std::string> args = {"node", (node / "check_schemas.mjs").string(),
                                   dir.path.string()};
  int files = 0;
  for (auto& project : fs::directory_iterator(fs::path(DUCTUS_SOURCE_DIR) / "examples")) {
    if (!project.is_directory()) continue;
    for (auto [kind, name] : {std::pair{"ductus", "ductus.yaml"}, {"resources", "resources.yaml"}})
      if (fs::exists(project.path() / name)) {
        args.push_back(std::string(kind) + ":" + (project.path() / name).string());
        ++files;
      }
    for (auto& iface : fs::directory_iterator(project.path() / "interfaces")) {
      args.push_back("interface:" + (iface.path() / "interface.yaml").string());
      ++files;
    }
  }
  EXPECT_GE(files, 14);

  config::test::ProjectDir project;
  project.iface("retrying", R"(source:
  mllp: { listen: "127.0.0.1:2575" }
retrys: 3
destination:
  file: { path: out }
)");
  fs::path wrong = project.root() / "interfaces/retrying/interface.yaml";
  args.push_back("!interface:" + wrong.string());
  auto judged = run(args);
  EXPECT_EQ(exitCode(judged), 0) << judged.out;
  EXPECT_THAT(judged.out, HasSubstr("must NOT have additional properties (retrys)"));
  EXPECT_THAT(judged.out, Not(HasSubstr("WRONG")));

  // ... as validate refuses it.
  auto validate = run({ductus::test::ductusBinary(), "validate", project.root().string()});
  EXPECT_EQ(exitCode(validate), 1) << validate.out;
  EXPECT_THAT(validate.out, HasSubstr("unknown key `retrys`"));

  // The schemas' words are the loader's: a word validate refuses (a
  // durability it doesn't know) is refused by the schema.
  project.iface("retrying", R"(source:
  mllp: { listen: "127.0.0.1:2575" }
durability: eventually
destination:
  file: { path: out }
)");
  auto word = run({"node", (node / "check_schemas.mjs").string(), dir.path.string(),
                   "!interface:" + wrong.string()});
  EXPECT_EQ(exitCode(word), 0) << word.out;
}

// The table itself: every key that names a section names a real one, every
// section is reached from a file, and words kept beside another list (the
// monitor's states) are that list.
TEST(Reference, TheFormatTableHangsTogether) {
  using config::SectionId;
  using config::ValueKind;
  std::set<SectionId> reached;
  std::vector<SectionId> todo;
  for (auto& f : config::projectFiles()) todo.push_back(f.root);
  while (!todo.empty()) {
    SectionId id = todo.back();
    todo.pop_back();
    if (!reached.insert(id).second) continue;
    for (auto& k : config::section(id).keys) {
      bool names = k.kind == ValueKind::Section || k.kind == ValueKind::Named ||
                   k.kind == ValueKind::SectionList;
      EXPECT_EQ(names, k.section != SectionId::Count) << config::sectionName(id) << "." << k.name;
      if (names) todo.push_back(k.section);
      if (k.kind == ValueKind::Choice) {
        EXPECT_FALSE(k.choices.empty()) << k.name;
      }
      if (k.kind == ValueKind::Whole || k.kind == ValueKind::Duration ||
          k.kind == ValueKind::Size) {
        EXPECT_LE(k.min, k.max) << k.name;
      }
      EXPECT_FALSE(k.meaning.empty()) << config::sectionName(id) << "." << k.name;
    }
  }
  EXPECT_EQ(reached.size(), static_cast<size_t>(SectionId::Count));
  std::vector<std::string_view> states;
  for (auto s : config::section(SectionId::Rule).key("when").choices) states.push_back(s);
  for (auto s : states) {
    auto parsed = monitor::parseState(std::string(s));
    ASSERT_TRUE(parsed) << s;
    EXPECT_NE(*parsed, monitor::State::Ok);
  }
}

}  // namespace
}  // namespace ductus::supervisor::test
