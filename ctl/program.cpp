#include "ctl/program.h"

#include <string>

#include "common/command_line.h"
#include "common/version.h"
#include "ctl/actions.h"
#include "ctl/client.h"
#include "ctl/monitoring.h"

namespace ductus::ctl {

std::unique_ptr<CLI::App> makeCtlProgram(int& exitCode) {
  auto program = std::make_unique<CLI::App>(
      "The operator's client: talks to a running engine over its control socket\n"
      "($RUNTIME_DIRECTORY/control).",
      "ductusctl");
  prepareProgram(*program);
  std::string versionLine = std::string("ductusctl ") + ductus::kVersionLine;
  addCtlCommands(*program, exitCode);
  addCtlActionCommands(*program, exitCode);
  addCtlMonitorCommands(*program, exitCode);
  addVersionCommand(*program, versionLine, exitCode);
  addHelpCommand(*program, exitCode);
  finishProgram(*program, versionLine,
                "The socket: --control PATH, else $RUNTIME_DIRECTORY/control (systemd), else\n"
                "/run/ductus/control as root, else $XDG_RUNTIME_DIR/ductus/control (or\n"
                "/tmp/ductus-UID/control); `ductus run` uses the same. Only the engine's own\n"
                "user (and root) may connect. Exit codes: 0 answered, 1 the engine isn't\n"
                "running, refused you or answered an error, 2 called wrong.");
  return program;
}

}  // namespace ductus::ctl
