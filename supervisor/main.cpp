// ductus: the engine binary. One binary for the engine, its worker mode and
// the server-side commands; the first argument picks which.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <string_view>

#include "common/command_line.h"
#include "common/version.h"
#include "supervisor/cli/api_spec_command.h"
#include "supervisor/cli/cert_command.h"
#include "supervisor/cli/check_command.h"
#include "supervisor/cli/migrate_command.h"
#include "supervisor/cli/retention_command.h"
#include "supervisor/cli/run_command.h"
#include "supervisor/cli/secret_command.h"
#include "supervisor/cli/send_command.h"
#include "supervisor/cli/sink_command.h"
#include "supervisor/cli/test_command.h"
#include "supervisor/cli/token_command.h"
#include "supervisor/cli/try_command.h"
#include "supervisor/cli/user_command.h"
#include "supervisor/cli/validate_command.h"
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

  using namespace ductus;
  using namespace ductus::supervisor;
  CLI::App program{"Ductus, a healthcare integration engine.", "ductus"};
  prepareProgram(program);
  int exitCode = 0;
  addRunCommands(program, exitCode);
  addCheckCommand(program, exitCode);
  addMigrateCommands(program, exitCode);
  addRetentionCommand(program, exitCode);
  addSecretCommand(program, exitCode);
  addCertCommand(program, exitCode);
  addUserCommand(program, exitCode);
  addTokenCommand(program, exitCode);
  addValidateCommand(program, exitCode);
  addTestCommand(program, exitCode);
  addTryCommand(program, exitCode);
  addSendCommand(program, exitCode);
  addSinkCommand(program, exitCode);
  addApiSpecCommand(program, exitCode);
  addVersionCommand(program, std::string("ductus ") + ductus::kVersionLine, exitCode);
  addHelpCommand(program, exitCode);
  // Listed for completeness; `worker` never reaches this parser (above).
  program.add_subcommand("worker", "(internal) a confined script worker, started by the engine")
      ->group("Internal");
  finishProgram(program, std::string("ductus ") + ductus::kVersionLine,
                "`ductus help COMMAND` or `ductus COMMAND --help` describes each command.");
  return runProgram(program, argc, argv, exitCode);
}
