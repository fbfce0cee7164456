// What a db() call says when its result passes the caps (maxDbRows,
// maxDbResultBytes): one text for PostgreSQL (project_services.cpp) and
// SQL Server (sqlserver/odbc_connection.cpp), each naming its own way to
// select fewer rows.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ductus::supervisor::services {

// limitClause: "LIMIT" or "TOP".
inline std::string tooManyRows(size_t maxRows, std::string_view limitClause) {
  return "the result has more than " + std::to_string(maxRows) +
         " rows, the most a script may receive; select fewer (" + std::string(limitClause) +
         ") or page through them";
}

inline std::string tooManyBytes(size_t maxBytes) {
  return "the result is larger than " + std::to_string(maxBytes) +
         " bytes of JSON, the most a script may receive; select fewer rows or columns";
}

}  // namespace ductus::supervisor::services
