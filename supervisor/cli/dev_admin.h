// The administrator `ductus dev` makes on its throwaway database, so the
// API (and the console on it) can be tried at once: a user `admin` with a
// generated password and a token of the same rights, written to a file in
// the dev folder (mode 0600) and printed at every start. A later `ductus
// dev` on the same folder reads the file instead of making new ones.
#pragma once

#include <filesystem>
#include <string>

#include "common/result.h"

namespace ductus::supervisor {

struct DevAdmin {
  std::string user = "admin";
  std::string password;
  std::string token;  // dux_...
};

// `dir` is the dev folder; `databaseUrl` its PostgreSQL (migrated here if
// it is not yet, as `ductus user create` would).
Result<DevAdmin> ensureDevAdmin(const std::filesystem::path& dir, const std::string& databaseUrl);

}  // namespace ductus::supervisor
