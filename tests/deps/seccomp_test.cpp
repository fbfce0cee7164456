// One test per promise of the worker's seccomp policy, each in a child
// process (a filter cannot be removed), as Chromium's BPF_TEST_C does.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "worker/confine.h"

namespace ductus::worker {
namespace {

// Exits 0 if `fn` returned true after confinement, 1 if false, 3 if
// confinement itself failed.
template <typename Fn>
void confinedThen(Fn fn) {
  if (!confineProcess({}).ok()) _exit(3);
  _exit(fn() ? 0 : 1);
}

TEST(WorkerSeccomp, OpeningAFileFailsWithEperm) {
  EXPECT_EXIT(confinedThen([] { return open("/etc/hostname", O_RDONLY) < 0 && errno == EPERM; }),
              testing::ExitedWithCode(0), "");
}

TEST(WorkerSeccomp, OpeningASocketFailsWithEperm) {
  EXPECT_EXIT(confinedThen([] { return socket(AF_UNIX, SOCK_STREAM, 0) < 0 && errno == EPERM; }),
              testing::ExitedWithCode(0), "");
}

TEST(WorkerSeccomp, StartingAProcessFailsWithEperm) {
  EXPECT_EXIT(confinedThen([] {
                pid_t p = fork();
                if (p == 0) _exit(0);
                return p < 0 && errno == EPERM;
              }),
              testing::ExitedWithCode(0), "");
}

TEST(WorkerSeccomp, ExecFailsWithEperm) {
  EXPECT_EXIT(confinedThen([] {
                char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
                execve("/bin/true", argv, nullptr);
                return errno == EPERM;
              }),
              testing::ExitedWithCode(0), "");
}

TEST(WorkerSeccomp, ThreadsStillStart) {
  EXPECT_EXIT(confinedThen([] {
                int x = 0;
                std::thread t([&] { x = 42; });
                t.join();
                return x == 42;
              }),
              testing::ExitedWithCode(0), "");
}

TEST(WorkerSeccomp, ExistingDescriptorsStillWork) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  EXPECT_EXIT(confinedThen([&] {
                char c = 'x';
                return write(fds[0], &c, 1) == 1 && read(fds[1], &c, 1) == 1 && c == 'x';
              }),
              testing::ExitedWithCode(0), "");
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace ductus::worker
