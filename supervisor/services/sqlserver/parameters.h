// db()'s $1, $2 ... in a SQL Server statement: each becomes the ODBC
// driver's marker `?`, and the values are bound in the order the markers
// now stand (FreeTDS sends them as @P1, @P2 ... of sp_executesql, so they
// are always parameters, never text in the statement). A $n inside a
// '...' or N'...' literal, a [quoted] or "quoted" name, or a -- or
// /* */ comment (T-SQL nests them) is text and stays as it is.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace ductus::supervisor::services::sqlserver {

struct BoundStatement {
  std::string sql;            // with `?` for each $n
  std::vector<size_t> order;  // for each `?`, which parameter (0-based) it binds
};

// Invalid when a $n names no parameter (there are `count`), when a bare `?`
// stands outside a literal (it would be a marker the script did not mean:
// write $1), or when a literal, name or comment is not closed.
Result<BoundStatement> bindMarkers(std::string_view sql, size_t count);

}  // namespace ductus::supervisor::services::sqlserver
