#include "supervisor/cli/user_command.h"

#include <openssl/crypto.h>
#include <pwd.h>
#include <unistd.h>
#include <uv.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "api/auth/accounts.h"
#include "api/auth/credentials.h"
#include "api/auth/password_hasher.h"
#include "api/auth/password_rules.h"
#include "common/command_line.h"
#include "common/config/loader.h"
#include "schema/migrator.h"

namespace ductus::supervisor {
namespace {

namespace fs = std::filesystem;

// As `ductus run` chooses: --database, else ductus.yaml's database:, else
// DUCTUS_DATABASE_URL.
Result<std::string> databaseOf(const AccountsArgs& args) {
  if (!args.database.empty()) return args.database;
  std::error_code ec;
  if (fs::exists(fs::path(args.project) / "ductus.yaml", ec)) {
    config::LoadOptions lo;
    lo.environment = config::defaultEnvironment();
    auto project = config::loadProject(args.project, lo);
    if (!project)
      return Error{"the project " + args.project + " has errors:\n" + project.error().message,
                   ErrorKind::Config};
    if (!project->engine.database.empty()) return project->engine.database;
  }
  if (const char* e = std::getenv("DUCTUS_DATABASE_URL"); e && *e) return std::string(e);
  return Error{
      "no database: give --database URL, set database: in ductus.yaml, or set "
      "DUCTUS_DATABASE_URL",
      ErrorKind::Invalid};
}

// The password from stdin, unless stdin is a terminal or gives nothing:
// then nullopt, and one is generated.
Result<std::optional<std::string>> readPassword() {
  if (::isatty(STDIN_FILENO)) return std::optional<std::string>{};
  std::string value;
  char buf[1024];
  ssize_t n;
  while ((n = ::read(STDIN_FILENO, buf, sizeof buf)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::fromErrno("cannot read the password from stdin");
    }
    value.append(buf, static_cast<size_t>(n));
    if (value.size() > 4096) {
      OPENSSL_cleanse(value.data(), value.size());
      return Error{"the password is longer than 1024 bytes"};
    }
  }
  OPENSSL_cleanse(buf, sizeof buf);
  if (!value.empty() && value.back() == '\n') value.pop_back();
  if (!value.empty() && value.back() == '\r') value.pop_back();
  if (value.empty()) return std::optional<std::string>{};
  return std::optional<std::string>(std::move(value));
}

std::string joinPermissions(unsigned bits) {
  std::string out;
  for (auto& p : api::permissionNames(bits)) out += (out.empty() ? "" : ",") + p;
  return out.empty() ? "-" : out;
}

struct CreateArgs {
  AccountsArgs db;
  std::string name, role;
  std::vector<std::string> permissions;
};

int createUser(const CreateArgs& a) {
  auto grant = checkedGrant("ductus user create", a.name, a.role, a.permissions);
  if (!grant) return kUsageError;
  auto given = readPassword();
  if (!given) {
    std::fprintf(stderr, "ductus user create: %s\n", given.error().message.c_str());
    return 1;
  }
  api::AuthPolicy policy;
  bool generated = !*given;
  std::string password;
  if (generated) {
    auto p = api::newPassword();
    if (!p) {
      std::fprintf(stderr, "ductus user create: %s\n", p.error().message.c_str());
      return 1;
    }
    password = *p;
  } else {
    password = std::move(**given);
    // The API's rules (api/auth/password_rules.h), so no password the
    // console would refuse comes in this way.
    if (auto weak = api::checkNewPassword(password, a.name, policy); !weak) {
      OPENSSL_cleanse(password.data(), password.size());
      std::fprintf(stderr, "ductus user create: %s\n", weak.error().message.c_str());
      return kUsageError;
    }
  }
  auto hash = api::hashPasswordNow(password);
  if (!hash) {
    std::fprintf(stderr, "ductus user create: %s\n", hash.error().message.c_str());
    return 1;
  }
  api::NewUser u{a.name, grant->role, grant->permissions, *hash, generated};
  int rc = withAccountsDatabase("ductus user", a.db, [&](store::PgConnection& conn, auto finish) {
    api::createUser(conn, u, cliActor(), std::chrono::system_clock::now(),
                    [&, finish](Result<api::UserInfo> r) {
                      if (!r) {
                        std::fprintf(stderr, "ductus user create: %s\n",
                                     r.error().message.c_str());
                        return finish(1);
                      }
                      std::printf("created user %s (%s, permissions %s)\n", r->name.c_str(),
                                  std::string(api::roleName(r->role)).c_str(),
                                  joinPermissions(r->permissions).c_str());
                      if (generated)
                        std::printf("password: %s\n(shown this once; %s must change it at the "
                                    "first sign-in)\n",
                                    password.c_str(), r->name.c_str());
                      finish(0);
                    });
  });
  OPENSSL_cleanse(password.data(), password.size());
  return rc;
}

int listUsers(const AccountsArgs& db) {
  return withAccountsDatabase("ductus user", db, [](store::PgConnection& conn, auto finish) {
    api::listUsers(conn, std::chrono::system_clock::now(),
                   [finish](Result<std::vector<api::UserInfo>> r) {
                     if (!r) {
                       std::fprintf(stderr, "ductus user list: %s\n", r.error().message.c_str());
                       return finish(1);
                     }
                     std::printf("%-24s %-9s %-16s %-28s %s\n", "NAME", "ROLE", "PERMISSIONS",
                                 "STATE", "CREATED");
                     for (auto& u : *r) {
                       std::string state = u.disabled      ? "disabled"
                                           : u.lockedUntil ? "locked until " + *u.lockedUntil
                                           : u.mustChangePassword ? "must change password"
                                                                  : "active";
                       if (u.totp && !u.disabled) state += ", totp";
                       std::printf("%-24s %-9s %-16s %-28s %s\n", u.name.c_str(),
                                   std::string(api::roleName(u.role)).c_str(),
                                   joinPermissions(u.permissions).c_str(), state.c_str(),
                                   u.createdAt.c_str());
                     }
                     finish(0);
                   });
  });
}

int disableUser(const AccountsArgs& db, const std::string& name) {
  return withAccountsDatabase("ductus user", db, [&](store::PgConnection& conn, auto finish) {
    api::disableUser(conn, name, cliActor(), std::chrono::system_clock::now(),
                     [finish](Result<api::UserInfo> r) {
                       if (!r) {
                         std::fprintf(stderr, "ductus user disable: %s\n",
                                      r.error().message.c_str());
                         return finish(1);
                       }
                       std::printf("disabled user %s: their sessions ended and their tokens "
                                   "stopped working\n",
                                   r->name.c_str());
                       finish(0);
                     });
  });
}

int resetUserTotp(const AccountsArgs& db, const std::string& name) {
  return withAccountsDatabase("ductus user", db, [&](store::PgConnection& conn, auto finish) {
    api::resetTotp(conn, name, cliActor(), std::chrono::system_clock::now(),
                   [finish](Result<api::UserInfo> r) {
                     if (!r) {
                       std::fprintf(stderr, "ductus user reset-totp: %s\n",
                                    r.error().message.c_str());
                       return finish(1);
                     }
                     std::printf(
                         "reset the second factor of user %s: their sessions ended, and "
                         "their password alone signs them in until they set one up "
                         "again\n",
                         r->name.c_str());
                     finish(0);
                   });
  });
}

}  // namespace

void addAccountsOptions(CLI::App& command, AccountsArgs& args) {
  addProjectArgument(command, args.project);
  // Not envname(DUCTUS_DATABASE_URL): ductus.yaml's database: comes first,
  // as in `ductus run`.
  command
      .add_option("--database", args.database,
                  "PostgreSQL URL; else database: in ductus.yaml, else $DUCTUS_DATABASE_URL")
      ->type_name("URL");
}

int withAccountsDatabase(const char* command, const AccountsArgs& args,
                         std::function<void(store::PgConnection&, std::function<void(int)>)> op) {
  auto url = databaseOf(args);
  if (!url) {
    std::fprintf(stderr, "%s: %s\n", command, url.error().message.c_str());
    return url.error().kind == ErrorKind::Invalid ? kUsageError : 1;
  }
  auto migrations = store::embeddedMigrations();
  if (!migrations) {
    std::fprintf(stderr, "%s: %s\n", command, migrations.error().message.c_str());
    return 1;
  }
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::optional<int> rc;
  {
    store::PgConnection conn(&loop);
    conn.connect(*url, [&](Status s) {
      if (!s && !rc) {
        std::fprintf(stderr, "%s: cannot connect to the database: %s\n", command,
                     s.error().message.c_str());
        rc = 1;
      }
    });
    // The tables this command needs are made by migrations, which `ductus
    // run` applies at start; a command run before the first start applies
    // them the same way (under the migration lock).
    auto m = std::make_shared<store::Migrator>(conn, *migrations);
    m->migrate([&, m](Result<store::MigrateReport> r) {
      if (rc) return;
      if (!r) {
        std::fprintf(stderr, "%s: the database could not be migrated: %s\n", command,
                     r.error().message.c_str());
        rc = 1;
        return;
      }
      for (auto& n : r->applied) std::fprintf(stderr, "applied migration %s\n", n.c_str());
      op(conn, [&](int code) { rc = code; });
    });
    while (!rc && uv_run(&loop, UV_RUN_ONCE)) {
    }
  }
  uv_run(&loop, UV_RUN_DEFAULT);  // close callbacks
  uv_loop_close(&loop);
  if (!rc) {
    std::fprintf(stderr, "%s: the database did not answer\n", command);
    return 1;
  }
  return *rc;
}

std::optional<AccountGrant> checkedGrant(const char* command, const std::string& name,
                                         const std::string& role,
                                         const std::vector<std::string>& permissions) {
  if (!api::isValidName(name)) {
    std::fprintf(stderr,
                 "%s: `%s` is not a valid name (a letter or digit, then up to 63 letters, "
                 "digits or ._@-)\n",
                 command, name.c_str());
    return std::nullopt;
  }
  auto r = api::roleFromName(role);
  if (!r) {
    std::fprintf(stderr, "%s: unknown role `%s` (viewer, operator or admin)\n", command,
                 role.c_str());
    return std::nullopt;
  }
  std::string list;
  for (auto& p : permissions) list += p + ",";
  auto perms = api::permissionsFromList(list);
  if (!perms) {
    std::fprintf(stderr, "%s: %s\n", command, perms.error().message.c_str());
    return std::nullopt;
  }
  return AccountGrant{*r, *perms};
}

api::AuditEntry cliActor() {
  api::AuditEntry e;
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found)
    e.actor = found->pw_name;
  else
    e.actor = "uid " + std::to_string(::geteuid());
  e.actorKind = api::ActorKind::System;
  e.via = "cli";
  return e;
}

void addUserCommand(CLI::App& ductus, int& exitCode) {
  auto* cmd = ductus.add_subcommand(
      "user", "create, list, disable the API's local users, or reset their second factor");
  cmd->require_subcommand(1);
  cmd->footer(
      "Users sign in to the API and the web console with a name and password\n"
      "(argon2id). Roles: viewer < operator < admin; permissions beside them:\n"
      "payloads (read message contents), audit (read the audit log). Every change is\n"
      "written to the audit log as the OS user, via cli.");

  auto create = std::make_shared<CreateArgs>();
  auto* c = cmd->add_subcommand(
      "create", "create a user; the password from stdin, else generated and printed once");
  c->add_option("NAME", create->name, "the user's name")->required()->type_name("");
  c->add_option("--role", create->role, "viewer, operator or admin")
      ->required()
      ->type_name("ROLE");
  c->add_option("--permission", create->permissions, "payloads, audit (comma-separated)")
      ->type_name("LIST");
  addAccountsOptions(*c, create->db);
  c->callback([create, &exitCode] { exitCode = createUser(*create); });

  auto list = std::make_shared<AccountsArgs>();
  auto* l = cmd->add_subcommand("list", "list the users, their roles and state");
  addAccountsOptions(*l, *list);
  l->callback([list, &exitCode] { exitCode = listUsers(*list); });

  auto disable = std::make_shared<CreateArgs>();
  auto* d = cmd->add_subcommand(
      "disable", "disable a user: their sessions end, their tokens stop working");
  d->add_option("NAME", disable->name, "the user's name")->required()->type_name("");
  addAccountsOptions(*d, disable->db);
  d->callback([disable, &exitCode] { exitCode = disableUser(disable->db, disable->name); });

  auto reset = std::make_shared<CreateArgs>();
  auto* t = cmd->add_subcommand(
      "reset-totp",
      "turn a user's second factor (codes from an app) off, as for a lost phone: their "
      "sessions end, and the password alone signs them in until they set one up again");
  t->add_option("NAME", reset->name, "the user's name")->required()->type_name("");
  addAccountsOptions(*t, reset->db);
  t->callback([reset, &exitCode] { exitCode = resetUserTotp(reset->db, reset->name); });
}

}  // namespace ductus::supervisor
