// How a child process ended, for assertions. WEXITSTATUS alone reads a
// death by signal as exit 0 (its bits are 0), so every test asks here:
//   EXPECT_TRUE(exitedWith(status, 0)) << log;
// and a crash fails naming its signal instead of passing.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstring>
#include <string>

namespace ductus::test {

// "exited with 3", "killed by signal 11 (SEGV)", or why there is no status.
inline std::string describeExit(int status) {
  if (status == -1) return "no exit status (still running, or not waited for)";
  if (WIFEXITED(status)) return "exited with " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) + " (" + (name ? name : "unknown") + ")" +
           (WCOREDUMP(status) ? ", core dumped" : "");
  }
  return "wait status " + std::to_string(status);
}

// Exited, with this code; anything else fails with describeExit().
inline ::testing::AssertionResult exitedWith(int status, int code) {
  if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == code)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected to exit with " << code << ", "
                                       << describeExit(status);
}

// The exit code, for tests that compare codes; a child that did not exit
// adds a failure naming its signal and gives -1.
inline int exitCode(int status) {
  if (status != -1 && WIFEXITED(status)) return WEXITSTATUS(status);
  ADD_FAILURE() << "the child did not exit: " << describeExit(status);
  return -1;
}

}  // namespace ductus::test
