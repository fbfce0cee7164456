// `ductus sink --mllp PORT | --http PORT`: a receiver to point a
// destination at while building an interface. Over MLLP it answers every
// message with an ACK (AA, or the code --ack chooses, MSA-2 the message's
// MSH-10), over HTTP every request with --status; it prints what it gets
// (HL7 one segment per line) or saves each as DIR/<n>.<ext> with --out.
// Runs until SIGINT or SIGTERM, then exits 0.
//
// It is the engine's own MLLP listener and HTTP server (intake/), with
// their limits, so what it accepts or refuses is what an engine would.
#pragma once

namespace CLI {
class App;
}

namespace ductus::supervisor {

// See common/command_line.h for how commands are added and run.
void addSinkCommand(CLI::App& ductus, int& exitCode);

}  // namespace ductus::supervisor
