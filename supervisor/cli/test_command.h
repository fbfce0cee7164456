// `ductus test [PROJECT]`: runs each interface's *.test.js in a real,
// confined worker with the SDK's mocks (mock.db, mock.fetch, mock.env,
// mock.secret) in place of the engine's services. Needs no database. Exit
// code 0 when every test passed, 1 when one failed (or a test file does not
// load), 2 on a usage error. --junit FILE writes the results as JUnit XML
// too, for CI servers.
#pragma once

namespace CLI {
class App;
}

namespace ductus::supervisor {

// See common/command_line.h for how commands are added and run.
void addTestCommand(CLI::App& ductus, int& exitCode);

}  // namespace ductus::supervisor
