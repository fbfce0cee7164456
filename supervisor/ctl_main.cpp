// ductusctl: the operator's client over the engine's control socket.
#include <CLI/CLI.hpp>
#include <string>

#include "common/version.h"
#include "supervisor/cli/command_line.h"

int main(int argc, char** argv) {
  using namespace ductus::supervisor;
  CLI::App program{
      "The operator's client: talks to a running engine over its control socket\n"
      "($RUNTIME_DIRECTORY/control).",
      "ductusctl"};
  prepareProgram(program);
  int exitCode = 0;
  std::string versionLine = std::string("ductusctl ") + ductus::kVersionLine;
  addVersionCommand(program, versionLine, exitCode);
  addHelpCommand(program, exitCode);
  finishProgram(program, versionLine,
                "The engine's control socket (status, drain, resume, pause, handover,\n"
                "interfaces, messages, resend) is not built yet; see the operations issue.");
  return runProgram(program, argc, argv, exitCode);
}
