#include "supervisor/services/sqlserver/parameters.h"

namespace ductus::supervisor::services::sqlserver {

Result<BoundStatement> bindMarkers(std::string_view sql, size_t count) {
  BoundStatement out;
  out.sql.reserve(sql.size());
  size_t i = 0;
  auto unclosed = [](const char* what) {
    return Error{std::string("the statement ends inside ") + what, ErrorKind::Invalid};
  };
  while (i < sql.size()) {
    char c = sql[i];
    if (c == '\'' || c == '"' || c == '[') {
      // A literal or a quoted name, to its closing quote; a doubled
      // closing quote ('' or ]] or "") is one character of it.
      char close = c == '[' ? ']' : c;
      size_t j = i + 1;
      for (;;) {
        if (j >= sql.size()) return unclosed(c == '\'' ? "a '...' literal" : "a quoted name");
        if (sql[j] == close) {
          if (j + 1 < sql.size() && sql[j + 1] == close) {
            j += 2;
            continue;
          }
          break;
        }
        ++j;
      }
      out.sql.append(sql.substr(i, j + 1 - i));
      i = j + 1;
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      size_t end = sql.find('\n', i);
      if (end == std::string_view::npos) end = sql.size();
      out.sql.append(sql.substr(i, end - i));
      i = end;
    } else if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
      // T-SQL's block comments nest.
      size_t j = i + 2;
      int depth = 1;
      while (depth > 0) {
        if (j + 1 >= sql.size()) return unclosed("a /* comment */");
        if (sql[j] == '/' && sql[j + 1] == '*') {
          ++depth;
          j += 2;
        } else if (sql[j] == '*' && sql[j + 1] == '/') {
          --depth;
          j += 2;
        } else {
          ++j;
        }
      }
      out.sql.append(sql.substr(i, j - i));
      i = j;
    } else if (c == '$' && i + 1 < sql.size() && sql[i + 1] >= '0' && sql[i + 1] <= '9') {
      size_t j = i + 1;
      size_t n = 0;
      while (j < sql.size() && sql[j] >= '0' && sql[j] <= '9') {
        n = n * 10 + static_cast<size_t>(sql[j] - '0');
        if (n > 100000) break;
        ++j;
      }
      if (n == 0 || n > count)
        return Error{"$" + std::string(sql.substr(i + 1, j - i - 1)) + " names no parameter (" +
                         std::to_string(count) + (count == 1 ? " was" : " were") + " given)",
                     ErrorKind::Invalid};
      out.sql.push_back('?');
      out.order.push_back(n - 1);
      i = j;
    } else if (c == '?') {
      return Error{"a bare ? outside a literal: db() binds $1, $2 ...", ErrorKind::Invalid};
    } else {
      out.sql.push_back(c);
      ++i;
    }
  }
  return out;
}

}  // namespace ductus::supervisor::services::sqlserver
