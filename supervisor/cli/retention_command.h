// `ductus retention [PROJECT]`: each interface's tier (and a shorter one
// waiting for a confirmation), every partition with its size and drop date,
// and what the next drop will remove. `ductus retention run [PROJECT]`: the
// engine's retention job once, now (drops, dedupe keys). `ductus retention
// confirm INTERFACE [PROJECT]`: applies a shorter tier the project asks for
// (the engine's next start sends new messages there). The database is
// --database, else ductus.yaml's database:, else DUCTUS_DATABASE_URL.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace ductus::supervisor {

void addRetentionCommand(CLI::App& ductus, int& exitCode);

// What `ductus retention PROJECT` prints, for `ductus validate --database`.
// Exit code: 0, or 1 with the reason on stderr.
int showRetention(const std::string& project, const std::string& database,
                  const std::string& environment);

}  // namespace ductus::supervisor
