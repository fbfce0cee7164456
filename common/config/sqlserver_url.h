// A SQL Server database as resources.yaml writes its url:
//   sqlserver://user:password@host[:port]/database
// user and password percent-encoded as in any URL (the password usually
// ${secret:...}). Read once here, for validate's check and for the
// connection the engine opens (supervisor/services/sqlserver/).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace ductus::config {

struct SqlServerUrl {
  std::string host;
  uint16_t port = 1433;
  std::string user;
  std::string password;
  std::string database;  // empty: the login's default database
};

// Invalid with what is wrong, never quoting the password.
Result<SqlServerUrl> parseSqlServerUrl(std::string_view url);

}  // namespace ductus::config
