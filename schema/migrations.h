// The migrations this binary knows: numbered SQL files, embedded at build
// time (schema/embed_migrations.cmake). Each starts with two header lines,
// `-- Upgrade: <what it does>` and `-- Heavy: <existing tables it works
// through, or none>`, which `ductus upgrade --check` shows. An applied file
// is identified by the SHA-256 of its whole text.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace ductus::store {

struct MigrationFile {
  std::string name;  // "0001_message_store.sql"
  std::string text;
};

struct Migration {
  int version = 0;           // 1 for 0001_...
  std::string name;          // file name without ".sql"
  std::string sql;           // the whole text
  std::string checksum;      // SHA-256 of sql, lowercase hex
  std::string upgrade;       // the -- Upgrade: line
  std::vector<std::string> heavy;  // tables of the -- Heavy: line (empty for none)
};

// The files compiled into this binary (generated source).
const std::vector<MigrationFile>& embeddedMigrationFiles();

// Parses and checks files: names NNNN_name.sql, versions unique, both
// header lines present. Sorted by version.
Result<std::vector<Migration>> parseMigrations(const std::vector<MigrationFile>& files);

// parseMigrations(embeddedMigrationFiles()).
Result<std::vector<Migration>> embeddedMigrations();

}  // namespace ductus::store
