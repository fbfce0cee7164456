#include "common/config/sqlserver_url.h"

namespace ductus::config {
namespace {

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> percentDecoded(std::string_view s, const char* what) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    int hi = i + 2 < s.size() ? hexValue(s[i + 1]) : -1;
    int lo = i + 2 < s.size() ? hexValue(s[i + 2]) : -1;
    if (hi < 0 || lo < 0)
      return Error{std::string("a % in the ") + what + " is not followed by two hex digits",
                   ErrorKind::Invalid};
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

}  // namespace

Result<SqlServerUrl> parseSqlServerUrl(std::string_view url) {
  const std::string_view scheme = "sqlserver://";
  auto bad = [](std::string why) {
    return Error{why + " (expected sqlserver://user:password@host[:port]/database)",
                 ErrorKind::Invalid};
  };
  if (url.substr(0, scheme.size()) != scheme) return bad("not a sqlserver:// URL");
  std::string_view rest = url.substr(scheme.size());
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  if (path.find_first_of("?#") != std::string_view::npos)
    return bad("options after the database name are not read: give them as keys beside url:");
  SqlServerUrl out;
  size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return bad("no user@ before the host");
  std::string_view userinfo = authority.substr(0, at);
  std::string_view hostport = authority.substr(at + 1);
  size_t colon = userinfo.find(':');
  auto user = percentDecoded(userinfo.substr(0, colon), "user name");
  if (!user) return user.error();
  if (user->empty()) return bad("no user name");
  out.user = *user;
  if (colon != std::string_view::npos) {
    auto password = percentDecoded(userinfo.substr(colon + 1), "password");
    if (!password) return password.error();
    out.password = *password;
  }
  std::string_view host = hostport;
  if (!hostport.empty() && hostport[0] == '[') {
    size_t close = hostport.find(']');
    if (close == std::string_view::npos) return bad("an IPv6 address without its closing ]");
    host = hostport.substr(1, close - 1);
    hostport.remove_prefix(close + 1);
    if (!hostport.empty() && hostport[0] != ':') return bad("something after the ] of the address");
  } else {
    size_t pc = hostport.rfind(':');
    host = hostport.substr(0, pc);
    hostport = pc == std::string_view::npos ? std::string_view{} : hostport.substr(pc);
  }
  if (host.empty()) return bad("no host");
  out.host = std::string(host);
  if (!hostport.empty()) {
    std::string_view digits = hostport.substr(1);
    unsigned port = 0;
    if (digits.empty() || digits.size() > 5) return bad("the port is not a number from 1 to 65535");
    for (char c : digits) {
      if (c < '0' || c > '9') return bad("the port is not a number from 1 to 65535");
      port = port * 10 + static_cast<unsigned>(c - '0');
    }
    if (port == 0 || port > 65535) return bad("the port is not a number from 1 to 65535");
    out.port = static_cast<uint16_t>(port);
  }
  auto database = percentDecoded(path, "database name");
  if (!database) return database.error();
  out.database = *database;
  // The values go into an ODBC connection string, where ; and braces
  // have meaning; the driver's own quoting of them is not relied on.
  for (const std::string* v : {&out.user, &out.host, &out.database})
    if (v->find_first_of(";{}\r\n") != std::string::npos || v->find('\0') != std::string::npos)
      return bad("a ; { } or line break in the user, host or database name");
  if (out.password.find_first_of("\r\n") != std::string::npos ||
      out.password.find('\0') != std::string::npos)
    return bad("a line break in the password");
  return out;
}

}  // namespace ductus::config
