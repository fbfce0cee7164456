// `ductus test [PROJECT]`: runs each interface's *.test.js in a real,
// confined worker with the SDK's mocks (mock.db, mock.fetch, mock.env,
// mock.secret) in place of the engine's services. Needs no database.
#pragma once

namespace ductus::supervisor {

// argv[1] is "test". Exit code 0 when every test passed, 1 when one failed
// (or a test file does not load), 2 on a usage error.
int testCommand(int argc, char** argv);

}  // namespace ductus::supervisor
