// `ductus check`: proves this installation works end to end: V8 runs in a
// confined worker process, and (when a database is given) Postgres answers
// through the async client. Prints one line per dependency.
#pragma once

namespace ductus::supervisor {

int checkCommand(int argc, char** argv);

}  // namespace ductus::supervisor
