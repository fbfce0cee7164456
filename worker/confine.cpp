#include "worker/confine.h"

#include <linux/capability.h>
#include <linux/sched.h>
#include <linux/securebits.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <initializer_list>
#include <memory>

#include "common/sanitizers.h"

namespace ductus::worker {
namespace {

constexpr bool kSanitized = DUCTUS_ASAN;

struct CtxFree {
  void operator()(scmp_filter_ctx c) const { seccomp_release(c); }
};
using Filter = std::unique_ptr<void, CtxFree>;

// Memory management V8 and malloc need for the heap, code space and stacks.
constexpr std::initializer_list<int> kMemory = {
    SCMP_SYS(brk),      SCMP_SYS(mmap),     SCMP_SYS(munmap),        SCMP_SYS(mprotect),
    SCMP_SYS(mremap),   SCMP_SYS(madvise),  SCMP_SYS(membarrier),    SCMP_SYS(mincore),
    SCMP_SYS(pkey_alloc), SCMP_SYS(pkey_free), SCMP_SYS(pkey_mprotect)};

// Threads (V8's platform workers and our watchdog) and their synchronisation.
// Calls that name another process or thread are added below, narrowed to
// this process (kOwnTarget).
constexpr std::initializer_list<int> kThreads = {
    SCMP_SYS(futex),          SCMP_SYS(set_robust_list), SCMP_SYS(get_robust_list),
    SCMP_SYS(rseq),           SCMP_SYS(set_tid_address), SCMP_SYS(sched_yield),
    SCMP_SYS(gettid),         SCMP_SYS(getpid),          SCMP_SYS(getppid),
    SCMP_SYS(getuid),         SCMP_SYS(geteuid),         SCMP_SYS(getgid),
    SCMP_SYS(getegid),        SCMP_SYS(exit),            SCMP_SYS(exit_group)};

// Scheduling calls that change the target named by their first argument:
// allowed only for 0, "the calling thread" (V8 sets its own threads'
// priority that way), so a script that escaped V8 cannot reach the
// supervisor or a neighbour.
constexpr std::initializer_list<int> kOwnThreadOnly = {SCMP_SYS(sched_setaffinity),
                                                       SCMP_SYS(sched_setscheduler)};

// Their reading halves name a thread by its id (glibc's pthread_getattr_np,
// which every new thread of the sanitizer build calls, asks for its own
// tid's affinity), and a filter cannot tell our tids from others'. They
// change nothing.
constexpr std::initializer_list<int> kSchedulingReads = {
    SCMP_SYS(sched_getaffinity), SCMP_SYS(sched_getparam), SCMP_SYS(sched_getscheduler)};

// Time, for Date.now(), performance and deadlines.
constexpr std::initializer_list<int> kTime = {
    SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(gettimeofday),
    SCMP_SYS(time), SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep)};

// Signals: V8 and the sanitizers install handlers; abort() raises SIGABRT.
constexpr std::initializer_list<int> kSignals = {
    SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn),
    SCMP_SYS(sigaltstack), SCMP_SYS(restart_syscall)};

// I/O on descriptors the worker already holds: its socket to the supervisor,
// stdout/stderr. Nothing here can name a new file or address: newfstatat
// (glibc's fstat) takes a path too, so it is refused, and stdio does
// without (it only sizes a buffer with it).
constexpr std::initializer_list<int> kExistingFds = {
    SCMP_SYS(read),    SCMP_SYS(write),   SCMP_SYS(readv),    SCMP_SYS(writev),
    SCMP_SYS(pread64), SCMP_SYS(pwrite64), SCMP_SYS(close),   SCMP_SYS(fstat),
    SCMP_SYS(lseek),   SCMP_SYS(fcntl),   SCMP_SYS(dup),
    SCMP_SYS(sendmsg), SCMP_SYS(recvmsg), SCMP_SYS(sendto),   SCMP_SYS(recvfrom),
    SCMP_SYS(shutdown), SCMP_SYS(poll),   SCMP_SYS(ppoll),    SCMP_SYS(epoll_wait),
    SCMP_SYS(epoll_pwait), SCMP_SYS(eventfd2), SCMP_SYS(pipe2), SCMP_SYS(getrandom),
    SCMP_SYS(getrlimit), SCMP_SYS(uname), SCMP_SYS(sysinfo)};

Status addAll(scmp_filter_ctx ctx, std::initializer_list<int> set) {
  for (int nr : set) {
    int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
    if (rc < 0) return Error::fromErrno("seccomp_rule_add(" + std::to_string(nr) + ")", -rc);
  }
  return {};
}

template <typename... Cmp>
Status allowIf(scmp_filter_ctx ctx, int nr, const char* name, Cmp... cmp) {
  int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, sizeof...(Cmp), cmp...);
  if (rc < 0) return Error::fromErrno(std::string("seccomp_rule_add(") + name + ")", -rc);
  return {};
}

// Closes [first, last]; close_range where the kernel has it (5.9), else
// one close per possible descriptor up to the descriptor limit.
Status closeRange(unsigned first, unsigned last) {
  if (first > last) return {};
#if defined(SYS_close_range)
  if (syscall(SYS_close_range, first, last, 0) == 0) return {};
  if (errno != ENOSYS) return Error::fromErrno("close_range");
#endif
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return Error::fromErrno("getrlimit(RLIMIT_NOFILE)");
  unsigned end = lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur > (1u << 20)
                     ? (1u << 20)
                     : static_cast<unsigned>(lim.rlim_cur);
  for (unsigned fd = first; fd <= last && fd < end; ++fd) ::close(static_cast<int>(fd));
  return {};
}

bool capabilityEffective(int cap) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return (data[cap / 32].effective & (1u << (cap % 32))) != 0;
}

}  // namespace

Status dropCapabilities() {
  if (capabilityEffective(CAP_SETPCAP)) {
    constexpr unsigned long kBits =
        SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
        SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
        SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    if (prctl(PR_SET_SECUREBITS, kBits, 0, 0, 0) != 0)
      return Error::fromErrno("prctl(PR_SET_SECUREBITS)");
    // Up to the kernel's last capability: PR_CAPBSET_READ says EINVAL past it.
    for (unsigned long cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; ++cap)
      if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0)
        return Error::fromErrno("prctl(PR_CAPBSET_DROP, " + std::to_string(cap) + ")");
  }
  // EINVAL: a kernel without ambient capabilities (before 4.3) has none.
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    return Error::fromErrno("prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[2]{};
  if (syscall(SYS_capset, &header, none) != 0) return Error::fromErrno("capset");
  return {};
}

Status closeDescriptorsExcept(int keep) {
  if (keep < 3) return closeRange(3, ~0u);
  if (auto s = closeRange(3, static_cast<unsigned>(keep) - 1); !s) return s;
  return closeRange(static_cast<unsigned>(keep) + 1, ~0u);
}

Status confineProcess(const ConfineOptions& options) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return Error::fromErrno("prctl(PR_SET_NO_NEW_PRIVS)");
  // A crashing worker must not write a core holding message payloads.
  rlimit none{0, 0};
  if (setrlimit(RLIMIT_CORE, &none) != 0) return Error::fromErrno("setrlimit(RLIMIT_CORE)");
  if (options.addressSpaceBytes > 0 && !kSanitized) {
    rlimit as{options.addressSpaceBytes, options.addressSpaceBytes};
    // Never above a lower hard limit already set: raising it needs
    // CAP_SYS_RESOURCE, which the worker dropped when it started.
    rlimit now{};
    if (getrlimit(RLIMIT_AS, &now) == 0 && now.rlim_max != RLIM_INFINITY && now.rlim_max < as.rlim_max)
      as = {now.rlim_max, now.rlim_max};
    if (setrlimit(RLIMIT_AS, &as) != 0) return Error::fromErrno("setrlimit(RLIMIT_AS)");
  }
  // Before the filter, which refuses the prctl and capset calls it makes.
  if (auto s = dropCapabilities(); !s) return s;

  // Default: EPERM, so a call we did not foresee fails like a refused
  // permission (libc and V8 report it) instead of killing a healthy worker.
  // socket, connect, open*, execve, ptrace, mount, fork and the like all
  // land here.
  Filter ctx(seccomp_init(SCMP_ACT_ERRNO(EPERM)));
  if (!ctx) return Error{"seccomp_init failed"};
  for (auto set : {kMemory, kThreads, kSchedulingReads, kTime, kSignals, kExistingFds}) {
    if (auto s = addAll(ctx.get(), set); !s) return s;
  }
  // libseccomp's SCMP_A0..SCMP_A5 leave the comparison's second datum to
  // zero, which clang's -Wmissing-field-initializers reports at each rule.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  for (int nr : kOwnThreadOnly)
    if (auto st = allowIf(ctx.get(), nr, "sched_*", SCMP_A0(SCMP_CMP_EQ, 0)); !st) return st;
  const auto self = static_cast<scmp_datum_t>(getpid());
  Status rules[] = {
      // clone only for threads: CLONE_THREAD set. A new process gets EPERM.
      allowIf(ctx.get(), SCMP_SYS(clone), "clone",
              SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD)),
      // Signals only to this process (abort(), V8's own signals) and its
      // own threads: never the supervisor or a neighbour.
      allowIf(ctx.get(), SCMP_SYS(kill), "kill", SCMP_A0(SCMP_CMP_EQ, self)),
      allowIf(ctx.get(), SCMP_SYS(tgkill), "tgkill", SCMP_A0(SCMP_CMP_EQ, self)),
      // Reading this process's limits (glibc's getrlimit); setting none.
      allowIf(ctx.get(), SCMP_SYS(prlimit64), "prlimit64", SCMP_A0(SCMP_CMP_EQ, 0),
              SCMP_A2(SCMP_CMP_EQ, 0)),
      allowIf(ctx.get(), SCMP_SYS(prlimit64), "prlimit64", SCMP_A0(SCMP_CMP_EQ, self),
              SCMP_A2(SCMP_CMP_EQ, 0)),
      // The calling thread's priority only (who = 0).
      allowIf(ctx.get(), SCMP_SYS(getpriority), "getpriority", SCMP_A1(SCMP_CMP_EQ, 0)),
      allowIf(ctx.get(), SCMP_SYS(setpriority), "setpriority", SCMP_A1(SCMP_CMP_EQ, 0)),
      // ioctl: isatty() (stdio, V8's logging) and nothing else.
      allowIf(ctx.get(), SCMP_SYS(ioctl), "ioctl", SCMP_A1(SCMP_CMP_EQ, TCGETS)),
      // prctl: naming a thread and reading what was set, nothing that
      // changes the process's powers.
      allowIf(ctx.get(), SCMP_SYS(prctl), "prctl", SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME)),
      allowIf(ctx.get(), SCMP_SYS(prctl), "prctl", SCMP_A0(SCMP_CMP_EQ, PR_GET_NAME)),
      allowIf(ctx.get(), SCMP_SYS(prctl), "prctl", SCMP_A0(SCMP_CMP_EQ, PR_SET_VMA)),
  };
#pragma GCC diagnostic pop
  for (auto& r : rules)
    if (!r) return r;
  // clone3 passes its flags in memory a filter cannot read; ENOSYS makes
  // glibc fall back to clone, which the rule above checks.
  int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc < 0) return Error::fromErrno("seccomp_rule_add(clone3)", -rc);
  // Every thread of the process, not only the caller: V8's platform threads
  // and the watchdog exist already. The kernel also gives each of them the
  // caller's no_new_privs.
  rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_TSYNC, 1);
  if (rc < 0) return Error::fromErrno("seccomp_attr_set(TSYNC)", -rc);

  rc = seccomp_load(ctx.get());
  if (rc < 0) return Error::fromErrno("seccomp_load", -rc);
  return {};
}

}  // namespace ductus::worker
