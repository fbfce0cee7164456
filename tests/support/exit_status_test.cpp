// exitedWith: a death by signal is no exit 0 (WEXITSTATUS alone reads it so).
#include "tests/support/exit_status.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ductus::test {
namespace {

int statusOfAChildThat(void (*body)()) {
  pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = -1;
  waitpid(pid, &status, 0);
  return status;
}

TEST(ExitStatus, ADeathBySignalFailsNamingTheSignal) {
  int killed = statusOfAChildThat([] { raise(SIGKILL); });
  ASSERT_EQ(WEXITSTATUS(killed), 0);  // what the old checks read
  auto r = exitedWith(killed, 0);
  EXPECT_FALSE(r);
  EXPECT_STREQ(r.message(), "expected to exit with 0, killed by signal 9 (KILL)");
  EXPECT_NONFATAL_FAILURE(EXPECT_EQ(exitCode(killed), -1), "killed by signal 9 (KILL)");
}

TEST(ExitStatus, AnExitIsItsCode) {
  int three = statusOfAChildThat([] { _exit(3); });
  EXPECT_TRUE(exitedWith(three, 3));
  EXPECT_FALSE(exitedWith(three, 0));
  EXPECT_STREQ(exitedWith(three, 0).message(), "expected to exit with 0, exited with 3");
  EXPECT_EQ(exitCode(three), 3);
  EXPECT_FALSE(exitedWith(-1, 0));  // never waited for
}

}  // namespace
}  // namespace ductus::test
