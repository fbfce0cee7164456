// One connection to SQL Server through FreeTDS's ODBC driver, loaded by
// path (no odbcinst.ini entry needed). Blocking: it is used on one
// connection thread at a time (sqlserver_pool.h), never on the loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config/sqlserver_url.h"
#include "common/result.h"
#include "supervisor/services/sqlserver/parameters.h"

namespace ductus::supervisor::services::sqlserver {

struct ConnectSettings {
  config::SqlServerUrl url;
  // TLS is always asked for. Verified against caFile (the system's roots
  // when empty), the server's name checked, unless trustServerCertificate.
  std::filesystem::path caFile;
  bool trustServerCertificate = false;
  std::chrono::milliseconds loginTimeout{15000};
  std::string appName = "ductus";
};

// A value db() binds: the script's JSON parameter, with its JSON type.
struct Param {
  enum class Type { Null, Text, Integer, Real, Boolean };
  Type type = Type::Null;
  std::string text;  // Text; Integer and Real as written; Boolean "1"/"0"
};

struct Caps {
  size_t maxRows = 10000;
  size_t maxBytes = 16u << 20;
};

// Failures: Unavailable for the connection, the login and timeouts (the
// message waits), Invalid for what the server refused in the statement
// (its number and words), Internal for the driver itself.
class OdbcConnection {
 public:
  static Result<std::unique_ptr<OdbcConnection>> open(const ConnectSettings& settings);
  ~OdbcConnection();
  OdbcConnection(const OdbcConnection&) = delete;
  OdbcConnection& operator=(const OdbcConnection&) = delete;

  // The first result set's rows as a JSON array of objects (row_json.h),
  // refused (Invalid) past the caps.
  Result<std::string> query(const BoundStatement& statement, const std::vector<Param>& params,
                            const Caps& caps, std::chrono::milliseconds timeout);
  // {"rowCount": n}.
  Result<std::string> execute(const BoundStatement& statement, const std::vector<Param>& params,
                              std::chrono::milliseconds timeout);

 private:
  struct Handles;
  explicit OdbcConnection(std::unique_ptr<Handles> h);
  std::unique_ptr<Handles> h_;
};

// The path of FreeTDS's ODBC driver found at build time.
const char* driverPath();

}  // namespace ductus::supervisor::services::sqlserver
