// `ductus token create NAME --role ROLE [--permission LIST] [--user NAME]
// [PROJECT]` prints the new token (dux_...) once, alone on stdout;
// `ductus token list [--all] [PROJECT]`; `ductus token revoke ID|NAME
// [PROJECT]`. On the server, against the project's database, as `ductus
// user` (supervisor/cli/user_command.h); each change is audited.
#pragma once

namespace CLI {
class App;
}

namespace ductus::supervisor {

// See common/command_line.h for how commands are added and run.
void addTokenCommand(CLI::App& ductus, int& exitCode);

}  // namespace ductus::supervisor
