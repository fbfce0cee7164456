// The command line of `ductus` and `ductusctl` as people type it: help in
// both spellings, missing values, unknown words, the project always
// positional, environment fallbacks said in --help, the version with its
// commit, and `worker` left to the worker's own parser. The real binaries.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/config/project_dir.h"
#include "tests/support/exit_status.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

constexpr const char* kKey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

int exitCode(const ChildOutput& r) {
  return ::ductus::test::exitCode(r.exitStatus);
}

std::string ductusctlBinary() {
  return (fs::path(ductusBinary()).parent_path() / "ductusctl").string();
}

// Runs argv with stderr folded into stdout; $0 and "$@" pass the arguments
// through the shell untouched.
ChildOutput runBoth(const std::vector<std::string>& argv) {
  std::vector<std::string> full = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1"};
  full.insert(full.end(), argv.begin(), argv.end());
  return runChild(full);
}

// Only what the program wrote to stderr.
ChildOutput runStderr(const std::vector<std::string>& argv) {
  std::vector<std::string> full = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1 >/dev/null"};
  full.insert(full.end(), argv.begin(), argv.end());
  return runChild(full);
}

ChildOutput ductus(std::vector<std::string> args) {
  args.insert(args.begin(), ductusBinary());
  return runBoth(args);
}

const std::vector<std::vector<std::string>> kCommands = {
    {"run"},          {"dev"},      {"check"},         {"migrate"},
    {"upgrade"},      {"secret"},   {"secret", "set"}, {"secret", "list"},
    {"secret", "rm"}, {"validate"}, {"test"},          {"version"},
    {"help"}};

std::string joined(const std::vector<std::string>& words) {
  std::string s;
  for (auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

TEST(CommandLine, HelpCommandPrintsWhatHelpOptionPrints) {
  for (auto& command : kCommands) {
    std::vector<std::string> asWord = {"help"}, asOption = command;
    asWord.insert(asWord.end(), command.begin(), command.end());
    asOption.push_back("--help");
    auto word = ductus(asWord), option = ductus(asOption);
    EXPECT_EQ(exitCode(word), 0) << joined(asWord) << ":\n" << word.out;
    EXPECT_EQ(exitCode(option), 0) << joined(asOption) << ":\n" << option.out;
    EXPECT_EQ(word.out, option.out) << joined(command);
    EXPECT_THAT(word.out, HasSubstr("Usage: ductus " + joined(command))) << word.out;
  }
}

TEST(CommandLine, HelpListsEveryCommandWithWhatItDoes) {
  auto word = ductus({"help"}), option = ductus({"--help"}), shortOption = ductus({"-h"});
  EXPECT_EQ(exitCode(word), 0);
  EXPECT_EQ(exitCode(option), 0);
  EXPECT_EQ(word.out, option.out);
  EXPECT_EQ(word.out, shortOption.out);
  for (const char* line :
       {"run the engine on a project", "run the engine on a project with a throwaway PostgreSQL",
        "check this installation", "apply the database migrations", "list pending migrations",
        "encrypted secrets", "check a project's files", "run the interfaces' *.test.js",
        "print the version", "print a command's options", "(internal) a confined script worker"})
    EXPECT_THAT(word.out, HasSubstr(line)) << word.out;
}

// Nothing at all, or a command without its subcommand: the help, on stderr
// (stdout may be a pipe into something expecting an answer), exit 2.
TEST(CommandLine, AMissingCommandPrintsTheHelpToStderr) {
  auto none = runStderr({ductusBinary()});
  EXPECT_EQ(exitCode(none), 2);
  EXPECT_THAT(none.out, HasSubstr("validate")) << none.out;
  auto secret = runStderr({ductusBinary(), "secret"});
  EXPECT_EQ(exitCode(secret), 2);
  EXPECT_THAT(secret.out, AllOf(HasSubstr("Usage: ductus secret"), HasSubstr("set"),
                                HasSubstr("list"), HasSubstr("rm")))
      << secret.out;
}

TEST(CommandLine, AnOptionWithoutItsValueSaysItNeedsOne) {
  fs::path project = fs::path(DUCTUS_SOURCE_DIR) / "examples/adt-feed";
  auto r = ductus({"validate", project.string(), "--env"});
  EXPECT_EQ(exitCode(r), 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("ductus validate: --env needs a value")) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("unknown option"))) << r.out;

  // Every command's options, the same way.
  auto database = ductus({"migrate", "--database"});
  EXPECT_EQ(exitCode(database), 2) << database.out;
  EXPECT_THAT(database.out, HasSubstr("ductus migrate: --database needs a value")) << database.out;
  auto env = ductus({"secret", "list", "--env"});
  EXPECT_EQ(exitCode(env), 2) << env.out;
  EXPECT_THAT(env.out, HasSubstr("ductus secret list: --env needs a value")) << env.out;
}

TEST(CommandLine, AValueThatDoesNotReadIsRefusedBeforeAnythingStarts) {
  auto timeout = ductus({"run", "--stop-timeout", "soon"});
  EXPECT_EQ(exitCode(timeout), 2) << timeout.out;
  EXPECT_THAT(timeout.out,
              HasSubstr("--stop-timeout: expected a duration such as 30s, got `soon`"));
  auto format = ductus({"dev", "--log-format", "xml"});
  EXPECT_EQ(exitCode(format), 2) << format.out;
  EXPECT_THAT(format.out, HasSubstr("--log-format: expected text or json, got `xml`"));
}

TEST(CommandLine, UnknownCommandsAndOptionsAreNamedAndExitTwo) {
  auto command = ductus({"frobnicate"});
  EXPECT_EQ(exitCode(command), 2);
  EXPECT_THAT(command.out,
              StartsWith("ductus: unknown command 'frobnicate' (see `ductus --help`)"));

  auto option = ductus({"validate", "--frob"});
  EXPECT_EQ(exitCode(option), 2);
  EXPECT_THAT(
      option.out,
      StartsWith("ductus validate: unknown option '--frob' (see `ductus validate --help`)"));

  auto action = ductus({"secret", "show", "X"});
  EXPECT_EQ(exitCode(action), 2);
  EXPECT_THAT(action.out, StartsWith("ductus secret: unknown command 'show'"));

  auto extra = ductus({"test", "a", "b"});
  EXPECT_EQ(exitCode(extra), 2);
  EXPECT_THAT(extra.out, StartsWith("ductus test: unexpected argument 'b'"));

  auto help = ductus({"help", "frobnicate"});
  EXPECT_EQ(exitCode(help), 2);
  EXPECT_THAT(help.out, HasSubstr("unknown command 'frobnicate'"));

  auto global = ductus({"--frob"});
  EXPECT_EQ(exitCode(global), 2);
  EXPECT_THAT(global.out, StartsWith("ductus: unknown option '--frob'"));
}

// Each option and argument in every --help has its one-line description:
// CLI11 puts it beside the name, or on the next line when the name is long.
TEST(CommandLine, EveryOptionInEveryHelpIsDescribed) {
  for (auto& command : kCommands) {
    std::vector<std::string> args = command;
    args.push_back("--help");
    auto r = ductus(args);
    std::istringstream in(r.out);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    bool inList = false;
    int entries = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& l = lines[i];
      if (l == "Options:" || l == "Positionals:" || l == "Commands:") {
        inList = true;
        continue;
      }
      if (l.empty() || l[0] != ' ') {
        inList = false;
        continue;
      }
      if (!inList || l.size() < 3 || l[2] == ' ') continue;  // a description's own line
      ++entries;
      auto gap = l.find("  ", 2);
      bool beside = gap != std::string::npos && l.find_first_not_of(' ', gap) != std::string::npos;
      bool below = i + 1 < lines.size() && lines[i + 1].starts_with("    ") &&
                   lines[i + 1].find_first_not_of(' ') != std::string::npos;
      EXPECT_TRUE(beside || below) << joined(command) << ": `" << l << "` has no description\n"
                                   << r.out;
    }
    EXPECT_GT(entries, 0) << joined(command) << ":\n" << r.out;
  }
}

TEST(CommandLine, HelpSaysWhichOptionsFallBackOnTheEnvironment) {
  EXPECT_THAT(ductus({"check", "--help"}).out, HasSubstr("DUCTUS_DATABASE_URL"));
  EXPECT_THAT(ductus({"migrate", "--help"}).out, HasSubstr("DUCTUS_DATABASE_URL"));
  EXPECT_THAT(ductus({"upgrade", "--help"}).out, HasSubstr("DUCTUS_DATABASE_URL"));
  EXPECT_THAT(ductus({"run", "--help"}).out, HasSubstr("DUCTUS_DATABASE_URL"));
  for (auto& command : std::vector<std::vector<std::string>>{{"run"},
                                                             {"dev"},
                                                             {"validate"},
                                                             {"secret", "set"},
                                                             {"secret", "list"},
                                                             {"secret", "rm"}}) {
    std::vector<std::string> args = command;
    args.push_back("--help");
    auto help = ductus(args).out;
    EXPECT_THAT(help, HasSubstr("(Env:DUCTUS_ENV)")) << joined(command) << ":\n" << help;
    EXPECT_THAT(help, HasSubstr("DUCTUS_SECRETS_KEY")) << joined(command) << ":\n" << help;
  }
  EXPECT_THAT(ductus({"dev", "--help"}).out, HasSubstr("DUCTUS_PGBIN"));
}

// `ductus check` reads the variable through CLI11 now: said in --help and
// still honoured (an unreachable database fails the check by name).
TEST(CommandLine, CheckStillReadsTheDatabaseFromTheEnvironment) {
  auto r = runBoth({"/usr/bin/env", "DUCTUS_DATABASE_URL=host=/nonexistent-ductus-socket-dir",
                    ductusBinary(), "check"});
  EXPECT_EQ(exitCode(r), 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("FAIL postgres")) << r.out;
}

class SecretProject : public ::testing::Test {
 protected:
  ChildOutput secret(const std::vector<std::string>& args, const std::string& stdinText = "",
                     const std::vector<std::string>& env = {}) {
    std::vector<std::string> full = {"/bin/sh", "-c", "printf %s \"$0\" | exec env \"$@\" 2>&1",
                                     stdinText, "DUCTUS_SECRETS_KEY=" + std::string(kKey)};
    full.insert(full.end(), env.begin(), env.end());
    full.push_back(ductusBinary());
    full.push_back("secret");
    full.insert(full.end(), args.begin(), args.end());
    return runChild(full);
  }
  config::test::ProjectDir project_;
};

TEST_F(SecretProject, TheProjectIsPositionalAfterTheName) {
  std::string dir = project_.root().string();
  auto set = secret({"set", "LAB_TOKEN", dir, "--env", "test"}, "tok");
  EXPECT_EQ(exitCode(set), 0) << set.out;
  EXPECT_TRUE(fs::exists(project_.root() / "secrets/test.json"));
  EXPECT_EQ(secret({"list", dir, "--env", "test"}).out, "LAB_TOKEN\n");
  // Options go anywhere after the action.
  EXPECT_EQ(secret({"list", "--env", "test", dir}).out, "LAB_TOKEN\n");
  auto rm = secret({"rm", "LAB_TOKEN", dir, "--env", "test"});
  EXPECT_EQ(exitCode(rm), 0) << rm.out;
  EXPECT_EQ(secret({"list", dir, "--env", "test"}).out, "");
}

TEST_F(SecretProject, TheProjectDefaultsToTheCurrentFolder) {
  std::string dir = project_.root().string();
  std::vector<std::string> full = {
      "/bin/sh",
      "-c",
      "cd \"$0\" && printf v | DUCTUS_SECRETS_KEY=$1 \"$2\" secret set "
      "HERE 2>&1",
      dir,
      kKey,
      ductusBinary()};
  auto set = runChild(full);
  EXPECT_EQ(exitCode(set), 0) << set.out;
  EXPECT_EQ(secret({"list", dir}).out, "HERE\n");
}

TEST_F(SecretProject, TheOldProjectOptionIsGone) {
  auto r = secret({"list", "--project", project_.root().string()});
  EXPECT_EQ(exitCode(r), 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("unknown option '--project'")) << r.out;
}

TEST_F(SecretProject, TheEnvironmentComesFromDuctusEnvWhenNotGiven) {
  std::string dir = project_.root().string();
  ASSERT_EQ(exitCode(secret({"set", "ONLY_IN_TEST", dir}, "v", {"DUCTUS_ENV=test"})), 0);
  EXPECT_TRUE(fs::exists(project_.root() / "secrets/test.json"));
  EXPECT_FALSE(fs::exists(project_.root() / "secrets/prod.json"));
  EXPECT_EQ(secret({"list", dir, "--env", "test"}).out, "ONLY_IN_TEST\n");
  // The option wins over the variable.
  EXPECT_EQ(secret({"list", dir, "--env", "prod"}, "", {"DUCTUS_ENV=test"}).out, "");
}

TEST_F(SecretProject, ANameThatIsNotOneIsAUsageError) {
  auto r = secret({"set", "9lives", project_.root().string()}, "v");
  EXPECT_EQ(exitCode(r), 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("`9lives` is not a valid name")) << r.out;
  auto missing = secret({"rm"});
  EXPECT_EQ(exitCode(missing), 2) << missing.out;
  EXPECT_THAT(missing.out, HasSubstr("NAME is required")) << missing.out;
}

// The hash the binary was built from: HEAD of this checkout when the tests
// run from one (scripts/test builds first, and CMake configures again when
// HEAD moves), else "unknown".
std::string expectedCommit() {
  auto head =
      runChild({"/bin/sh", "-c", "git -C \"$0\" rev-parse HEAD 2>/dev/null", DUCTUS_SOURCE_DIR});
  if (exitCode(head) != 0 || head.out.size() < 8) return "unknown";
  return head.out.substr(0, head.out.size() - 1);
}

void expectVersionLine(const std::string& program, const std::string& out) {
  EXPECT_THAT(out, MatchesRegex(program +
                                " [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit ([0-9a-f]{7,}|unknown)\\)\n"))
      << out;
  auto open = out.find("(commit "), close = out.find(')');
  ASSERT_NE(open, std::string::npos);
  std::string commit = out.substr(open + 8, close - open - 8);
  std::string expected = expectedCommit();
  if (expected == "unknown")
    EXPECT_EQ(commit, "unknown");
  else
    EXPECT_THAT(expected, StartsWith(commit))
        << "built from " << commit << ", HEAD is " << expected;
}

TEST(CommandLine, VersionSaysTheCommitInBothSpellingsAndBothBinaries) {
  auto option = ductus({"--version"}), word = ductus({"version"});
  EXPECT_EQ(exitCode(option), 0);
  EXPECT_EQ(exitCode(word), 0);
  EXPECT_EQ(option.out, word.out);
  expectVersionLine("ductus", option.out);

  auto ctlOption = runBoth({ductusctlBinary(), "--version"});
  auto ctlWord = runBoth({ductusctlBinary(), "version"});
  EXPECT_EQ(exitCode(ctlOption), 0);
  EXPECT_EQ(ctlOption.out, ctlWord.out);
  expectVersionLine("ductusctl", ctlOption.out);
  EXPECT_EQ(ctlOption.out.substr(ctlOption.out.find(' ')), option.out.substr(option.out.find(' ')));
}

TEST(CommandLine, DuctusctlHasTheSameHelpAndErrors) {
  auto help = runBoth({ductusctlBinary(), "help"});
  EXPECT_EQ(exitCode(help), 0);
  EXPECT_EQ(help.out, runBoth({ductusctlBinary(), "--help"}).out);
  EXPECT_THAT(help.out, AllOf(HasSubstr("version"), HasSubstr("control socket")));
  EXPECT_EQ(runBoth({ductusctlBinary(), "help", "version"}).out,
            runBoth({ductusctlBinary(), "version", "--help"}).out);
  auto unknown = runBoth({ductusctlBinary(), "frobnicate"});
  EXPECT_EQ(exitCode(unknown), 2);
  EXPECT_THAT(unknown.out, StartsWith("ductusctl: unknown command 'frobnicate'"));
}

// `worker` is parsed by worker_main alone, as the engine starts it: its
// errors and help are worker_main's, and `help worker` shows the same.
TEST(CommandLine, WorkerKeepsItsOwnArguments) {
  auto help = ductus({"worker", "--help"});
  EXPECT_EQ(exitCode(help), 0);
  EXPECT_THAT(help.out, HasSubstr("usage: ductus worker --fd N [--heap-mb MB]"));
  EXPECT_EQ(ductus({"help", "worker"}).out, help.out);

  auto bad = ductus({"worker", "--fd", "x"});
  EXPECT_EQ(exitCode(bad), 2);
  EXPECT_THAT(bad.out, HasSubstr("ductus worker: bad value 'x' for --fd"));
  auto unknown = ductus({"worker", "--frob"});
  EXPECT_EQ(exitCode(unknown), 2);
  EXPECT_THAT(unknown.out, HasSubstr("ductus worker: unknown option '--frob'"));

  auto probe = ductus({"worker", "--probe"});
  EXPECT_EQ(exitCode(probe), 0) << probe.out;
  EXPECT_THAT(probe.out, HasSubstr("socket: EPERM"));
}

}  // namespace
}  // namespace ductus::test
