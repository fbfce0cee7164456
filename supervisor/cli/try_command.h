// `ductus try PROJECT INTERFACE FILE`: runs one message, FILE's bytes as
// the source would store them, through each of the interface's functions
// (one per destination, or the respond function) in a real, confined worker
// whose services are mocked, and prints per destination what would happen:
// the output (HL7 one segment a line), filtered, or the error. Needs no
// database and sends nothing. Exit 0 when every function returned, 1 when
// one threw or ran away or the code does not load, 2 on a usage error.
#pragma once

namespace CLI {
class App;
}

namespace ductus::supervisor {

// See common/command_line.h for how commands are added and run.
void addTryCommand(CLI::App& ductus, int& exitCode);

}  // namespace ductus::supervisor
