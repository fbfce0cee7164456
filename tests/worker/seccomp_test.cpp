// One test per promise of the worker's seccomp policy, each in a child
// process (a filter cannot be removed), as Chromium's BPF_TEST_C does.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/sched.h>
#include <sys/socket.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
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

// clone3 passes its flags in memory the filter cannot read, so it is
// refused whatever they say: ENOSYS, which makes glibc fall back to clone,
// whose flags the filter checks. A raw call that asks for a new process
// must neither succeed nor make one (a success would return its pid here,
// and 0 in the child).
TEST(WorkerSeccomp, ARawClone3FailsWithEnosysAndStartsNoProcess) {
  EXPECT_EXIT(confinedThen([] {
                clone_args args{};
                args.exit_signal = SIGCHLD;
                long r = syscall(SYS_clone3, &args, sizeof args);
                if (r == 0) _exit(0);  // the child of a clone3 that got through
                return r < 0 && errno == ENOSYS;
              }),
              testing::ExitedWithCode(0), "");
}

TEST(WorkerSeccomp, VforkFailsWithEpermAndStartsNoProcess) {
  EXPECT_EXIT(confinedThen([] {
                pid_t p = vfork();
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

// Starts a thread, then confines the process, then has that thread try to
// open a file. Exits 0 if the thread was refused.
[[noreturn]] void threadStartedFirstTriesToOpen() {
  std::atomic<int> stage{0};
  std::atomic<bool> refused{false};
  std::thread early([&] {
    while (stage.load() == 0) std::this_thread::yield();
    int fd = open("/etc/hostname", O_RDONLY);
    refused = fd < 0 && errno == EPERM;
    stage = 2;
  });
  if (!confineProcess({}).ok()) _exit(3);
  stage = 1;
  early.join();
  _exit(refused ? 0 : 1);
}

TEST(WorkerSeccomp, AThreadStartedBeforeConfinementIsConfinedToo) {
  // V8's platform thread and the watchdog exist before the filter is
  // installed: the filter must reach them as well.
  EXPECT_EXIT(threadStartedFirstTriesToOpen(), testing::ExitedWithCode(0), "");
}

TEST(WorkerSeccomp, SignalsAndLimitsReachNoOtherProcess) {
  pid_t parent = getpid();
  EXPECT_EXIT(confinedThen([parent] {
                bool signalRefused = syscall(SYS_tgkill, parent, parent, 0) < 0 && errno == EPERM;
                bool killRefused = kill(parent, 0) < 0 && errno == EPERM;
                rlimit r{};
                bool limitRefused =
                    syscall(SYS_prlimit64, parent, RLIMIT_NOFILE, nullptr, &r) < 0 && errno == EPERM;
                bool ownLimitRead = getrlimit(RLIMIT_NOFILE, &r) == 0;
                bool ownSignal = syscall(SYS_tgkill, getpid(), gettid(), 0) == 0;
                return signalRefused && killRefused && limitRefused && ownLimitRead && ownSignal;
              }),
              testing::ExitedWithCode(0), "");
}

TEST(WorkerSeccomp, NoLimitCanBeRaisedOrSet) {
  EXPECT_EXIT(confinedThen([] {
                rlimit r{0, 0};
                return setrlimit(RLIMIT_CORE, &r) < 0 && errno == EPERM;
              }),
              testing::ExitedWithCode(0), "");
}

TEST(WorkerSeccomp, SchedulingAndPrioritiesOfOthersAreRefused) {
  pid_t parent = getpid();
  EXPECT_EXIT(confinedThen([parent] {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(0, &set);
                bool affinity =
                    sched_setaffinity(parent, sizeof set, &set) < 0 && errno == EPERM;
                bool priority = setpriority(PRIO_PROCESS, parent, 10) < 0 && errno == EPERM;
                bool own = setpriority(PRIO_PROCESS, 0, 1) == 0;
                return affinity && priority && own;
              }),
              testing::ExitedWithCode(0), "");
}

TEST(WorkerSeccomp, AStatOfAPathIsRefused) {
  EXPECT_EXIT(confinedThen([] {
                struct stat st{};
                return stat("/etc/hostname", &st) < 0 && errno == EPERM;
              }),
              testing::ExitedWithCode(0), "");
}

TEST(WorkerSeccomp, OnlyATerminalQueryIoctlIsAllowed) {
  EXPECT_EXIT(confinedThen([] {
                int fds[2];
                if (pipe(fds) != 0) return false;
                int n = 0;
                bool fionread = ioctl(fds[0], FIONREAD, &n) < 0 && errno == EPERM;
                (void)isatty(fds[0]);  // TCGETS: allowed, answers "not a terminal"
                return fionread && errno == ENOTTY;
              }),
              testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace ductus::worker
