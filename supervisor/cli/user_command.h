// `ductus user create NAME --role ROLE [--permission payloads,audit] [PROJECT]`
// (the password from stdin; with none, one is generated, printed once and
// must be changed at the first sign-in), `ductus user list [PROJECT]`,
// `ductus user disable NAME [PROJECT]`. On the server, against the
// project's database (--database, else ductus.yaml's database:, else
// DUCTUS_DATABASE_URL), migrated first as `ductus run` would. Each change
// writes an audit row: the OS user, via cli.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api/audit/audit_log.h"
#include "schema/pg_connection.h"

namespace CLI {
class App;
}

namespace ductus::supervisor {

// See common/command_line.h for how commands are added and run.
void addUserCommand(CLI::App& ductus, int& exitCode);

// What the user and token commands share.
struct AccountsArgs {
  std::string project;
  std::string database;
};
void addAccountsOptions(CLI::App& command, AccountsArgs& args);
// Connects to the project's database, applies the migrations it lacks,
// then runs op on a loop of its own until op calls finish(exit code).
// Failures before op are printed with `command` ("ductus user") and exit 1.
int withAccountsDatabase(const char* command, const AccountsArgs& args,
                         std::function<void(store::PgConnection&, std::function<void(int)>)> op);
// The audit row's actor: the OS user running the command, via cli.
api::AuditEntry cliActor();
// A new account's name, role and --permission values, checked: its role and
// permission bits, or nullopt after saying what is wrong as `command: ...`
// ("ductus token create") on stderr (a usage error).
struct AccountGrant {
  api::Role role;
  unsigned permissions;
};
std::optional<AccountGrant> checkedGrant(const char* command, const std::string& name,
                                         const std::string& role,
                                         const std::vector<std::string>& permissions);

}  // namespace ductus::supervisor
