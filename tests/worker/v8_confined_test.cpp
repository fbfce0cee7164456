// V8 runs inside a separate, seccomp-confined process: the real binary's
// `ductus worker --probe` makes an isolate, confines itself exactly as a
// worker does, runs a script, and reports what the kernel let it do.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/fd.h"
#include "tests/support/exit_status.h"
#include "tests/support/test_env.h"

extern char** environ;

namespace ductus {
namespace {

struct HeldProbe {
  pid_t pid = -1;
  Fd stdinWrite;
  Fd stdoutRead;
};

HeldProbe startHeldProbe() {
  int in[2], out[2];
  EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  const char* args[] = {test::ductusBinary(), "worker", "--probe", "--hold", nullptr};
  HeldProbe p;
  EXPECT_EQ(posix_spawn(&p.pid, args[0], &fa, nullptr, const_cast<char**>(args), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  p.stdinWrite = Fd(in[1]);
  p.stdoutRead = Fd(out[0]);
  return p;
}

// Reads until the line starting with `marker` is complete.
std::string readLineOf(int fd, const std::string& marker) {
  std::string out;
  char buf[1024];
  auto complete = [&] {
    auto at = out.find(marker);
    return at != std::string::npos && out.find('\n', at) != std::string::npos;
  };
  while (!complete()) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, n);
  }
  return out;
}

TEST(V8Confined, AScriptRunsAfterTheSeccompFilterAndSocketsAreRefused) {
  HeldProbe p = startHeldProbe();
  std::string out = readLineOf(p.stdoutRead.get(), "fork:");

  // JSON, RegExp and ICU all work inside the confined process.
  EXPECT_NE(out.find(R"(script: {"v":[2,4,6],"re":"bbb","n":"1.234,5"})"), std::string::npos)
      << out;
  EXPECT_NE(out.find("v8: 10.2"), std::string::npos) << out;
  EXPECT_NE(out.find("socket: EPERM"), std::string::npos) << out;
  EXPECT_NE(out.find("open: EPERM"), std::string::npos) << out;
  EXPECT_NE(out.find("fork: EPERM"), std::string::npos) << out;

  // While it runs, the kernel reports it as filtered (mode 2).
  std::ifstream status("/proc/" + std::to_string(p.pid) + "/status");
  std::stringstream ss;
  ss << status.rdbuf();
  EXPECT_NE(ss.str().find("Seccomp:\t2"), std::string::npos) << ss.str();
  EXPECT_NE(ss.str().find("NoNewPrivs:\t1"), std::string::npos) << ss.str();

  p.stdinWrite.reset();  // lets the probe exit
  int st = 0;
  ASSERT_EQ(waitpid(p.pid, &st, 0), p.pid);
  EXPECT_TRUE(test::exitedWith(st, 0));
}

TEST(V8Confined, DuctusCheckReportsAConfinedWorker) {
  auto r = test::runChild({test::ductusBinary(), "check"});
  EXPECT_TRUE(test::exitedWith(r.exitStatus, 0)) << r.out;
  EXPECT_NE(r.out.find("check passed"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ductus
