#include "worker/worker_main.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "common/config/model.h"
#include "proto/worker_exit.h"
#include "worker/confine.h"
#include "worker/v8_isolate.h"
#include "worker/v8_platform.h"
#include "worker/worker_loop.h"

namespace ductus::worker {
namespace {

constexpr size_t kDefaultHeapMb = config::kDefaultHeapMb;

void usage(FILE* out) {
  std::fputs(
      "usage: ductus worker --fd N [--heap-mb MB]\n"
      "       ductus worker --probe [--hold]\n"
      "\n"
      "A confined V8 worker process. The supervisor starts it; operators\n"
      "don't. --probe makes an isolate, confines the process exactly as a\n"
      "worker is confined, runs a script using JSON, RegExp and Intl, then\n"
      "tries to open a socket and a file, and prints what happened (used by\n"
      "`ductus check` and the tests). --hold then waits for stdin to close.\n",
      out);
}

std::string errnoName(int e) {
  switch (e) {
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case ENOSYS: return "ENOSYS";
    case 0: return "allowed";
    default: return std::to_string(e);
  }
}

// The address space a worker may map: V8's heap limit plus its code space,
// stacks and the allocator's slack. Generous on purpose: the heap limit, not
// this, is what stops a heap bomb; this stops a native leak.
size_t addressSpaceFor(size_t heapMb) { return (heapMb * 4 + 2048) * (size_t{1} << 20); }

int probe(const char* argv0, bool hold) {
  if (auto s = initV8(argv0); !s) {
    std::fprintf(stderr, "worker: %s\n", s.error().message.c_str());
    return proto::kExitBroken;
  }
  auto iso = Isolate::create(kDefaultHeapMb << 20);
  if (!iso) {
    std::fprintf(stderr, "worker: %s\n", iso.error().message.c_str());
    return proto::kExitBroken;
  }
  if (auto s = closeDescriptorsExcept(-1); !s) {
    std::fprintf(stderr, "worker: %s\n", s.error().message.c_str());
    return proto::kExitBroken;
  }
  if (auto s = confineProcess({addressSpaceFor(kDefaultHeapMb)}); !s) {
    std::fprintf(stderr, "worker: confining failed: %s\n", s.error().message.c_str());
    return proto::kExitBroken;
  }
  auto out = (*iso)->evaluate(
      "JSON.stringify({v: [1,2,3].map(x => x * 2), re: /a(b+)c/.exec('xabbbc')[1],"
      " n: new Intl.NumberFormat('de-DE').format(1234.5)})",
      "probe.js");
  if (!out) {
    std::fprintf(stderr, "worker: script failed: %s\n", out.error().message.c_str());
    return proto::kExitScriptFailed;
  }
  std::printf("script: %s\n", out->c_str());
  std::printf("v8: %s\n", v8::V8::GetVersion());

  errno = 0;
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  std::printf("socket: %s\n", s >= 0 ? "allowed" : errnoName(errno).c_str());
  errno = 0;
  int f = ::open("/etc/hostname", O_RDONLY);
  std::printf("open: %s\n", f >= 0 ? "allowed" : errnoName(errno).c_str());
  errno = 0;
  pid_t p = ::fork();
  if (p == 0) _exit(0);
  std::printf("fork: %s\n", p >= 0 ? "allowed" : errnoName(errno).c_str());
  std::fflush(stdout);

  if (hold) {
    char buf[64];
    while (::read(0, buf, sizeof buf) > 0) {
    }
  }
  return proto::kExitDone;
}

}  // namespace

int workerMain(int argc, char** argv) {
  bool doProbe = false, hold = false;
  int fd = -1;
  size_t heapMb = kDefaultHeapMb;
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--probe") doProbe = true;
    else if (a == "--hold") hold = true;
    else if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if ((a == "--fd" || a == "--heap-mb") && i + 1 < argc) {
      char* end = nullptr;
      long v = std::strtol(argv[++i], &end, 10);
      if (!end || *end || v < 0 || v > (a == "--fd" ? 1 << 20 : 1 << 20)) {
        std::fprintf(stderr, "ductus worker: bad value '%s' for %s\n", argv[i], argv[i - 1]);
        return 2;
      }
      if (a == "--fd") fd = static_cast<int>(v);
      else heapMb = static_cast<size_t>(v);
    } else {
      std::fprintf(stderr, "ductus worker: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (!doProbe && fd < 0) {
    usage(stderr);
    return 2;
  }
  // Before anything else, and before V8 starts its threads (each thread
  // copies its creator's capabilities): only stdio and the socket stay
  // open, and no capability is left, whoever started the engine.
  if (auto s = closeDescriptorsExcept(doProbe ? -1 : fd); !s) {
    std::fprintf(stderr, "worker: %s\n", s.error().message.c_str());
    return proto::kExitBroken;
  }
  if (auto s = dropCapabilities(); !s) {
    std::fprintf(stderr, "worker: dropping capabilities failed: %s\n", s.error().message.c_str());
    return proto::kExitBroken;
  }
  if (doProbe) return probe(argv[0], hold);
  return serveWorker(argv[0], fd, heapMb ? heapMb : kDefaultHeapMb);
}

}  // namespace ductus::worker
