// Migrator: applies the migrations this binary carries, on one connection.
//
// - Two engines starting at once do not race: applying runs under a
//   session advisory lock (kMigrationLock), taken before the applied list is
//   read again. A database that already has every migration (nearly every
//   start) is found so without the lock: two round trips, not five.
// - Each migration runs in its own transaction together with its row in
//   ductus_migrations (version, name, SHA-256 of the whole file).
// - An applied migration whose file changed is refused (the database would
//   not be what the file says); applied migrations this binary doesn't know
//   are tolerated (a newer binary ran: rollback = reinstall the older one).
//
// check() is `ductus upgrade --check`: what would run, with each heavy
// table's current size. It takes no lock and changes nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "schema/migrations.h"
#include "schema/pg_connection.h"

namespace ductus::store {

// pg_advisory_lock key: "ductusmg" as bytes.
constexpr int64_t kMigrationLock = 0x6475637475736d67;

struct MigrateReport {
  std::vector<std::string> applied;  // names applied now
  std::vector<std::string> unknown;  // applied in the database, not in this binary
};

struct HeavyTable {
  std::string name;
  bool exists = false;
  int64_t bytes = 0;  // whole partition tree, indexes and TOAST included
};

struct PendingMigration {
  std::string name;
  std::string upgrade;
  std::vector<HeavyTable> heavy;
};

struct UpgradePlan {
  std::vector<PendingMigration> pending;
  std::vector<std::string> unknown;
  std::vector<std::string> changed;  // applied files whose text differs: migrate would refuse
};

class Migrator {
 public:
  // conn must be connected (or connecting: statements queue) and outlive
  // the callbacks.
  Migrator(PgConnection& conn, std::vector<Migration> migrations)
      : conn_(conn), migrations_(std::move(migrations)) {}

  void migrate(std::function<void(Result<MigrateReport>)> cb);
  void check(std::function<void(Result<UpgradePlan>)> cb);

 private:
  struct Applied {
    int version;
    std::string name, checksum;
  };
  void readApplied(std::function<void(Result<std::vector<Applied>>)> cb);
  // Under the migration lock: create the table, check, apply what is missing.
  void migrateLocked(std::function<void(Result<MigrateReport>)> cb);
  void applyFrom(size_t i, std::shared_ptr<MigrateReport> report,
                 std::function<void(Result<MigrateReport>)> cb);

  PgConnection& conn_;
  std::vector<Migration> migrations_;
};

}  // namespace ductus::store
