// `ductus validate [PROJECT] [--env ENV] [--json]`: loads and checks a whole
// project without touching a database. Prints one line per interface and
// exits 0, or every mistake (file:line:column: key: message) and exits 1.
// The report goes to stdout either way: it is the command's answer, and
// editors and CI read it from there.
#pragma once

namespace CLI {
class App;
}

namespace ductus::supervisor {

// See common/command_line.h for how commands are added and run.
void addValidateCommand(CLI::App& ductus, int& exitCode);

}  // namespace ductus::supervisor
