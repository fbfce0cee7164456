// `ductus check --database URL`, the real binary: it must finish. It used to
// print PostgreSQL's version and then wait forever (its loop ran until no
// handle was left, and a connected PgConnection always watches its
// socket); a database that is down or silent must fail it within the
// connect timeout, saying why.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/fd.h"
#include "tests/support/exit_status.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Run {
  int exit = -1;  // 124: timeout(1) stopped it
  std::string out;
  Clock::duration took{};
};

// `ductus check --database url` under timeout(1), stderr folded into stdout.
Run check(const std::string& url, int limitSeconds = 20) {
  auto t0 = Clock::now();
  auto r = runChild({"/bin/sh", "-c", "exec timeout \"$0\" \"$@\" 2>&1",
                     std::to_string(limitSeconds), ductusBinary(), "check", "--database", url});
  Run out;
  out.took = Clock::now() - t0;
  out.exit = ::ductus::test::exitCode(r.exitStatus);
  out.out = std::move(r.out);
  return out;
}

TEST(CheckCommand, FinishesWithExitZeroOnceTheDatabaseHasAnswered) {
  std::string url = databaseUrl();
  ASSERT_FALSE(url.empty());
  auto r = check(url);
  ASSERT_NE(r.exit, 124) << "ductus check did not finish within 20 s:\n" << r.out;
  EXPECT_EQ(r.exit, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("postgres     PostgreSQL 1")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("check passed")) << r.out;
  EXPECT_LT(r.took, 20s);
}

TEST(CheckCommand, ADatabaseNothingListensForFailsSayingSo) {
  auto r = check("postgresql://127.0.0.1:1/x");
  ASSERT_NE(r.exit, 124) << "ductus check did not finish within 20 s:\n" << r.out;
  EXPECT_EQ(r.exit, 1) << r.out;
  EXPECT_THAT(r.out,
              HasSubstr("FAIL postgres: connection to server at \"127.0.0.1\", port 1 failed"))
      << r.out;
  EXPECT_THAT(r.out, HasSubstr("check FAILED")) << r.out;
  // Refused at once: well within the 10 s connect timeout.
  EXPECT_LT(r.took, 10s);
}

TEST(CheckCommand, ADatabaseThatNeverAnswersFailsAfterTheConnectTimeout) {
  // Accepts (the kernel completes the handshake) and never says a word.
  Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_GE(listener.get(), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener.get(), 8), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  std::string port = std::to_string(ntohs(a.sin_port));

  auto r = check("postgresql://127.0.0.1:" + port + "/x?connect_timeout=2");
  ASSERT_NE(r.exit, 124) << "ductus check did not finish within 20 s:\n" << r.out;
  EXPECT_EQ(r.exit, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("FAIL postgres: no connection to 127.0.0.1:" + port +
                               " within 2 s (connect_timeout)"))
      << r.out;
  EXPECT_GE(r.took, 1900ms);
  EXPECT_LT(r.took, 15s);
}

}  // namespace
}  // namespace ductus::test
