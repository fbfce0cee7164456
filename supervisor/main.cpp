// ductus: the engine binary. One binary for the engine, its worker mode and
// the server-side commands; the first argument picks which.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "common/command_line.h"
#include "supervisor/cli/program.h"
#include "worker/worker_main.h"

namespace {

// A confined worker leaves with _exit: exit-time work (LeakSanitizer's
// thread-stopping, static destructors joining V8's threads) needs syscalls
// the seccomp filter refuses.
[[noreturn]] void runWorker(int argc, char** argv) {
  int rc = ductus::worker::workerMain(argc, argv);
  std::fflush(nullptr);
  _exit(rc);
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view first = argc > 1 ? argv[1] : "";
  // The engine starts `ductus worker --fd N --heap-mb MB`; worker_main reads
  // those itself, before anything else in this process runs.
  if (first == "worker") runWorker(argc, argv);
  // Its help is worker_main's too, as `ductus worker --help` prints it.
  if (first == "help" && argc == 3 && std::string_view(argv[2]) == "worker") {
    char help[] = "--help";
    char* workerHelp[] = {argv[0], argv[2], help, nullptr};
    return ductus::worker::workerMain(3, workerHelp);
  }

  int exitCode = 0;
  auto program = ductus::supervisor::makeDuctusProgram(exitCode);
  return ductus::runProgram(*program, argc, argv, exitCode);
}
