// Shared helpers for the tests: where the built binary is, the throwaway
// database, running child processes.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ductus::test {

// The throwaway cluster's connection string from DUCTUS_TEST_DATABASE_URL.
// Fails the current test (and returns "") when unset: tests never guess at a
// cluster they did not start; run them through scripts/test.
std::string databaseUrl();

// The ductus binary under test.
inline const char* ductusBinary() { return DUCTUS_BINARY; }

// A file's bytes, whole; empty when it can't be read (the test's
// assertion on the text then says what was missing).
std::string fileText(const std::filesystem::path& file);

struct ChildOutput {
  int exitStatus = -1;  // waitpid status
  std::string out;
};

// Runs argv (no shell) and collects stdout; stderr passes through.
ChildOutput runChild(const std::vector<std::string>& argv);

struct SplitOutput {
  int code = -1;  // the exit code; -1 when it did not exit (a signal)
  std::string out, err;
};
// Runs argv (no shell; argv[0] looked up in PATH) and collects stdout and
// stderr apart, as a command's user reads them.
SplitOutput runSplit(const std::vector<std::string>& argv);

}  // namespace ductus::test
