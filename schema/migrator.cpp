#include "schema/migrator.h"

#include <map>
#include <memory>

namespace ductus::store {
namespace {

constexpr const char* kCreateTable = R"(
CREATE TABLE IF NOT EXISTS ductus_migrations (
  version integer PRIMARY KEY,
  name text NOT NULL,
  checksum text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
))";

constexpr const char* kReadApplied = R"(
SELECT version, name, checksum FROM ductus_migrations
WHERE to_regclass('ductus_migrations') IS NOT NULL
ORDER BY version)";

constexpr const char* kTableExists = "SELECT to_regclass('ductus_migrations') IS NOT NULL";

constexpr const char* kRecord =
    "INSERT INTO ductus_migrations (version, name, checksum) VALUES ($1, $2, $3)";

// Every partition's relation size with its indexes and TOAST (a
// partitioned parent itself is empty).
constexpr const char* kTableSize = R"(
SELECT to_regclass($1) IS NOT NULL,
       coalesce(CASE WHEN (SELECT relkind FROM pg_class WHERE oid = to_regclass($1)) = 'p'
                     THEN (SELECT sum(pg_total_relation_size(relid))::int8
                           FROM pg_partition_tree(to_regclass($1)))
                     ELSE pg_total_relation_size(to_regclass($1)) END, 0))";

std::string lockKey() { return std::to_string(kMigrationLock); }

}  // namespace

void Migrator::readApplied(std::function<void(Result<std::vector<Applied>>)> cb) {
  conn_.query(kTableExists, {}, [this, cb](Result<PgResult> r) {
    if (!r)
      return cb(Error{"reading applied migrations: " + r.error().message, r.error().kind,
                      r.error().sqlstate});
    if (r->text(0, 0) != "t") return cb(std::vector<Applied>{});
    conn_.query(kReadApplied, {}, [cb](Result<PgResult> r) {
      if (!r)
        return cb(Error{"reading applied migrations: " + r.error().message, r.error().kind,
                        r.error().sqlstate});
      std::vector<Applied> out;
      for (int i = 0; i < r->rows(); ++i)
        out.push_back(Applied{static_cast<int>(r->integer(i, 0)), std::string(r->text(i, 1)),
                              std::string(r->text(i, 2))});
      cb(std::move(out));
    });
  });
}

void Migrator::migrate(std::function<void(Result<MigrateReport>)> cb) {
  // Nearly every start finds the database up to date: what is applied is
  // read first without the lock (two round trips, not five), and the
  // locked path runs only when something is missing or differs. Applied
  // rows are only ever added, so "every migration this binary has is
  // applied, checksum and all" can't be undone by an engine migrating
  // beside this one.
  readApplied([this, cb](Result<std::vector<Applied>> applied) {
    // A database that can't be read (down, refused, TLS) is said as it is.
    if (!applied) return cb(applied.error());
    std::map<int, const Applied*> byVersion;
    for (auto& a : *applied) byVersion[a.version] = &a;
    bool upToDate = true;
    for (auto& m : migrations_) {
      auto it = byVersion.find(m.version);
      if (it == byVersion.end() || it->second->checksum != m.checksum) {
        upToDate = false;
        break;
      }
      byVersion.erase(it);
    }
    if (upToDate) {
      MigrateReport report;
      for (auto& [v, a] : byVersion) report.unknown.push_back(a->name);
      return cb(std::move(report));
    }
    migrateLocked(cb);
  });
}

void Migrator::migrateLocked(std::function<void(Result<MigrateReport>)> cb) {
  // The lock is released on every path (and by the server if the
  // connection drops).
  auto finish = [this, cb](Result<MigrateReport> r) {
    conn_.query("SELECT pg_advisory_unlock($1::int8)", {lockKey()},
                [cb, r = std::move(r)](Result<PgResult>) mutable { cb(std::move(r)); });
  };
  conn_.query(
      "SELECT pg_advisory_lock($1::int8)", {lockKey()}, [this, cb, finish](Result<PgResult> r) {
        if (!r)
          return cb(Error{"taking the migration lock: " + r.error().message, r.error().kind,
                          r.error().sqlstate});
        conn_.query(kCreateTable, {}, [this, finish](Result<PgResult> r) {
          if (!r)
            return finish(Error{"creating ductus_migrations: " + r.error().message, r.error().kind,
                                r.error().sqlstate});
          readApplied([this, finish](Result<std::vector<Applied>> applied) {
            if (!applied) return finish(applied.error());
            std::map<int, Applied> byVersion;
            for (auto& a : *applied) byVersion[a.version] = a;
            auto report = std::make_shared<MigrateReport>();
            for (auto& m : migrations_) {
              auto it = byVersion.find(m.version);
              if (it == byVersion.end()) continue;
              if (it->second.checksum != m.checksum)
                return finish(Error{"migration " + m.name +
                                    " was changed after it was applied (checksum " +
                                    it->second.checksum.substr(0, 12) + "… in the database, " +
                                    m.checksum.substr(0, 12) +
                                    "… in this binary): applied migrations must never change"});
              byVersion.erase(it);
            }
            for (auto& [v, a] : byVersion) report->unknown.push_back(a.name);
            // What is left to apply: known versions absent from the database.
            std::map<int, bool> done;
            for (auto& a : *applied) done[a.version] = true;
            std::vector<Migration> todo;
            for (auto& m : migrations_)
              if (!done.count(m.version)) todo.push_back(m);
            migrations_ = std::move(todo);
            applyFrom(0, report, finish);
          });
        });
      });
}

void Migrator::applyFrom(size_t i, std::shared_ptr<MigrateReport> report,
                         std::function<void(Result<MigrateReport>)> cb) {
  if (i == migrations_.size()) return cb(*report);
  const Migration& m = migrations_[i];
  auto error = std::make_shared<std::optional<Error>>();
  auto note = [error, name = m.name](const char* step) {
    return [error, name, step](Result<PgResult> r) {
      if (!r && !*error)
        *error = Error{"migration " + name + " failed (" + step + "): " + r.error().message,
                       r.error().kind, r.error().sqlstate};
    };
  };
  conn_.script("BEGIN", note("begin"));
  // The file's text as shipped; several statements, no parameters.
  conn_.script(m.sql, note("running its SQL"));
  conn_.query(kRecord, {std::to_string(m.version), m.name, m.checksum}, note("recording it"));
  conn_.query("SELECT 1", {}, [this, i, report, cb, error, name = m.name](Result<PgResult>) {
    if (*error) {
      conn_.script("ROLLBACK", [cb, error](Result<PgResult>) { cb(**error); });
      return;
    }
    conn_.script("COMMIT", [this, i, report, cb, name](Result<PgResult> r) {
      if (!r)
        return cb(Error{"migration " + name + " failed (commit): " + r.error().message,
                        r.error().kind, r.error().sqlstate});
      report->applied.push_back(name);
      applyFrom(i + 1, report, cb);
    });
  });
}

void Migrator::check(std::function<void(Result<UpgradePlan>)> cb) {
  readApplied([this, cb](Result<std::vector<Applied>> applied) {
    if (!applied) return cb(applied.error());
    auto plan = std::make_shared<UpgradePlan>();
    std::map<int, Applied> byVersion;
    for (auto& a : *applied) byVersion[a.version] = a;
    std::vector<const Migration*> pending;
    for (auto& m : migrations_) {
      auto it = byVersion.find(m.version);
      if (it == byVersion.end()) {
        pending.push_back(&m);
        continue;
      }
      if (it->second.checksum != m.checksum) plan->changed.push_back(m.name);
      byVersion.erase(it);
    }
    for (auto& [v, a] : byVersion) plan->unknown.push_back(a.name);
    for (auto* m : pending) {
      PendingMigration p{m->name, m->upgrade, {}};
      for (auto& t : m->heavy) p.heavy.push_back(HeavyTable{t});
      plan->pending.push_back(std::move(p));
    }
    // Sizes, one query per heavy table, queued in order; the last answers.
    auto error = std::make_shared<std::optional<Error>>();
    for (auto& p : plan->pending)
      for (auto& h : p.heavy)
        conn_.query(kTableSize, {h.name}, [&h, error, plan](Result<PgResult> r) {
          if (!r) {
            if (!*error) *error = r.error();
            return;
          }
          h.exists = r->text(0, 0) == "t";
          h.bytes = r->integer(0, 1);
        });
    conn_.query("SELECT 1", {}, [cb, plan, error](Result<PgResult>) {
      if (*error) return cb(Error{"measuring heavy tables: " + (*error)->message});
      cb(*plan);
    });
  });
}

}  // namespace ductus::store
