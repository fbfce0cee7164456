// `ductus migrate --database URL`: applies the migrations this binary
// carries (schema/migrator.h). `ductus upgrade --check --database URL`:
// lists the migrations a start would apply, with their headers and each
// heavy table's current size; changes nothing. Both also read
// DUCTUS_DATABASE_URL.
#pragma once

namespace ductus::supervisor {

int migrateCommand(int argc, char** argv);
int upgradeCommand(int argc, char** argv);

}  // namespace ductus::supervisor
