// ductus: the engine binary. One binary for the engine, its worker mode and
// the server-side commands; the first argument picks which.
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <string_view>

#include "common/version.h"
#include "supervisor/cli/check_command.h"
#include "supervisor/cli/test_command.h"
#include "supervisor/cli/secret_command.h"
#include "supervisor/cli/validate_command.h"
#include "supervisor/cli/migrate_command.h"
#include "supervisor/cli/run_command.h"
#include "worker/worker_main.h"

namespace {

void usage(FILE* out) {
  std::fputs(
      "usage: ductus <command> [options]\n"
      "\n"
      "commands:\n"
      "  run        run the engine on a project\n"
      "  dev        run the engine on a project with a throwaway PostgreSQL\n"
      "  check      check this installation (confined V8 worker, PostgreSQL)\n"
      "  migrate    apply the database migrations this binary carries\n"
      "  upgrade    upgrade --check: list pending migrations, change nothing\n"
      "  secret     set, list or remove the project's encrypted secrets\n"
      "  validate   check a project's files and print a line per interface\n"
      "  test       run the interfaces' *.test.js with mocked services\n"
      "  version    print the version\n"
      "  worker     (internal) a confined script worker, started by the engine\n"
      "\n"
      "`ductus <command> --help` describes each command.\n",
      out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string_view cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    usage(stdout);
    return 0;
  }
  if (cmd == "version" || cmd == "--version") {
    std::printf("ductus %s\n", ductus::kVersion);
    return 0;
  }
  if (cmd == "worker") {
    // A confined worker leaves with _exit: exit-time work (LeakSanitizer's
    // thread-stopping, static destructors joining V8's threads) needs
    // syscalls the seccomp filter refuses.
    int rc = ductus::worker::workerMain(argc, argv);
    std::fflush(nullptr);
    _exit(rc);
  }
  // One line per command; each lives in supervisor/<name>_command.cpp.
  if (cmd == "run") return ductus::supervisor::runCommand(argc, argv);
  if (cmd == "dev") return ductus::supervisor::devCommand(argc, argv);
  if (cmd == "check") return ductus::supervisor::checkCommand(argc, argv);
  if (cmd == "test") return ductus::supervisor::testCommand(argc, argv);
  if (cmd == "validate") return ductus::supervisor::validateCommand(argc, argv);
  if (cmd == "secret") return ductus::supervisor::secretCommand(argc, argv);
  if (cmd == "migrate") return ductus::supervisor::migrateCommand(argc, argv);
  if (cmd == "upgrade") return ductus::supervisor::upgradeCommand(argc, argv);
  std::fprintf(stderr, "ductus: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
