// `ductus secret set NAME [PROJECT] | list [PROJECT] | rm NAME [PROJECT]`,
// each with [--env ENV]: edits PROJECT/secrets/<env>.json (see
// common/config/secrets.h). `set` reads the value from stdin, so it never
// sits in shell history or a process list; nothing prints a value.
#pragma once

namespace CLI {
class App;
}

namespace ductus::supervisor {

// See common/command_line.h for how commands are added and run.
void addSecretCommand(CLI::App& ductus, int& exitCode);

}  // namespace ductus::supervisor
