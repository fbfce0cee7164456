// `ductus run PROJECT` and `ductus dev PROJECT`: start the engine and keep
// it running until SIGTERM/SIGINT. dev does the same on a throwaway
// PostgreSQL of its own.
#pragma once

namespace ductus::supervisor {

int runCommand(int argc, char** argv);
int devCommand(int argc, char** argv);

}  // namespace ductus::supervisor
