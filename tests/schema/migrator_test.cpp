// The migration runner against a real cluster: applied once, checksummed,
// a changed file refused, newer migrations tolerated, two runners at once,
// upgrade --check read-only, and the CLI commands.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <thread>

#include "schema/migrator.h"
#include "tests/schema/store_fixture.h"
#include "tests/support/exit_status.h"
#include "tests/support/test_env.h"

namespace ductus::store::test {
namespace {

std::vector<Migration> embedded() {
  auto m = embeddedMigrations();
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m ? *m : std::vector<Migration>{};
}

Result<MigrateReport> migrateWith(Sql& s, std::vector<Migration> migrations) {
  Migrator m(s.conn(), std::move(migrations));
  return await<MigrateReport>(s.loop(), [&](auto cb) { m.migrate(cb); });
}

Result<UpgradePlan> checkWith(Sql& s, std::vector<Migration> migrations) {
  Migrator m(s.conn(), std::move(migrations));
  return await<UpgradePlan>(s.loop(), [&](auto cb) { m.check(cb); });
}

Migration extra(int version, const std::string& name, const std::string& body,
                const std::string& heavy = "none") {
  auto parsed = parseMigrations(
      {{name + ".sql", "-- Upgrade: a test migration\n-- Heavy: " + heavy + "\n" + body}});
  EXPECT_TRUE(parsed.ok()) << parsed.error().message;
  auto m = parsed->at(0);
  EXPECT_EQ(m.version, version);
  return m;
}

TEST(Migrator, AppliesEveryMigrationOnceAndRecordsItsChecksum) {
  TestDatabase db;
  Sql s(db.conninfo());
  auto first = migrateWith(s, embedded());
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->applied.size(), embedded().size());
  auto second = migrateWith(s, embedded());
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_TRUE(second->applied.empty());
  for (auto& m : embedded()) {
    auto r = s("SELECT checksum FROM ductus_migrations WHERE version = $1",
               {std::to_string(m.version)});
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->rows(), 1) << m.name;
    EXPECT_EQ(r->text(0, 0), m.checksum);
  }
  auto tables = s("SELECT count(*) FROM pg_tables WHERE tablename IN "
                  "('messages_t7', 'deliveries_t49', 'dedupe_keys', 'source_state', "
                  "'interfaces', 'destinations', 'engines', 'interface_owners')");
  ASSERT_TRUE(tables.ok());
  EXPECT_EQ(tables->text(0, 0), "8");
}

TEST(Migrator, RefusesToRunWhenAnAppliedMigrationsFileChanged) {
  TestDatabase db;
  Sql s(db.conninfo());
  ASSERT_TRUE(migrateWith(s, embedded()).ok());
  auto changed = embedded();
  // One more comment line: the text differs, so the checksum does.
  auto reparsed = parseMigrations({{changed[0].name + ".sql", changed[0].sql + "-- edited\n"}});
  ASSERT_TRUE(reparsed.ok());
  changed[0] = reparsed->at(0);
  auto r = migrateWith(s, changed);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("was changed after it was applied"), std::string::npos)
      << r.error().message;
  auto plan = checkWith(s, changed);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->changed.size(), 1u);
}

TEST(Migrator, ToleratesMigrationsANewerBinaryApplied) {
  TestDatabase db;
  Sql s(db.conninfo());
  auto newer = embedded();
  newer.push_back(extra(9000, "9000_newer_feature", "CREATE TABLE newer_feature (id int);"));
  ASSERT_TRUE(migrateWith(s, newer).ok());
  // The older binary (without 9000) starts on the same database.
  auto r = migrateWith(s, embedded());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->applied.empty());
  ASSERT_EQ(r->unknown.size(), 1u);
  EXPECT_EQ(r->unknown[0], "9000_newer_feature");
}

TEST(Migrator, AFailingMigrationLeavesNothingBehindAndIsNotRecorded) {
  TestDatabase db;
  Sql s(db.conninfo());
  auto list = embedded();
  list.push_back(extra(9001, "9001_broken",
                       "CREATE TABLE half_done (id int);\nSELECT * FROM no_such_table;\n"));
  auto r = migrateWith(s, list);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("9001_broken"), std::string::npos) << r.error().message;
  auto t = s("SELECT to_regclass('half_done') IS NULL, "
             "(SELECT count(*) FROM ductus_migrations WHERE version = 9001)");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->text(0, 0), "t");
  EXPECT_EQ(t->text(0, 1), "0");
}

TEST(Migrator, TwoEnginesMigratingAtOnceApplyEachMigrationOnce) {
  TestDatabase db;
  // Two connections on one loop, both started before either answers: the
  // advisory lock makes the second wait and then find nothing to do.
  Sql a(db.conninfo());
  uv_loop_t* loop = a.loop();
  PgConnection other(loop);
  other.connect(db.conninfo(), [](Status) {});
  Migrator m1(a.conn(), embedded()), m2(other, embedded());
  std::optional<Result<MigrateReport>> r1, r2;
  m1.migrate([&](Result<MigrateReport> r) { r1 = std::move(r); });
  m2.migrate([&](Result<MigrateReport> r) { r2 = std::move(r); });
  while (!(r1 && r2) && uv_run(loop, UV_RUN_ONCE)) {
  }
  ASSERT_TRUE(r1 && r2);
  ASSERT_TRUE(r1->ok()) << r1->error().message;
  ASSERT_TRUE(r2->ok()) << r2->error().message;
  EXPECT_EQ((*r1)->applied.size() + (*r2)->applied.size(), embedded().size());
  auto n = a("SELECT count(*) FROM ductus_migrations");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->text(0, 0), std::to_string(embedded().size()));
}

// Nearly every start finds nothing to do: that is read without the lock,
// so an engine starting while another holds it (migrating) isn't held up
// when it has nothing to apply; one with something to apply still waits.
TEST(Migrator, AnUpToDateDatabaseIsCheckedWithoutTheLockAndAChangeStillWaitsForIt) {
  TestDatabase db;
  Sql s(db.conninfo());
  ASSERT_TRUE(migrateWith(s, embedded()).ok());
  Sql holder(db.conninfo());
  ASSERT_TRUE(holder("SELECT pg_advisory_lock($1::int8)", {std::to_string(kMigrationLock)}).ok());
  // A wait for the lock ends in an error here rather than a hung test.
  ASSERT_TRUE(s("SET lock_timeout = '1s'").ok());
  auto upToDate = migrateWith(s, embedded());
  ASSERT_TRUE(upToDate.ok()) << upToDate.error().message;
  EXPECT_TRUE(upToDate->applied.empty());
  auto newer = embedded();
  newer.push_back(extra(9000, "9000_newer_feature", "CREATE TABLE newer_feature (id int);"));
  auto waited = migrateWith(s, newer);
  ASSERT_FALSE(waited.ok());
  EXPECT_NE(waited.error().message.find("taking the migration lock"), std::string::npos)
      << waited.error().message;
  ASSERT_TRUE(holder("SELECT pg_advisory_unlock($1::int8)", {std::to_string(kMigrationLock)}).ok());
  auto applied = migrateWith(s, newer);
  ASSERT_TRUE(applied.ok()) << applied.error().message;
  ASSERT_EQ(applied->applied.size(), 1u);
}

TEST(Migrator, UpgradeCheckListsPendingWithHeadersAndHeavyTableSizesAndChangesNothing) {
  TestDatabase db;
  Sql s(db.conninfo());
  ASSERT_TRUE(migrateWith(s, embedded()).ok());
  ASSERT_TRUE(s("INSERT INTO interfaces (name) SELECT 'i' || g FROM generate_series(1, 500) g").ok());
  auto list = embedded();
  list.push_back(extra(9002, "9002_index_interfaces", "CREATE INDEX ON interfaces (created_at);",
                       "interfaces, messages, not_there"));
  auto plan = checkWith(s, list);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_EQ(plan->pending.size(), 1u);
  const auto& p = plan->pending[0];
  EXPECT_EQ(p.name, "9002_index_interfaces");
  EXPECT_EQ(p.upgrade, "a test migration");
  ASSERT_EQ(p.heavy.size(), 3u);
  EXPECT_TRUE(p.heavy[0].exists);
  EXPECT_GT(p.heavy[0].bytes, 8192);
  EXPECT_TRUE(p.heavy[1].exists);  // partitioned: summed over its tree
  EXPECT_FALSE(p.heavy[2].exists);
  auto n = s("SELECT count(*) FROM ductus_migrations WHERE version = 9002");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->text(0, 0), "0");
}

TEST(MigrateCommand, MigrateAppliesAndUpgradeCheckOnAFreshDatabaseCreatesNothing) {
  TestDatabase db;
  auto check = ductus::test::runChild(
      {ductus::test::ductusBinary(), "upgrade", "--check", "--database", db.conninfo()});
  ASSERT_TRUE(::ductus::test::exitedWith(check.exitStatus, 0)) << check.out;
  EXPECT_NE(check.out.find("pending 0001_message_store"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("  Upgrade: "), std::string::npos) << check.out;
  {
    Sql s(db.conninfo());
    auto r = s("SELECT to_regclass('ductus_migrations') IS NULL");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->text(0, 0), "t") << "upgrade --check created the migrations table";
  }
  // The URL through the environment, as systemd units give it.
  setenv("DUCTUS_DATABASE_URL", db.conninfo().c_str(), 1);
  auto migrate = ductus::test::runChild({ductus::test::ductusBinary(), "migrate"});
  unsetenv("DUCTUS_DATABASE_URL");
  ASSERT_TRUE(::ductus::test::exitedWith(migrate.exitStatus, 0))
      << migrate.out;
  EXPECT_NE(migrate.out.find("applied 0001_message_store"), std::string::npos) << migrate.out;
  auto again = ductus::test::runChild(
      {ductus::test::ductusBinary(), "migrate", "--database", db.conninfo()});
  EXPECT_NE(again.out.find("up to date"), std::string::npos) << again.out;
  auto none = ductus::test::runChild(
      {ductus::test::ductusBinary(), "upgrade", "--check", "--database", db.conninfo()});
  EXPECT_NE(none.out.find("no pending migrations"), std::string::npos) << none.out;
}

}  // namespace
}  // namespace ductus::store::test
