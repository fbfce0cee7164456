// `ductus migrate [--database URL]`: applies the migrations this binary
// carries (schema/migrator.h). `ductus upgrade --check [--database URL]`:
// lists the migrations a start would apply, with their headers and each
// heavy table's current size; changes nothing. Both also read
// DUCTUS_DATABASE_URL.
#pragma once

namespace CLI {
class App;
}

namespace ductus::supervisor {

// Adds `migrate` and `upgrade`. See common/command_line.h for how
// commands are added and run.
void addMigrateCommands(CLI::App& ductus, int& exitCode);

}  // namespace ductus::supervisor
