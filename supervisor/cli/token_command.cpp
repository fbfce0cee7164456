#include "supervisor/cli/token_command.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/auth/accounts.h"
#include "api/auth/credentials.h"
#include "common/command_line.h"
#include "supervisor/cli/user_command.h"

namespace ductus::supervisor {
namespace {

struct TokenArgs {
  AccountsArgs db;
  std::string name, role, user;
  std::vector<std::string> permissions;
  bool all = false;
};

std::string joinPermissions(unsigned bits) {
  std::string out;
  for (auto& p : api::permissionNames(bits)) out += (out.empty() ? "" : ",") + p;
  return out.empty() ? "-" : out;
}

int createToken(const TokenArgs& a) {
  auto grant = checkedGrant("ductus token create", a.name, a.role, a.permissions);
  if (!grant) return kUsageError;
  api::NewToken t{a.name, grant->role, grant->permissions,
                  a.user.empty() ? std::nullopt : std::optional<std::string>(a.user)};
  return withAccountsDatabase("ductus token", a.db, [&](store::PgConnection& conn, auto finish) {
    api::createToken(conn, t, cliActor(), std::chrono::system_clock::now(),
                     [finish](Result<api::CreatedToken> r) {
                       if (!r) {
                         std::fprintf(stderr, "ductus token create: %s\n",
                                      r.error().message.c_str());
                         return finish(1);
                       }
                       // Alone on stdout, so `TOKEN=$(ductus token create ...)` works.
                       std::printf("%s\n", r->token.c_str());
                       std::fprintf(stderr,
                                    "created token %s (id %lld, %s%s%s); it is shown this once\n",
                                    r->info.name.c_str(), static_cast<long long>(r->info.id),
                                    std::string(api::roleName(r->info.role)).c_str(),
                                    r->info.user ? ", acting as user " : "",
                                    r->info.user ? r->info.user->c_str() : "");
                       finish(0);
                     });
  });
}

int listTokens(const TokenArgs& a) {
  return withAccountsDatabase("ductus token", a.db, [&](store::PgConnection& conn, auto finish) {
    api::listTokens(conn, a.all, std::nullopt, [finish](Result<std::vector<api::TokenInfo>> r) {
      if (!r) {
        std::fprintf(stderr, "ductus token list: %s\n", r.error().message.c_str());
        return finish(1);
      }
      std::printf("%-6s %-24s %-9s %-16s %-16s %-21s %-21s %s\n", "ID", "NAME", "ROLE",
                  "PERMISSIONS", "USER", "CREATED", "LAST USED", "REVOKED");
      for (auto& t : *r)
        std::printf("%-6lld %-24s %-9s %-16s %-16s %-21s %-21s %s\n",
                    static_cast<long long>(t.id), t.name.c_str(),
                    std::string(api::roleName(t.role)).c_str(),
                    joinPermissions(t.permissions).c_str(), t.user.value_or("-").c_str(),
                    t.createdAt.c_str(), t.lastUsedAt.value_or("never").c_str(),
                    t.revokedAt.value_or("-").c_str());
      finish(0);
    });
  });
}

int revokeToken(const TokenArgs& a) {
  return withAccountsDatabase("ductus token", a.db, [&](store::PgConnection& conn, auto finish) {
    api::revokeToken(conn, a.name, std::nullopt, cliActor(), std::chrono::system_clock::now(),
                     [finish](Result<api::TokenInfo> r) {
                       if (!r) {
                         std::fprintf(stderr, "ductus token revoke: %s\n",
                                      r.error().message.c_str());
                         return finish(1);
                       }
                       std::printf("revoked token %s (id %lld): its next call is refused\n",
                                   r->name.c_str(), static_cast<long long>(r->id));
                       finish(0);
                     });
  });
}

}  // namespace

void addTokenCommand(CLI::App& ductus, int& exitCode) {
  auto* cmd = ductus.add_subcommand("token", "create, list or revoke the API's bearer tokens");
  cmd->require_subcommand(1);
  cmd->footer(
      "A token (dux_ and 64 hex digits) is sent as `Authorization: Bearer dux_...`.\n"
      "Only its SHA-256 is kept, so it is shown once, when created; revoking takes\n"
      "effect on its next call. A token made --user NAME acts as that user at most.\n"
      "Every change is written to the audit log as the OS user, via cli.");

  auto create = std::make_shared<TokenArgs>();
  auto* c = cmd->add_subcommand("create", "create a token and print it, this once");
  c->add_option("NAME", create->name, "the token's name (unique among live tokens)")
      ->required()
      ->type_name("");
  c->add_option("--role", create->role, "viewer, operator or admin")
      ->required()
      ->type_name("ROLE");
  c->add_option("--permission", create->permissions, "payloads, audit (comma-separated)")
      ->type_name("LIST");
  c->add_option("--user", create->user, "the token acts as this user at most")
      ->type_name("NAME");
  addAccountsOptions(*c, create->db);
  c->callback([create, &exitCode] { exitCode = createToken(*create); });

  auto list = std::make_shared<TokenArgs>();
  auto* l = cmd->add_subcommand("list", "list the tokens (never their values)");
  l->add_flag("--all", list->all, "include revoked tokens");
  addAccountsOptions(*l, list->db);
  l->callback([list, &exitCode] { exitCode = listTokens(*list); });

  auto revoke = std::make_shared<TokenArgs>();
  auto* r = cmd->add_subcommand("revoke", "revoke a token: its next call is refused");
  r->add_option("TOKEN", revoke->name, "the token's id, or its name")->required()->type_name("");
  addAccountsOptions(*r, revoke->db);
  r->callback([revoke, &exitCode] { exitCode = revokeToken(*revoke); });
}

}  // namespace ductus::supervisor
