#include "supervisor/cli/program.h"

#include <string>

#include "common/command_line.h"
#include "common/version.h"
#include "supervisor/cli/api_spec_command.h"
#include "supervisor/cli/cert_command.h"
#include "supervisor/cli/check_command.h"
#include "supervisor/cli/migrate_command.h"
#include "supervisor/cli/reference_command.h"
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

namespace ductus::supervisor {

std::unique_ptr<CLI::App> makeDuctusProgram(int& exitCode) {
  auto program = std::make_unique<CLI::App>("Ductus, a healthcare integration engine.", "ductus");
  prepareProgram(*program);
  addRunCommands(*program, exitCode);
  addCheckCommand(*program, exitCode);
  addMigrateCommands(*program, exitCode);
  addRetentionCommand(*program, exitCode);
  addSecretCommand(*program, exitCode);
  addCertCommand(*program, exitCode);
  addUserCommand(*program, exitCode);
  addTokenCommand(*program, exitCode);
  addValidateCommand(*program, exitCode);
  addTestCommand(*program, exitCode);
  addTryCommand(*program, exitCode);
  addSendCommand(*program, exitCode);
  addSinkCommand(*program, exitCode);
  addApiSpecCommand(*program, exitCode);
  addReferenceCommands(*program, exitCode);
  addVersionCommand(*program, std::string("ductus ") + ductus::kVersionLine, exitCode);
  addHelpCommand(*program, exitCode);
  // Listed for completeness; `worker` never reaches this parser (main.cpp).
  program->add_subcommand("worker", "(internal) a confined script worker, started by the engine")
      ->group("Internal");
  finishProgram(*program, std::string("ductus ") + ductus::kVersionLine,
                "`ductus help COMMAND` or `ductus COMMAND --help` describes each command.");
  return program;
}

}  // namespace ductus::supervisor
