// `ductus check [--database URL]`: proves this installation works end to
// end: V8 runs in a confined worker process, and (when a database is given)
// Postgres answers through the async client. Prints one line per dependency.
#pragma once

namespace CLI {
class App;
}

namespace ductus::supervisor {

// See common/command_line.h for how commands are added and run.
void addCheckCommand(CLI::App& ductus, int& exitCode);

}  // namespace ductus::supervisor
