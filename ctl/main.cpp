// ductusctl: the operator's client over the engine's control socket.
#include "common/command_line.h"
#include "ctl/program.h"

int main(int argc, char** argv) {
  int exitCode = 0;
  auto program = ductus::ctl::makeCtlProgram(exitCode);
  return ductus::runProgram(*program, argc, argv, exitCode);
}
