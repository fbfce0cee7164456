#include "supervisor/services/sqlserver/odbc_connection.h"

#include <sql.h>
#include <sqlext.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <tuple>

#include "supervisor/services/db_result_caps.h"
#include "supervisor/services/sqlserver/freetds_conf.h"
#include "supervisor/services/sqlserver/row_json.h"

#ifndef DUCTUS_TDSODBC_PATH
#define DUCTUS_TDSODBC_PATH "libtdsodbc.so"
#endif

namespace ductus::supervisor::services::sqlserver {
namespace {

// A value in the ODBC connection string, braced so a ; or = in a password
// is part of it. FreeTDS ends a braced value at the first "};" and does
// not read "}}" as one "}" (tried against the driver), so a value holding
// "};" cannot be passed at all and is refused.
Result<std::string> braced(const std::string& what, const std::string& v) {
  if (v.find("};") != std::string::npos)
    return Error{what + " contains \"};\", which FreeTDS's connection string cannot carry",
                 ErrorKind::Invalid};
  return "{" + v + "}";
}

struct Diagnostic {
  std::string sqlstate;
  SQLINTEGER native = 0;
  std::string message;
};

std::vector<Diagnostic> diagnostics(SQLSMALLINT type, SQLHANDLE handle) {
  std::vector<Diagnostic> out;
  for (SQLSMALLINT i = 1; i <= 5; ++i) {
    SQLCHAR state[6] = {0};
    SQLCHAR text[1024] = {0};
    SQLINTEGER native = 0;
    SQLSMALLINT len = 0;
    SQLRETURN rc = SQLGetDiagRec(type, handle, i, state, &native, text, sizeof text, &len);
    if (!SQL_SUCCEEDED(rc)) break;
    out.push_back({reinterpret_cast<char*>(state), native, reinterpret_cast<char*>(text)});
  }
  return out;
}

// Worth waiting out: the connection, the login, a timeout, a deadlock
// victim. The rest is the statement's mistake.
bool transientState(const std::string& s) {
  return s.starts_with("08") || s.starts_with("HYT") || s.starts_with("28") || s == "40001";
}

// "[FreeTDS][SQL Server]Invalid object name 'x'." → the server's words, with
// its error number.
std::string describe(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) {
    std::string text = d.message;
    while (!text.empty() && text[0] == '[') {
      size_t close = text.find(']');
      if (close == std::string::npos) break;
      text.erase(0, close + 1);
    }
    if (!out.empty()) out += "; ";
    out += text + " (SQLSTATE " + d.sqlstate +
           (d.native ? ", error " + std::to_string(d.native) : "") + ")";
  }
  return out.empty() ? "no detail from the driver" : out;
}

Error errorOf(const std::string& what, SQLSMALLINT type, SQLHANDLE handle, bool connecting) {
  auto ds = diagnostics(type, handle);
  // FreeTDS reports a lost connection as 01000 with its own numbers:
  // 20002 connection failed, 20003 read timeout, 20004 read failed,
  // 20006 write failed, 20009 unable to connect, 20017 unexpected EOF.
  auto lost = [](SQLINTEGER n) {
    return n == 20002 || n == 20003 || n == 20004 || n == 20006 || n == 20009 || n == 20017;
  };
  bool transient = connecting;
  for (const auto& d : ds) transient = transient || transientState(d.sqlstate) || lost(d.native);
  return Error{what + ": " + describe(ds), transient ? ErrorKind::Unavailable : ErrorKind::Invalid};
}

// Owns an ODBC handle; freed once.
struct Handle {
  SQLSMALLINT type = 0;
  SQLHANDLE h = SQL_NULL_HANDLE;
  Handle() = default;
  Handle(SQLSMALLINT t, SQLHANDLE parent) { alloc(t, parent); }
  void alloc(SQLSMALLINT t, SQLHANDLE parent) {
    type = t;
    if (!SQL_SUCCEEDED(SQLAllocHandle(t, parent, &h))) h = SQL_NULL_HANDLE;
  }
  ~Handle() {
    if (h != SQL_NULL_HANDLE) SQLFreeHandle(type, h);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

SQLULEN timeoutSeconds(std::chrono::milliseconds t) {
  return static_cast<SQLULEN>(std::max<int64_t>(1, (t.count() + 999) / 1000));
}

}  // namespace

const char* driverPath() { return DUCTUS_TDSODBC_PATH; }

struct OdbcConnection::Handles {
  Handle env;
  Handle dbc;
  bool connected = false;
  std::string who;  // "sqlserver lab-db:1433"
  ~Handles() {
    if (connected) SQLDisconnect(dbc.h);
  }
};

OdbcConnection::OdbcConnection(std::unique_ptr<Handles> h) : h_(std::move(h)) {}
OdbcConnection::~OdbcConnection() = default;

Result<std::unique_ptr<OdbcConnection>> OdbcConnection::open(const ConnectSettings& s) {
  auto h = std::make_unique<Handles>();
  h->who = s.url.host + ":" + std::to_string(s.url.port);
  h->env.alloc(SQL_HANDLE_ENV, SQL_NULL_HANDLE);
  if (h->env.h == SQL_NULL_HANDLE) return Error{"ODBC: no environment handle"};
  SQLSetEnvAttr(h->env.h, SQL_ATTR_ODBC_VERSION, reinterpret_cast<SQLPOINTER>(SQL_OV_ODBC3), 0);
  h->dbc.alloc(SQL_HANDLE_DBC, h->env.h);
  if (h->dbc.h == SQL_NULL_HANDLE) return Error{"ODBC: no connection handle"};
  SQLSetConnectAttr(h->dbc.h, SQL_ATTR_LOGIN_TIMEOUT,
                    reinterpret_cast<SQLPOINTER>(timeoutSeconds(s.loginTimeout)), 0);
  // TLS always: the host, port and TLS choice come from the engine's
  // freetds.conf section (freetds_conf.h), the only place FreeTDS reads a
  // CA file and the name check from.
  auto section = FreetdsConf::sectionFor(s);
  if (!section) return section.error();
  std::string cs = "DRIVER={" + std::string(driverPath()) + "};SERVERNAME={" + *section + "}";
  for (const auto& [key, what, value] :
       {std::tuple<const char*, const char*, const std::string&>{"UID", "the user", s.url.user},
        {"PWD", "the password", s.url.password},
        {"APP", "the application name", s.appName},
        {"DATABASE", "the database name", s.url.database}}) {
    if (value.empty()) continue;
    auto v = braced(what, value);
    if (!v) {
      std::fill(cs.begin(), cs.end(), '\0');
      return Error{"connecting to SQL Server " + h->who + ": " + v.error().message,
                   ErrorKind::Invalid};
    }
    cs += std::string(";") + key + "=" + *v;
  }
  cs += ";ClientCharset=UTF-8";
  SQLRETURN rc = SQLDriverConnect(h->dbc.h, nullptr, reinterpret_cast<SQLCHAR*>(cs.data()),
                                  static_cast<SQLSMALLINT>(cs.size()), nullptr, 0, nullptr,
                                  SQL_DRIVER_NOPROMPT);
  std::fill(cs.begin(), cs.end(), '\0');
  if (!SQL_SUCCEEDED(rc))
    return errorOf("connecting to SQL Server " + h->who + " as " + s.url.user, SQL_HANDLE_DBC,
                   h->dbc.h, true);
  h->connected = true;
  return std::unique_ptr<OdbcConnection>(new OdbcConnection(std::move(h)));
}

namespace {

// The parameters bound to a statement, kept alive until it has run.
struct Bound {
  std::deque<std::string> texts;
  std::deque<int64_t> integers;
  std::deque<double> reals;
  std::deque<unsigned char> bits;
  std::deque<SQLLEN> lengths;
};

Status bindAll(SQLHSTMT stmt, const BoundStatement& st, const std::vector<Param>& params, Bound& b,
               const std::string& who) {
  for (size_t k = 0; k < st.order.size(); ++k) {
    const Param& p = params.at(st.order[k]);
    auto n = static_cast<SQLUSMALLINT>(k + 1);
    SQLRETURN rc = SQL_SUCCESS;
    switch (p.type) {
      case Param::Type::Null: {
        SQLLEN& ind = b.lengths.emplace_back(SQL_NULL_DATA);
        rc = SQLBindParameter(stmt, n, SQL_PARAM_INPUT, SQL_C_CHAR, SQL_VARCHAR, 1, 0, nullptr, 0,
                              &ind);
        break;
      }
      case Param::Type::Integer: {
        errno = 0;
        char* end = nullptr;
        long long v = std::strtoll(p.text.c_str(), &end, 10);
        if (errno == 0 && end && *end == '\0') {
          int64_t& slot = b.integers.emplace_back(v);
          SQLLEN& ind = b.lengths.emplace_back(0);
          rc = SQLBindParameter(stmt, n, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, &slot, 0,
                                &ind);
          break;
        }
        [[fallthrough]];  // beyond 64 bits: as a float, as JavaScript had it
      }
      case Param::Type::Real: {
        double& slot = b.reals.emplace_back(std::strtod(p.text.c_str(), nullptr));
        SQLLEN& ind = b.lengths.emplace_back(0);
        rc = SQLBindParameter(stmt, n, SQL_PARAM_INPUT, SQL_C_DOUBLE, SQL_DOUBLE, 0, 0, &slot, 0,
                              &ind);
        break;
      }
      case Param::Type::Boolean: {
        unsigned char& slot = b.bits.emplace_back(p.text == "1" ? 1 : 0);
        SQLLEN& ind = b.lengths.emplace_back(0);
        rc = SQLBindParameter(stmt, n, SQL_PARAM_INPUT, SQL_C_BIT, SQL_BIT, 1, 0, &slot, 0, &ind);
        break;
      }
      case Param::Type::Text: {
        std::string& slot = b.texts.emplace_back(p.text);
        SQLLEN& ind = b.lengths.emplace_back(static_cast<SQLLEN>(slot.size()));
        // nvarchar: the text is UTF-8 (ClientCharset), sent as UTF-16.
        // Past 4,000 characters, nvarchar(max).
        SQLULEN chars = std::max<SQLULEN>(1, slot.size());
        SQLSMALLINT type = chars > 4000 ? SQL_WLONGVARCHAR : SQL_WVARCHAR;
        rc = SQLBindParameter(stmt, n, SQL_PARAM_INPUT, SQL_C_CHAR, type, chars, 0, slot.data(),
                              static_cast<SQLLEN>(slot.size()), &ind);
        break;
      }
    }
    if (!SQL_SUCCEEDED(rc))
      return errorOf(who + ": binding $" + std::to_string(st.order[k] + 1), SQL_HANDLE_STMT, stmt,
                     false);
  }
  return {};
}

// One column's value, whole: chunks of SQLGetData until the driver has no
// more. nullopt for NULL.
Result<std::optional<std::string>> readValue(SQLHSTMT stmt, SQLUSMALLINT col, bool binary,
                                             const std::string& who) {
  std::string out;
  char buf[65536];
  SQLSMALLINT ctype = binary ? SQL_C_BINARY : SQL_C_CHAR;
  size_t room = binary ? sizeof buf : sizeof buf - 1;  // SQL_C_CHAR ends each chunk with a NUL
  for (;;) {
    SQLLEN ind = 0;
    SQLRETURN rc = SQLGetData(stmt, col, ctype, buf, sizeof buf, &ind);
    if (rc == SQL_NO_DATA) break;
    if (!SQL_SUCCEEDED(rc))
      return errorOf(who + ": reading column " + std::to_string(col), SQL_HANDLE_STMT, stmt, false);
    if (ind == SQL_NULL_DATA) return std::optional<std::string>{};
    bool more =
        rc == SQL_SUCCESS_WITH_INFO && (ind == SQL_NO_TOTAL || static_cast<size_t>(ind) > room);
    size_t got = more ? room : static_cast<size_t>(ind);
    out.append(buf, std::min(got, room));
    if (!more) break;
  }
  return std::optional<std::string>(std::move(out));
}

// Binds the parameters and runs the statement with its timeout: the
// driver's return code (SQL_SUCCESS, _WITH_INFO or SQL_NO_DATA).
Result<SQLRETURN> runStatement(SQLHDBC dbc, Handle& stmt, Bound& bound, const BoundStatement& st,
                               const std::vector<Param>& params, std::chrono::milliseconds timeout,
                               const std::string& who) {
  if (stmt.h == SQL_NULL_HANDLE)
    return errorOf(who + ": a statement handle", SQL_HANDLE_DBC, dbc, true);
  SQLSetStmtAttr(stmt.h, SQL_ATTR_QUERY_TIMEOUT,
                 reinterpret_cast<SQLPOINTER>(timeoutSeconds(timeout)), 0);
  if (auto s = bindAll(stmt.h, st, params, bound, who); !s) return s.error();
  SQLRETURN rc =
      SQLExecDirect(stmt.h, reinterpret_cast<SQLCHAR*>(const_cast<char*>(st.sql.c_str())), SQL_NTS);
  if (!SQL_SUCCEEDED(rc) && rc != SQL_NO_DATA) return errorOf(who, SQL_HANDLE_STMT, stmt.h, false);
  return rc;
}

}  // namespace

Result<std::string> OdbcConnection::query(const BoundStatement& st,
                                          const std::vector<Param>& params, const Caps& caps,
                                          std::chrono::milliseconds timeout) {
  const std::string who = "SQL Server " + h_->who;
  Handle stmt(SQL_HANDLE_STMT, h_->dbc.h);
  Bound bound;
  auto ran = runStatement(h_->dbc.h, stmt, bound, st, params, timeout, who);
  if (!ran) return ran.error();
  SQLRETURN rc = *ran;
  // The first result that has columns (a SET or an INSERT before the
  // SELECT gives none).
  SQLSMALLINT cols = 0;
  for (;;) {
    if (rc != SQL_NO_DATA) SQLNumResultCols(stmt.h, &cols);
    if (cols > 0) break;
    rc = SQLMoreResults(stmt.h);
    if (rc == SQL_NO_DATA) return std::string("[]");
    if (!SQL_SUCCEEDED(rc)) return errorOf(who, SQL_HANDLE_STMT, stmt.h, false);
  }
  std::vector<std::string> keys;
  std::vector<ValueKind> kinds;
  for (SQLSMALLINT c = 1; c <= cols; ++c) {
    SQLCHAR name[256] = {0};
    SQLSMALLINT nameLen = 0, type = 0, digits = 0, nullable = 0;
    SQLULEN size = 0;
    SQLDescribeCol(stmt.h, static_cast<SQLUSMALLINT>(c), name, sizeof name, &nameLen, &type, &size,
                   &digits, &nullable);
    keys.push_back(columnKey(reinterpret_cast<char*>(name), static_cast<size_t>(c)));
    kinds.push_back(valueKindOf(type));
  }
  std::string json = "[";
  size_t rows = 0;
  for (;;) {
    rc = SQLFetch(stmt.h);
    if (rc == SQL_NO_DATA) break;
    if (!SQL_SUCCEEDED(rc)) return errorOf(who, SQL_HANDLE_STMT, stmt.h, false);
    if (++rows > caps.maxRows) return Error{tooManyRows(caps.maxRows, "TOP"), ErrorKind::Invalid};
    json += rows == 1 ? "{" : ",{";
    for (size_t c = 0; c < keys.size(); ++c) {
      auto v =
          readValue(stmt.h, static_cast<SQLUSMALLINT>(c + 1), kinds[c] == ValueKind::Binary, who);
      if (!v) return v.error();
      if (c) json += ',';
      json += keys[c];
      json += ':';
      if (!*v)
        json += "null";
      else
        appendJsonValue(json, kinds[c], **v);
      if (json.size() > caps.maxBytes) break;
    }
    json += '}';
    if (json.size() > caps.maxBytes) return Error{tooManyBytes(caps.maxBytes), ErrorKind::Invalid};
  }
  // Only the first result set; freeing the statement discards the rest.
  return json + "]";
}

Result<std::string> OdbcConnection::execute(const BoundStatement& st,
                                            const std::vector<Param>& params,
                                            std::chrono::milliseconds timeout) {
  const std::string who = "SQL Server " + h_->who;
  Handle stmt(SQL_HANDLE_STMT, h_->dbc.h);
  Bound bound;
  auto ran = runStatement(h_->dbc.h, stmt, bound, st, params, timeout, who);
  if (!ran) return ran.error();
  SQLRETURN rc = *ran;
  SQLLEN count = 0;
  if (rc != SQL_NO_DATA) SQLRowCount(stmt.h, &count);
  return "{\"rowCount\":" + std::to_string(std::max<SQLLEN>(0, count)) + "}";
}

}  // namespace ductus::supervisor::services::sqlserver
