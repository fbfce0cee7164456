// Migrations are expand-only: an older binary still running (or reinstalled
// for a rollback) must find every table and column it uses. This scans the
// migration files themselves, so a DROP or RENAME fails the build's tests.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "schema/migrations.h"

namespace ductus::store {
namespace {

// SQL without comments, upper-cased, whitespace folded.
std::string normalized(const std::string& sql) {
  std::string out;
  for (size_t i = 0; i < sql.size(); ++i) {
    if (sql.compare(i, 2, "--") == 0) {
      while (i < sql.size() && sql[i] != '\n') ++i;
      out.push_back(' ');
      continue;
    }
    if (sql.compare(i, 2, "/*") == 0) {
      size_t end = sql.find("*/", i + 2);
      i = end == std::string::npos ? sql.size() : end + 1;
      out.push_back(' ');
      continue;
    }
    char c = static_cast<char>(std::toupper(static_cast<unsigned char>(sql[i])));
    if (std::isspace(static_cast<unsigned char>(c))) c = ' ';
    if (c == ' ' && !out.empty() && out.back() == ' ') continue;
    out.push_back(c);
  }
  return out;
}

// The first destructive statement in a migration, or "". Two kinds of
// DROP are allowed, by name: the tier CHECKs of messages and deliveries,
// relaxed for the held area (migration 0013), and the foreign keys of
// interface_owners, which cost every start 2,002 lookups (migration 0018).
// Neither takes anything from an older binary: it never writes tier 0, and
// it never relied on a claim being refused by a key. Any other constraint
// still counts.
std::string firstContraction(const std::string& sql) {
  static const std::regex allowed(
      R"(ALTER TABLE (MESSAGES|DELIVERIES) DROP CONSTRAINT \1_TIER_CHECK ?;|)"
      R"(ALTER TABLE INTERFACE_OWNERS DROP CONSTRAINT INTERFACE_OWNERS_(ENGINE|INTERFACE)_ID_FKEY ?;)");
  static const std::regex bad(
      R"(DROP (TABLE|COLUMN|VIEW|MATERIALIZED VIEW|SCHEMA)\b|ALTER TABLE [^;]*\bDROP\b [^;]*|RENAME\b[^;]*|TRUNCATE\b)");
  std::smatch m;
  std::string n = std::regex_replace(normalized(sql), allowed, " ");
  if (std::regex_search(n, m, bad)) return m.str(0);
  return "";
}

std::vector<MigrationFile> filesOnDisk() {
  std::vector<MigrationFile> out;
  for (auto& e : std::filesystem::directory_iterator(DUCTUS_SOURCE_DIR "/schema/migrations")) {
    if (e.path().extension() != ".sql") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    out.push_back({e.path().filename().string(), ss.str()});
  }
  return out;
}

TEST(ExpandOnly, NoMigrationDropsOrRenamesATableOrColumn) {
  auto files = filesOnDisk();
  ASSERT_FALSE(files.empty());
  for (auto& f : files) EXPECT_EQ(firstContraction(f.text), "") << f.name;
}

TEST(ExpandOnly, TheScanCatchesDropsAndRenamesButNotComments) {
  EXPECT_NE(firstContraction("ALTER TABLE messages DROP COLUMN payload;"), "");
  EXPECT_NE(firstContraction("alter table messages\n  drop   payload;"), "");
  EXPECT_NE(firstContraction("DROP TABLE dedupe_keys;"), "");
  EXPECT_NE(firstContraction("ALTER TABLE messages RENAME COLUMN payload TO body;"), "");
  EXPECT_NE(firstContraction("ALTER TABLE messages RENAME TO msgs;"), "");
  EXPECT_EQ(firstContraction("-- never DROP TABLE here\nCREATE TABLE x (id int);"), "");
  EXPECT_EQ(firstContraction("CREATE INDEX deliveries_dropped ON d (x);"), "");
}

TEST(ExpandOnly, OnlyTheTierChecksAndTheClaimsForeignKeysMayBeDropped) {
  EXPECT_EQ(firstContraction("ALTER TABLE messages DROP CONSTRAINT messages_tier_check;"), "");
  EXPECT_EQ(firstContraction("alter table deliveries\n drop constraint deliveries_tier_check ;"),
            "");
  EXPECT_NE(firstContraction("ALTER TABLE messages DROP CONSTRAINT messages_status_check;"), "");
  EXPECT_NE(firstContraction("ALTER TABLE messages DROP CONSTRAINT deliveries_tier_check;"), "");
  EXPECT_NE(firstContraction("ALTER TABLE users DROP CONSTRAINT users_tier_check;"), "");
  EXPECT_EQ(firstContraction("ALTER TABLE interface_owners DROP CONSTRAINT "
                             "interface_owners_engine_id_fkey;"),
            "");
  EXPECT_NE(firstContraction("ALTER TABLE interface_owners DROP CONSTRAINT "
                             "interface_owners_pkey;"),
            "");
  EXPECT_NE(firstContraction("ALTER TABLE deliveries DROP CONSTRAINT "
                             "interface_owners_engine_id_fkey;"),
            "");
  EXPECT_NE(firstContraction("ALTER TABLE messages DROP CONSTRAINT messages_tier_check, "
                             "DROP COLUMN payload;"),
            "");
}

TEST(ExpandOnly, EveryMigrationHasItsHeadersAndTheBinaryCarriesTheFilesAsWritten) {
  auto disk = parseMigrations(filesOnDisk());
  ASSERT_TRUE(disk.ok()) << disk.error().message;
  auto embedded = embeddedMigrations();
  ASSERT_TRUE(embedded.ok()) << embedded.error().message;
  ASSERT_EQ(disk->size(), embedded->size());
  for (size_t i = 0; i < disk->size(); ++i) {
    EXPECT_EQ((*disk)[i].name, (*embedded)[i].name);
    EXPECT_EQ((*disk)[i].checksum, (*embedded)[i].checksum) << (*disk)[i].name;
    EXPECT_FALSE((*disk)[i].upgrade.empty());
  }
  auto bad = parseMigrations({{"0001_x.sql", "CREATE TABLE x (id int);\n"}});
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace ductus::store
