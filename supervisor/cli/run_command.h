// `ductus run [PROJECT]` and `ductus dev [PROJECT]`: start the engine and
// keep it running until SIGTERM/SIGINT. dev does the same on a throwaway
// PostgreSQL of its own.
#pragma once

namespace CLI {
class App;
}

namespace ductus::supervisor {

// Adds `run` and `dev`. See common/command_line.h for how commands
// are added and run.
void addRunCommands(CLI::App& ductus, int& exitCode);

}  // namespace ductus::supervisor
