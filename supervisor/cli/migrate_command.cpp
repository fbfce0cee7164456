#include "supervisor/cli/migrate_command.h"

#include <uv.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

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

// --database URL or DUCTUS_DATABASE_URL; the rest of argv must be `allowed`.
std::optional<std::string> databaseArg(int argc, char** argv, std::string_view cmd,
                                       bool* checkFlag, const char* help) {
  std::string db;
  if (const char* e = std::getenv("DUCTUS_DATABASE_URL")) db = e;
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--database" && i + 1 < argc) {
      db = argv[++i];
    } else if (a == "--check" && checkFlag) {
      *checkFlag = true;
    } else if (a == "--help" || a == "-h") {
      std::fputs(help, stdout);
      std::exit(0);
    } else {
      std::fprintf(stderr, "ductus %.*s: unknown option '%s'\n", static_cast<int>(cmd.size()),
                   cmd.data(), argv[i]);
      return std::nullopt;
    }
  }
  if (db.empty()) {
    std::fprintf(stderr, "ductus %.*s: no database: give --database URL or set DUCTUS_DATABASE_URL\n",
                 static_cast<int>(cmd.size()), cmd.data());
    return std::nullopt;
  }
  return db;
}

}  // namespace

int migrateCommand(int argc, char** argv) {
  auto db = databaseArg(argc, argv, "migrate", nullptr,
                        "usage: ductus migrate [--database URL]\n\n"
                        "Applies the migrations this binary carries that the database lacks.\n"
                        "Refuses if an applied migration's file changed; tolerates migrations\n"
                        "a newer binary applied. Also reads DUCTUS_DATABASE_URL.\n");
  if (!db) return 2;
  auto migrations = store::embeddedMigrations();
  if (!migrations) {
    std::fprintf(stderr, "ductus migrate: %s\n", migrations.error().message.c_str());
    return 1;
  }
  auto r = runOnce<store::MigrateReport>(*db, [&](store::PgConnection& conn, auto done) {
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

int upgradeCommand(int argc, char** argv) {
  bool check = false;
  auto db = databaseArg(argc, argv, "upgrade", &check,
                        "usage: ductus upgrade --check [--database URL]\n\n"
                        "Lists the migrations this binary would apply, each with what it does\n"
                        "and the current size of every existing table it works through.\n"
                        "Changes nothing. Also reads DUCTUS_DATABASE_URL.\n");
  if (!db) return 2;
  if (!check) {
    std::fprintf(stderr, "ductus upgrade: only --check exists (migrations run at start, or with "
                         "ductus migrate)\n");
    return 2;
  }
  auto migrations = store::embeddedMigrations();
  if (!migrations) {
    std::fprintf(stderr, "ductus upgrade: %s\n", migrations.error().message.c_str());
    return 1;
  }
  auto r = runOnce<store::UpgradePlan>(*db, [&](store::PgConnection& conn, auto done) {
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

}  // namespace ductus::supervisor
