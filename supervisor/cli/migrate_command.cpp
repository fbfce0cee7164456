#include "supervisor/cli/migrate_command.h"

#include <uv.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "common/command_line.h"
#include "schema/migrator.h"

namespace ductus::supervisor {
namespace {

// Runs fn(conn, done) on a private loop until done is called; the CLI owns
// this loop, nothing else runs on it.
template <typename T, typename Fn>
Result<T> runOnce(const std::string& url, Fn fn) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::optional<Result<T>> out;
  {
    store::PgConnection conn(&loop);
    conn.connect(url, [&](Status s) {
      if (!s) out = Error{s.error().message};
    });
    fn(conn, [&](Result<T> r) { out = std::move(r); });
    while (!out && uv_run(&loop, UV_RUN_ONCE)) {
    }
  }
  uv_run(&loop, UV_RUN_DEFAULT);  // close callbacks
  uv_loop_close(&loop);
  if (!out) return Error{"the database did not answer"};
  return std::move(*out);
}

std::string humanBytes(int64_t b) {
  const char* units[] = {"bytes", "kB", "MB", "GB", "TB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(b));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

// --database URL, DUCTUS_DATABASE_URL when not given.
void addDatabaseOption(CLI::App& command, std::string& database) {
  command.add_option("--database", database, "PostgreSQL connection string")
      ->type_name("URL")
      ->envname("DUCTUS_DATABASE_URL");
}

bool haveDatabase(const std::string& database, const char* command) {
  if (!database.empty()) return true;
  std::fprintf(stderr, "ductus %s: no database: give --database URL or set DUCTUS_DATABASE_URL\n",
               command);
  return false;
}

int migrate(const std::string& database) {
  if (!haveDatabase(database, "migrate")) return kUsageError;
  auto migrations = store::embeddedMigrations();
  if (!migrations) {
    std::fprintf(stderr, "ductus migrate: %s\n", migrations.error().message.c_str());
    return 1;
  }
  auto r = runOnce<store::MigrateReport>(database, [&](store::PgConnection& conn, auto done) {
    auto m = std::make_shared<store::Migrator>(conn, *migrations);
    m->migrate([m, done](Result<store::MigrateReport> r) { done(std::move(r)); });
  });
  if (!r) {
    std::fprintf(stderr, "ductus migrate: %s\n", r.error().message.c_str());
    return 1;
  }
  for (auto& n : r->applied) std::printf("applied %s\n", n.c_str());
  for (auto& n : r->unknown)
    std::printf("note: %s was applied by a newer binary; left as it is\n", n.c_str());
  if (r->applied.empty()) std::printf("the database is up to date\n");
  return 0;
}

int upgradeCheck(const std::string& database, bool check) {
  if (!haveDatabase(database, "upgrade")) return kUsageError;
  if (!check) {
    std::fprintf(stderr, "ductus upgrade: only --check exists (migrations run at start, or with "
                         "ductus migrate)\n");
    return kUsageError;
  }
  auto migrations = store::embeddedMigrations();
  if (!migrations) {
    std::fprintf(stderr, "ductus upgrade: %s\n", migrations.error().message.c_str());
    return 1;
  }
  auto r = runOnce<store::UpgradePlan>(database, [&](store::PgConnection& conn, auto done) {
    auto m = std::make_shared<store::Migrator>(conn, *migrations);
    m->check([m, done](Result<store::UpgradePlan> r) { done(std::move(r)); });
  });
  if (!r) {
    std::fprintf(stderr, "ductus upgrade: %s\n", r.error().message.c_str());
    return 1;
  }
  if (r->pending.empty()) std::printf("no pending migrations\n");
  for (auto& p : r->pending) {
    std::printf("pending %s\n  Upgrade: %s\n", p.name.c_str(), p.upgrade.c_str());
    if (p.heavy.empty()) std::printf("  Heavy: none\n");
    for (auto& h : p.heavy)
      std::printf("  Heavy: %s (%s)\n", h.name.c_str(),
                  h.exists ? humanBytes(h.bytes).c_str() : "not present yet");
  }
  for (auto& n : r->unknown)
    std::printf("note: %s was applied by a newer binary\n", n.c_str());
  for (auto& n : r->changed)
    std::printf("REFUSED: %s changed after it was applied; migrate would refuse\n", n.c_str());
  return r->changed.empty() ? 0 : 1;
}

}  // namespace

void addMigrateCommands(CLI::App& ductus, int& exitCode) {
  auto database = std::make_shared<std::string>();
  auto* migrateCmd =
      ductus.add_subcommand("migrate", "apply the database migrations this binary carries");
  addDatabaseOption(*migrateCmd, *database);
  migrateCmd->footer(
      "Applies the migrations the database lacks. Refuses if an applied migration's\n"
      "file changed; tolerates migrations a newer binary applied.");
  migrateCmd->callback([database, &exitCode] { exitCode = migrate(*database); });

  // Its own variables: CLI11 fills options from the environment in every
  // command, given or not, so a shared one would be overwritten.
  auto upgradeDatabase = std::make_shared<std::string>();
  auto check = std::make_shared<bool>(false);
  auto* upgradeCmd =
      ductus.add_subcommand("upgrade", "upgrade --check: list pending migrations, change nothing");
  upgradeCmd->add_flag("--check", *check, "list the pending migrations (the only mode there is)");
  addDatabaseOption(*upgradeCmd, *upgradeDatabase);
  upgradeCmd->footer(
      "Lists the migrations this binary would apply, each with what it does and the\n"
      "current size of every existing table it works through. Changes nothing.");
  upgradeCmd->callback(
      [upgradeDatabase, check, &exitCode] { exitCode = upgradeCheck(*upgradeDatabase, *check); });
}

}  // namespace ductus::supervisor
